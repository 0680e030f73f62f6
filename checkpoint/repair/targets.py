"""Which batch a rewind goes back to, what watermark a batch leaves behind, and whether the query is idle."""
from __future__ import annotations

import time
from dataclasses import dataclass

from ..errors import CheckpointError
from ..model import COMMITS, OFFSETS, Checkpoint
from ..timeutil import format_duration, format_ms, parse_duration_ms, parse_time_ms

DEFAULT_IDLE_MS = 10 * 60_000


@dataclass(frozen=True)
class Target:
    """The batch to rewind to (None when no retained batch matches) and how it was chosen."""

    batch: int | None
    how: str


def now_ms() -> int:
    return int(time.time() * 1000)


def retained_batches(ckpt: Checkpoint) -> list[int]:
    """Committed batches whose offsets file is still there: the only ones a rewind can land on."""
    return sorted(set(ckpt.commit_ids) & set(ckpt.offset_ids))


def watermark_after(ckpt: Checkpoint, batch: int) -> int:
    """The watermark the batch after ``batch`` starts from, as Spark computes it on restart."""
    meta = ckpt.offsets(batch).metadata
    watermark = meta.batch_watermark_ms if meta else 0
    if batch in ckpt.commit_ids:
        watermark = max(watermark, ckpt.commit(batch).next_batch_watermark_ms or 0)
    return watermark


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
    given = [name for name, value in (("--to-batch", to_batch), ("--to-watermark", to_watermark),
                                      ("--to-time", to_time), ("--shift", shift)) if value is not None]
    if len(given) != 1:
        raise CheckpointError(
            "rewind needs exactly one target" + (f", got {' and '.join(given)}" if given else ""),
            hint="use one of --to-batch N, --to-watermark TIME, --to-time TIME, --shift -K",
        )
    if to_batch is not None:
        return Target(to_batch, f"--to-batch {to_batch}")
    done = ckpt.last_committed_batch
    if shift is not None:
        if shift >= 0:
            raise CheckpointError(f"--shift must be negative (K batches back), got {shift}", hint="e.g. --shift -3")
        if done is None:
            return Target(None, "no batch is committed")
        return Target(done + shift, f"--shift {shift} from the last committed batch {done}")
    batches = retained_batches(ckpt)
    ckpt.load_batches(batches)
    now = now_ms() if now is None else now
    if to_time is not None:
        when = parse_time_ms(to_time, now_ms=now, watermark_ms=ckpt.watermark_ms, default_anchor="now")
        hits = [b for b in batches if (batch_timestamp(ckpt, b) or 0) <= when]
        what = f"ran at or before {format_ms(when)} ({when})"
    else:
        assert to_watermark is not None  # one of the selectors is given (checked by the request)
        when = parse_time_ms(to_watermark, now_ms=now, watermark_ms=ckpt.watermark_ms, default_anchor="watermark")
        hits = [b for b in batches if watermark_after(ckpt, b) <= when]
        what = f"leaves the watermark at or before {format_ms(when)} ({when})"
    if not hits:
        return Target(None, f"no retained batch {what}")
    return Target(hits[-1], f"batch {hits[-1]}, the last retained batch that {what}")


def parse_idle(text: str) -> int:
    """``--idle``: a duration like ``10 minutes`` or ``30s``; a bare number means minutes (``0`` disables)."""
    body = text.strip()
    if body.replace(".", "", 1).isdigit():
        return int(float(body) * 60_000)
    ms = parse_duration_ms(body)
    if ms < 0:
        raise CheckpointError(f"--idle must not be negative, got {text!r}", hint="e.g. --idle '10 minutes'")
    return ms


def recent_activity(ckpt: Checkpoint, idle_ms: int, now: int, ignore: frozenset[str] = frozenset()) -> str | None:
    """Why the query looks active: the newest file in offsets/, commits/ or state/ changed within ``idle_ms``."""
    if idle_ms <= 0:
        return None
    newest = None
    for info in [*ckpt.fs.list_dir(OFFSETS), *ckpt.fs.list_dir(COMMITS), *_state_infos(ckpt)]:
        if not getattr(info, "is_dir", False) and info.path not in ignore and (newest is None or info.mtime_ms > newest.mtime_ms):
            newest = info
    if newest is None or newest.mtime_ms < now - idle_ms:
        return None
    return (f"the query looks active: {newest.path} was modified {format_duration(max(0, now - newest.mtime_ms))} "
            f"ago, within --idle {format_duration(idle_ms)}")


def _state_infos(ckpt: Checkpoint):
    layout = ckpt.state_layout
    yield from layout.temp_files
    yield from layout.crc_files
    yield from layout.unknown_files
    for op in layout.operators:
        yield from op.metadata_files
        yield from op.schema_files
        for part in op.partitions:
            yield from part.sst_files
            yield from part.other_files
            for f in part.files:
                yield f
