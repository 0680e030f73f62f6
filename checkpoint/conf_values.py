"""Which pinned conf values Spark 4.3 refuses on restart.

On restart Spark sets every conf it pins from the last offsets file with ``SQLConf.setConfString``
(``OffsetSeqMetadata.setSessionConf``), which converts and validates the value as the conf's definition says: a
value it refuses fails the restart (``[INVALID_CONF_VALUE]``) whether or not an operator uses the conf. The state
store's provider class and compression codec are taken as any string, and fail when the first stateful operator
creates its store. A JSON ``null`` fails any of them at once (``value cannot be null for key``); Spark ignores a
null of a conf it does not restore. Values as Spark 4.3's ``SQLConf`` defines them (its ``checkValue``/
``checkValues``), verified by restarting a query from offsets files carrying them.
"""
from __future__ import annotations

import re
from typing import Callable, Mapping, NamedTuple

from .model import PINNED_CONFS, WATERMARK_POLICY

SPARK_STATE_PACKAGE = "org.apache.spark.sql.execution.streaming.state."
SPARK_PROVIDERS = frozenset(f"{SPARK_STATE_PACKAGE}{name}" for name in ("HDFSBackedStateStoreProvider",
                                                                        "RocksDBStateStoreProvider"))
OTHER_DISTRIBUTIONS = ("com.databricks.",)
"""Packages of state store providers that only another distribution's runtime holds (its checkpoints name them)."""
CODECS = frozenset({"lz4", "lzf", "snappy", "zstd"})
"""The short codec names Spark knows (any case); anything else must be a class name."""


class Refusal(NamedTuple):
    """Why Spark refuses a value, and whether only a stateful query's restart does (``stateful``: it fails when the
    first stateful operator opens its store, not when Spark sets the conf)."""

    reason: str
    stateful: bool = False


Rule = Callable[[str], "Refusal | None"]


def integer(minimum: int, allowed: frozenset[int] | None = None, valid: str = "") -> Rule:
    def rule(value: str) -> Refusal | None:
        if not re.fullmatch(r"\s*[+-]?\d+\s*", value):
            return Refusal("it is not an integer")
        number = int(value)
        if number < minimum or (allowed is not None and number not in allowed):
            return Refusal(f"Spark accepts {valid}")
        return None

    return rule


def versions(*allowed: int) -> Rule:
    names = [str(v) for v in allowed]
    return integer(min(allowed), frozenset(allowed), "versions " + ", ".join(names[:-1]) + " and " + names[-1])


def boolean(value: str) -> Refusal | None:
    return None if value.strip().lower() in ("true", "false") else Refusal("it is not true or false")


def one_of(*allowed: str) -> Rule:
    def rule(value: str) -> Refusal | None:
        return None if value.lower() in allowed else Refusal(f"Spark accepts {' or '.join(repr(a) for a in allowed)}")

    return rule


def codec(value: str) -> Refusal | None:
    if value.lower() in CODECS or "." in value:
        return None
    return Refusal(f"no codec has that name; Spark knows {', '.join(sorted(CODECS))} or a class name", stateful=True)


def provider(value: str) -> Refusal | None:
    if value.startswith(OTHER_DISTRIBUTIONS):
        return Refusal("the class comes with another distribution's runtime, not with Apache Spark", stateful=True)
    if value.startswith(SPARK_STATE_PACKAGE) and value not in SPARK_PROVIDERS or not value.strip():
        return Refusal("Apache Spark has no such class", stateful=True)
    return None


RULES: Mapping[str, Rule] = {
    PINNED_CONFS["shuffle_partitions"]: integer(1, valid="a positive number"),
    PINNED_CONFS["state_provider"]: provider,
    WATERMARK_POLICY: one_of("min", "max"),
    PINNED_CONFS["flatmapgroups_state_format"]: versions(1, 2),
    PINNED_CONFS["aggregation_state_format"]: versions(1, 2),
    PINNED_CONFS["join_state_format"]: versions(1, 2, 3, 4),
    PINNED_CONFS["compression_codec"]: codec,
    PINNED_CONFS["rocksdb_format"]: integer(0, valid="a number not negative"),
    "spark.sql.streaming.stateStore.rocksdb.mergeOperatorVersion": versions(1, 2),
    PINNED_CONFS["encoding_format"]: one_of("unsaferow", "avro"),
    "spark.sql.streaming.statefulOperator.useStrictDistribution": boolean,
    "spark.sql.optimizer.pruneFiltersCanPruneStreamingSubplan": boolean,
    "spark.sql.streaming.stateStore.rowChecksum.enabled": boolean,
    "spark.sql.function.protobufExtensions.enabled": boolean,
    "spark.sql.streaming.queryEvolution.enableSourceEvolution": boolean,
    "spark.sql.streaming.statefulOperator.alwaysNullableOutput.enabled": boolean,
    "spark.sql.dropDuplicates.deterministicKeyOrder.enabled": boolean,
}
"""The confs Spark 4.3 sets from the last offsets file on restart, each with what it refuses."""


SPARK35_RESTORED = frozenset({
    PINNED_CONFS["shuffle_partitions"], PINNED_CONFS["state_provider"], WATERMARK_POLICY,
    PINNED_CONFS["flatmapgroups_state_format"], PINNED_CONFS["aggregation_state_format"],
    PINNED_CONFS["join_state_format"], PINNED_CONFS["compression_codec"], PINNED_CONFS["rocksdb_format"],
    "spark.sql.streaming.statefulOperator.useStrictDistribution",
    "spark.sql.optimizer.pruneFiltersCanPruneStreamingSubplan",
})
"""The confs Spark 3.5 sets from the last offsets file on restart (its ``OffsetSeqMetadata.relevantSQLConfs``); it
neither restores nor validates the others Spark 4 pins (restarted with Spark 3.5 from a checkpoint it wrote: an
encoding format Spark 4.3 refuses, or row checksums turned on, in the last offsets file: the control run's output)."""


def refusal(key: str, conf: Mapping[str, object], stateful: bool) -> Refusal | None:
    """Why a restart of a query (``stateful``: with stateful operators) fails on the value ``conf`` pins for ``key``;
    None: it does not (a conf Spark does not restore, one the file does not pin, or a value it takes). A JSON null
    reaches ``setConfString`` as a null string, which it refuses for every conf it restores."""
    rule = RULES.get(key)
    if rule is None or key not in conf:
        return None
    value = conf[key]
    found = Refusal("a restored conf needs a value") if value is None else rule(str(value))
    return found if found is not None and (stateful or not found.stateful) else None
