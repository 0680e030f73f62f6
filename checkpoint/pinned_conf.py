"""The confs Spark pins in every offsets file and how a restart takes them back (Spark 4.3's ``OffsetSeqMetadata``).

On restart Spark reads the conf of the LAST offsets file only and sets each relevant conf from it
(``setSessionConf``); a conf that file does not record gets Spark's backward-compatible default where there is one
(``relevantSQLConfDefaultValues``: the value older versions behaved with), else the session's own value. Which
operators a conf matters to decides whether a change can hurt the restart: the aggregation state format only
matters to streaming aggregations, the join state format only to stream-stream joins, and so on.
"""
from __future__ import annotations

from typing import Literal, Mapping

from wmcheck.checkpoint.records import dataclass

from .model import PINNED_CONFS, WATERMARK_POLICY

Scope = Literal["state", "rocksdb", "watermarks", "operators"]
"""Who a conf matters to: any stateful operator, RocksDB state only, a query with several watermarked inputs
(the policy combining them), or the operators named."""


@dataclass(frozen=True)
class PinnedConf:
    key: str
    legacy: str | None
    """The value Spark sets when the offsets file it restarts from lacks the conf; None: the session's value."""
    scope: Scope
    operators: frozenset[str] = frozenset()


ROCKSDB_PROVIDER = "RocksDBStateStoreProvider"
ROW_CHECKSUM = "spark.sql.streaming.stateStore.rowChecksum.enabled"
"""Whether state rows carry checksums (Spark 4.1+): rows written one way fail to load the other way."""

_TABLE = (
    PinnedConf(PINNED_CONFS["shuffle_partitions"], None, "state"),
    PinnedConf(PINNED_CONFS["state_provider"], None, "state"),
    PinnedConf(WATERMARK_POLICY, "min", "watermarks"),
    PinnedConf(PINNED_CONFS["aggregation_state_format"], "1", "operators", frozenset({"stateStoreSave"})),
    PinnedConf(PINNED_CONFS["join_state_format"], "1", "operators", frozenset({"symmetricHashJoin"})),
    PinnedConf(PINNED_CONFS["flatmapgroups_state_format"], "1", "operators",
               frozenset({"flatMapGroupsWithState", "applyInPandasWithState"})),
    PinnedConf(PINNED_CONFS["checkpoint_format"], None, "state"),
    PinnedConf(PINNED_CONFS["rocksdb_format"], None, "rocksdb"),
    PinnedConf(PINNED_CONFS["compression_codec"], "lz4", "state"),
    PinnedConf(PINNED_CONFS["encoding_format"], "unsaferow", "state"),
    PinnedConf(ROW_CHECKSUM, "false", "state"),
)
PINNED: Mapping[str, PinnedConf] = {c.key: c for c in _TABLE}


def effective(conf: Mapping[str, object], key: str) -> str | None:
    """The value a restart from an offsets file with ``conf`` runs with: the recorded one, else Spark's default for a
    conf the file lacks; None when Spark takes the session's value (nothing in the checkpoint decides it)."""
    value = conf.get(key)
    return str(value) if value is not None else PINNED[key].legacy


@dataclass(frozen=True)
class Usage:
    """What the checkpoint shows of its query: the stateful operators' names (None: some are unknown, as in a
    checkpoint without operator metadata and schemas), whether it has state, its state provider and how many
    sources its offsets list."""

    operators: frozenset[str] | None
    stateful: bool
    provider: str | None
    sources: int


def matters(conf: PinnedConf, usage: Usage) -> bool:
    """Whether the conf can change what the restart does with this checkpoint (unknown operators: assume it does)."""
    if conf.scope == "watermarks":
        return usage.sources > 1
    if usage.operators is None:
        return True
    if conf.scope == "operators":
        return bool(conf.operators & usage.operators)
    if conf.scope == "rocksdb":
        return usage.stateful and (usage.provider is None or usage.provider.endswith(ROCKSDB_PROVIDER))
    return usage.stateful
