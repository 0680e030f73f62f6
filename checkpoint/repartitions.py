"""Repartition batches: what Spark's offline state repartition (``StreamingCheckpointManager.repartition``,
Spark 4.2+) leaves in the logs, and the kind of every batch.

Spark's repartition of a stopped query whose last committed batch is L writes batch L+1: ``offsets/L+1``
is a copy of ``offsets/L`` with only ``spark.sql.shuffle.partitions`` changed, then fresh state snapshots
of version L+2 in the new partition directories and ``commits/L+1``. The batch reads no input, so its
source offsets equal the previous batch's. A repartition that failed half way leaves ``offsets/L+1``
without its commit, and Spark then refuses to restart the query. A committed batch that changed the count while
its state shows an ordinary batch (:func:`written_as_repartition`) is no repartition: its offsets file was edited,
and Spark runs the next batch with a count its state was not written with.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from wmcheck.checkpoint.logs.offsets import OffsetSeq
from wmcheck.checkpoint.records import dataclass

from .errors import CheckpointError
from .numbers import is_number

if TYPE_CHECKING:
    from wmcheck.statestore.formats.files import StateLayout

    from .model import Checkpoint

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
DATA, NO_DATA, REPARTITION = "data", "no-data", "repartition"
UNFINISHED_RESTART_ERROR = (
    "[STREAMING_UNFINISHED_REPARTITION_DETECTED] The latest batch {batch} is for an unfinished state "
    "repartitioning i.e. last committed batch is: {done})."
)
"""What restarting the query prints (pyspark 4.3.0) while the last batch is an unfinished repartition."""


@dataclass(frozen=True)
class Repartition:
    """A batch that only moved the state to another number of partitions."""

    batch: int
    from_partitions: int
    to_partitions: int
    committed: bool


def partitions_in(conf: Mapping[str, Any]) -> int | None:
    """The shuffle partition count of a pinned conf (None when absent or not a number)."""
    value = str(conf.get(SHUFFLE_PARTITIONS, ""))
    return int(value) if is_number(value) else None


def partitions_of(ckpt: Checkpoint, batch: int) -> int | None:
    """The shuffle partition count pinned in ``offsets/<batch>`` (None when absent, unreadable (WM001) or not a
    number)."""
    if batch not in ckpt.offset_id_set:
        return None
    try:
        meta = ckpt.offsets(batch).metadata
    except CheckpointError:
        return None
    return partitions_in(meta.conf) if meta else None


def source_ends(seq: OffsetSeq) -> list[str | None]:
    """The source offsets a batch ends at, as recorded."""
    return [s.raw for s in seq.sources]


def same_input(ckpt: Checkpoint, batch: int) -> bool:
    """Whether ``offsets/<batch>`` ends at the same source offsets as the batch before (it reads no input)."""
    if batch - 1 not in ckpt.offset_id_set or batch not in ckpt.offset_id_set:
        return False
    here, before = ckpt.readable_offsets(batch), ckpt.readable_offsets(batch - 1)
    return here is not None and before is not None and source_ends(here) == source_ends(before)


def find_repartitions(plans: Mapping[int, tuple[int | None, list[str | None]]], committed: Iterable[int],
                      layout: StateLayout) -> tuple[Repartition, ...]:
    """Repartition batches among ``plans`` (batch -> (partition count, source offsets), in batch order): the
    same source offsets as the batch right before, another partition count, and, once committed, the state
    Spark's repartition writes (``layout``: :func:`written_as_repartition`)."""
    done = set(committed)
    out = []
    previous: tuple[int, int | None, list[str | None]] | None = None
    for batch, (count, ends) in plans.items():
        if previous is not None and count is not None:
            before, before_count, before_ends = previous
            if before == batch - 1 and before_count is not None and count != before_count and ends == before_ends:
                out.append(Repartition(batch, before_count, count, batch in done))
        previous = (batch, count if count is not None else (previous[1] if previous else None), ends)
    return tuple(r for r in out if written_as_repartition(r, layout))


def written_as_repartition(found: Repartition, layout: StateLayout) -> bool:
    """Whether the state agrees with a committed repartition at ``found.batch``: Spark's repartition writes a full
    copy of version ``batch + 1`` in every store partition below the new count and nothing of that version above
    it. An increment of that version alone (every ordinary batch of an HDFS store, or of a RocksDB store with
    changelogs, writes one), that version above the new count, or a partition below it without that version while
    it holds older ones, shows an ordinary batch whose offsets file pins another count than it ran with."""
    if not found.committed:
        return True  # Spark refuses to restart an unfinished repartition (WM035), whatever the state holds
    version = found.batch + 1
    for op in layout.operators:
        parts = {(p.partition, p.store): p for p in op.partitions}
        if any(p.partition >= found.to_partitions and version in p.versions for p in op.partitions):
            return False
        for pid in range(found.to_partitions):
            for store in op.stores:
                part = parts.get((pid, store))
                roles = {f.format.role for f in part.files if f.version == version} if part is not None else set()
                if part is None or (roles and "base" not in roles) or (not roles and part.versions and part.versions[0] < version):
                    return False
    return True


def repartitions(ckpt: Checkpoint) -> tuple[Repartition, ...]:
    """Every repartition batch of the checkpoint."""
    return ckpt.repartitions


def batch_kind(ckpt: Checkpoint, batch: int, repartition_batches: set[int]) -> str:
    """``repartition``, ``no-data`` (the same source offsets as the batch before) or ``data``."""
    if batch in repartition_batches:
        return REPARTITION
    return NO_DATA if same_input(ckpt, batch) else DATA


def unfinished(ckpt: Checkpoint) -> Repartition | None:
    """The last batch when it is a repartition that was never committed (Spark refuses to restart)."""
    found = repartitions(ckpt)
    last = found[-1] if found else None
    return last if last is not None and not last.committed and last.batch == ckpt.last_batch else None
