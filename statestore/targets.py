"""Which state to read and the watermark to judge it by, for either engine (no Spark here).

``batch`` N means the state batch N starts from (written by batch N-1; Spark's ``batchId`` N-1)
and the watermark batch N evicts with (``offsets/N``): what batch N evicted, or for the next batch
(the default) what it will evict.
"""
from __future__ import annotations

from dataclasses import dataclass

from wmcheck.checkpoint.errors import CheckpointError, arg
from wmcheck.checkpoint.model import Checkpoint, open_checkpoint

# histogram bucket edges: event time minus watermark, in ms; buckets are (lower, upper]
EDGES = (-86_400_000, -3_600_000, -600_000, -60_000, -10_000, 0, 10_000, 60_000, 600_000, 3_600_000, 86_400_000)


@dataclass(frozen=True)
class Target:
    """Which state to read and which watermark to judge it by."""

    batch: int
    """The batch whose starting state is read (the next batch by default)."""
    state_batch_id: int
    """Spark's ``batchId``: the batch whose commit wrote that state (``batch - 1``)."""
    watermark_ms: int
    watermark_from: str
    """``next batch``, ``batch N`` or ``--watermark``."""


def as_checkpoint(ckpt: Checkpoint | str) -> Checkpoint:
    return ckpt if isinstance(ckpt, Checkpoint) else open_checkpoint(ckpt)


def target(ckpt: Checkpoint, batch: int | None = None, watermark_ms: int | None = None) -> Target:
    """The state and watermark of ``batch`` (default: the next batch); ``watermark_ms`` overrides the watermark."""
    nxt = ckpt.next_batch
    if batch is None:
        batch = nxt
    elif batch < 1 or batch > nxt:
        raise CheckpointError(
            f"batch {batch} has no state to read: batches 1..{nxt} start from a committed state (batch {nxt} is the next one)",
            hint="batch 0 starts from empty state; wmcheck batches CKPT lists the batches")
    if batch - 1 not in ckpt.commit_ids:
        raise CheckpointError(f"batch {batch - 1} is not committed, so no state was written for batch {batch} to start from",
                              path=f"commits/{batch - 1}", hint="pick a batch after a committed one (wmcheck batches CKPT)")
    if watermark_ms is not None:
        return Target(batch, batch - 1, watermark_ms, arg("watermark_ms"))
    seq = ckpt.readable_offsets(batch) if batch in ckpt.offset_id_set else None  # a broken tail: planned again
    if seq is not None:
        meta = seq.metadata
        return Target(batch, batch - 1, meta.batch_watermark_ms if meta else 0, "next batch" if batch == nxt else f"batch {batch}")
    return Target(batch, batch - 1, ckpt.watermark_ms, "next batch")
