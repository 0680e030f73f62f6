"""Which batch a rewind goes back to, what watermark a batch leaves behind, and whether the query is idle."""
from __future__ import annotations

from wmcheck.checkpoint.records import dataclass

from ..activity import now_ms
from ..errors import CheckpointError, arg, on_param
from ..model import Checkpoint
from ..timeutil import format_ms, parse_duration_ms, parse_time_ms


@dataclass(frozen=True)
class Target:
    """The batch to rewind to (None when no retained batch matches), how it was chosen, and by which parameter."""

    batch: int | None
    how: str
    param: str | None = None


def retained_batches(ckpt: Checkpoint) -> list[int]:
    """Committed batches whose offsets file is still there: the only ones a rewind can land on."""
    return sorted(set(ckpt.commit_ids) & set(ckpt.offset_ids))


def restartable_batches(ckpt: Checkpoint) -> list[int]:
    """Retained batches Spark can restart from once a rewind makes them the last (their offsets file the last one
    too): those whose previous offsets file is still there, or batch 0 (:meth:`Checkpoint.start_offsets_missing`)."""
    return [b for b in retained_batches(ckpt) if ckpt.start_offsets_missing(b) is None]


def batch_timestamp(ckpt: Checkpoint, batch: int) -> int | None:
    meta = ckpt.offsets(batch).metadata
    return meta.batch_timestamp_ms if meta else None


def resolve_target(
    ckpt: Checkpoint,
    *,
    to_batch: int | None = None,
    to_watermark: str | None = None,
    to_time: str | None = None,
    shift: int | None = None,
    now: int | None = None,
) -> Target:
    """Resolve exactly one of ``--to-batch``, ``--to-watermark``, ``--to-time``, ``--shift``."""
    given = [name for name, value in ((arg("to_batch"), to_batch), (arg("to_watermark"), to_watermark),
                                      (arg("to_time"), to_time), (arg("shift"), shift)) if value is not None]
    if len(given) != 1:
        raise CheckpointError(
            "rewind needs exactly one target" + (f", got {' and '.join(given)}" if given else ""),
            hint=f"use one of {arg('to_batch', 'N')}, {arg('to_watermark', 'TIME')}, {arg('to_time', 'TIME')}, {arg('shift', '-K')}",
        )
    if to_batch is not None:
        return Target(_batch_id(ckpt, to_batch, arg("to_batch", to_batch), "to_batch"), arg("to_batch", to_batch), "to_batch")
    done = ckpt.last_committed_batch
    if shift is not None:
        if shift >= 0:
            raise CheckpointError(f"{arg('shift')} must be negative (K batches back), got {shift}", hint=f"e.g. {arg('shift', -3)}",
                                  param="shift")
        if done is None:
            return Target(None, "no batch is committed", "shift")
        return Target(_batch_id(ckpt, done + shift, arg("shift", shift), "shift"), f"{arg('shift', shift)} from the last committed batch {done}",
                      "shift")
    batches = retained_batches(ckpt)
    ckpt.load_batches(batches)
    now = now_ms() if now is None else now
    if to_time is not None:
        with on_param("to_time"):
            when = parse_time_ms(to_time, now_ms=now, watermark_ms=ckpt.watermark_ms, default_anchor="now")
        hits = [b for b in batches if (batch_timestamp(ckpt, b) or 0) <= when]
        what = f"ran at or before {format_ms(when)} ({when})"
    else:
        assert to_watermark is not None  # one of the selectors is given (checked by the request)
        with on_param("to_watermark"):
            when = parse_time_ms(to_watermark, now_ms=now, watermark_ms=ckpt.watermark_ms, default_anchor="watermark")
        hits = [b for b in batches if ckpt.watermark_after(b) <= when]
        what = f"leaves the watermark at or before {format_ms(when)} ({when})"
    param = "to_time" if to_time is not None else "to_watermark"
    if not hits:
        return Target(None, f"no retained batch {what}", param)
    return Target(hits[-1], f"batch {hits[-1]}, the last retained batch that {what}", param)


def _batch_id(ckpt: Checkpoint, batch: int, given: str, param: str) -> int:
    """``batch`` when it can name a batch (ids start at 0), else a clear error on ``param`` (``given``: as passed)."""
    if batch >= 0:
        return batch
    targets = restartable_batches(ckpt)
    raise CheckpointError(f"{given} names batch {batch}: batch ids start at 0",
                          hint=f"the oldest batch this checkpoint can be rewound to is {targets[0]}" if targets
                          else "no batch is committed", param=param)


def parse_idle(text: str) -> int:
    """``--idle``: a duration like ``10 minutes`` or ``30s``; a bare number means minutes (``0`` disables)."""
    body = text.strip()
    if body.isascii() and body.replace(".", "", 1).isdigit():
        return int(float(body) * 60_000)
    with on_param("idle_ms"):
        ms = parse_duration_ms(body)
    if ms < 0:
        raise CheckpointError(f"{arg('idle_ms')} must not be negative, got {text!r}", hint=f"e.g. {arg('idle_ms', repr('10 minutes'))}",
                              param="idle_ms")
    return ms
