"""Which state to read and the watermark to judge it by, for either engine (no Spark here).

``batch`` N means the state batch N starts from (written by batch N-1; Spark's ``batchId`` N-1)
and the watermark batch N evicts with (``offsets/N``): what batch N evicted, or for the next batch
(the default) what it will evict.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Sequence

from wmcheck.checkpoint.errors import CheckpointError, arg
from wmcheck.checkpoint.model import Checkpoint, open_checkpoint
from wmcheck.checkpoint.records import dataclass
from wmcheck.checkpoint.watermarks.operators import PASS_EVENT_LOG, OperatorWatermarks

if TYPE_CHECKING:

    from .discovery import Store

# histogram bucket edges: event time minus watermark, in ms; buckets are (lower, upper]
EDGES = (-86_400_000, -3_600_000, -600_000, -60_000, -10_000, 0, 10_000, 60_000, 600_000, 3_600_000, 86_400_000)


JOIN = "symmetricHashJoin"
JOIN_UNKNOWN = ("a stream-stream join removes each side's rows by a state watermark that Spark derives from the other "
                "side's watermark and the join's condition (a time range or a window key), which only the plan in the "
                f"event log records, not by its eviction watermark: {PASS_EVENT_LOG}")


@dataclass(frozen=True)
class Target:
    """Which state to read and which watermark to judge it by."""

    batch: int
    """The batch whose starting state is read (the next batch by default)."""
    state_batch_id: int
    """Spark's ``batchId``: the batch whose commit wrote that state (``batch - 1``)."""
    watermark_ms: int
    watermark_from: str
    """``next batch``, ``batch N`` or ``--watermark``, and for one operator's stores, whose watermark it is."""
    unknown: str | None = None
    """Why the operator's own eviction watermark is unknown: then ``watermark_ms`` is the global one, and rows are
    not judged by it."""
    operator_id: int | None = None
    """The operator whose own watermark this is (None: the global watermark)."""
    what_if: bool = False
    """The watermark is one the user chose (``--watermark``), not the batch's."""


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
        return Target(batch, batch - 1, watermark_ms, arg("watermark_ms"), what_if=True)
    seq = ckpt.readable_offsets(batch) if batch in ckpt.offset_id_set else None  # a broken tail: planned again
    if seq is not None:
        meta = seq.metadata
        return Target(batch, batch - 1, meta.batch_watermark_ms if meta else 0, "next batch" if batch == nxt else f"batch {batch}")
    return Target(batch, batch - 1, ckpt.watermark_ms, "next batch")


def store_target(tgt: Target, store: "Store", model: OperatorWatermarks) -> Target:
    """``tgt`` for one store: its operator's own eviction watermark at the batch (or, for a what-if watermark, the one
    the operator would get from it, or the what-if watermark itself where that is unknown); a join side's state
    watermark when the event log shows the join's condition."""
    what_if = tgt.what_if
    own = next((o for o in model.evicting(tgt.watermark_ms) if o.operator_id == store.operator_id), None) if what_if \
        else model.of(tgt.batch, store.operator_id)
    if own is None:
        return tgt
    whose = f"operator {store.operator_id}'s eviction watermark"
    if own.evict_ms is None and what_if:  # what the global one gives it is unknown: the chosen one is taken as its own
        return replace(tgt, watermark_from=f"{tgt.watermark_from}, taken as {whose} (what the global watermark gives it "
                                           "is unknown)", operator_id=store.operator_id)
    if own.evict_ms is None:
        return replace(tgt, watermark_from=f"{tgt.watermark_from}: {whose} is unknown", unknown=own.note,
                       operator_id=store.operator_id)
    value, source = own.evict_ms, own.source
    link = model.link(store.operator_id)
    side = store.name.split("-")[0]
    if link is not None and link.join_sides and side in link.join_sides:
        value, whose = value + link.join_sides[side], f"operator {store.operator_id}'s {side} state watermark"
        source = "the join condition in the event log"
    elif store.operator_name == JOIN and not what_if:
        return replace(tgt, watermark_from=f"{tgt.watermark_from}: operator {store.operator_id}'s {side} state "
                                           "watermark is unknown", unknown=JOIN_UNKNOWN, operator_id=store.operator_id)
    if value == tgt.watermark_ms and len(model.operators) == 1:  # the global watermark, nothing to tell apart
        return replace(tgt, operator_id=store.operator_id)
    return replace(tgt, watermark_ms=value, watermark_from=f"{tgt.watermark_from}, {whose} ({source})",
                   operator_id=store.operator_id)


def require_known(stores: Sequence["Store"], targets: Sequence[Target]) -> None:
    """Refuse rows judged by an operator watermark that is unknown (one line: why, and what to pass)."""
    for store, tgt in zip(stores, targets):
        if tgt.unknown is None:
            continue
        whose = f"state watermark of its {store.name.split('-')[0]} side" if tgt.unknown == JOIN_UNKNOWN \
            else "own eviction watermark"
        raise CheckpointError(f"operator {store.operator_id}'s {whose} at batch {tgt.batch} is unknown: {tgt.unknown}",
                              param="progress",
                              hint=f"or pass {arg('watermark', 'TIME')} to judge its state by a watermark you choose")
