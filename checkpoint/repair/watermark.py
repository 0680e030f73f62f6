"""Planning ``wmcheck set-watermark``: the watermark the next batch starts from.

On restart Spark takes ``offsets/L.batchWatermarkMs`` of the last batch L and, when L is committed,
raises it to ``commits/L.nextBatchWatermarkMs``; both are rewritten (with their Hadoop checksum
sidecars) so that the larger of the two is the new watermark.
"""
from __future__ import annotations

import dataclasses

from wmcheck.checkpoint.logs.commits import serialize_commit
from wmcheck.checkpoint.logs.metadata_log import COMMIT_LOG, OFFSET_LOG
from wmcheck.checkpoint.logs.offsets import serialize_offsets

from ..errors import RefusedError, arg
from ..model import Checkpoint
from ..timeutil import format_duration, format_ms
from .plan import Plan, rewrite_step
from .plan_params import Position, WatermarkParams

MAX_WINDOWS = 20


def plan_set_watermark(
    ckpt: Checkpoint,
    watermark_ms: int,
    *,
    allow_raise: bool = False,
    window_ms: int | None = None,
    created_ms: int = 0,
) -> Plan:
    """The plan that makes the next batch start from ``watermark_ms``."""
    last = ckpt.last_batch
    if last is None:
        raise RefusedError("the checkpoint has no batch yet, so there is no watermark to set",
                           hint="start the query once; set the initial watermark with withWatermark instead")
    meta = ckpt.offsets(last).metadata
    if meta is None:
        raise RefusedError(f"offsets/{last} has no batch metadata line to hold a watermark", path=OFFSET_LOG.path(last),
                           hint="rewind past this batch first")
    if watermark_ms < 0:
        raise RefusedError(f"a watermark cannot be negative ({watermark_ms})", hint="use 0 to accept every row")
    current = ckpt.watermark_ms
    if watermark_ms > current and not allow_raise:
        raise RefusedError(
            f"{format_ms(watermark_ms)} is above the current watermark {format_ms(current)} ({current})",
            hint=f"raising drops every row older than it and evicts state early; pass {arg('allow_raise')} if that is meant",
            param="allow_raise")
    steps = []
    if meta.batch_watermark_ms != watermark_ms:
        seq = dataclasses.replace(ckpt.offsets(last), metadata=meta.with_watermark(watermark_ms))
        steps.append(rewrite_step(ckpt.fs, OFFSET_LOG.path(last), serialize_offsets(seq), "offsets", "batchWatermarkMs set"))
    committed = last in ckpt.commit_ids
    if committed and ckpt.commit(last).next_batch_watermark_ms not in (None, watermark_ms):
        steps.append(rewrite_step(ckpt.fs, COMMIT_LOG.path(last), serialize_commit(ckpt.commit(last).with_watermark(watermark_ms)),
                                  "commits", "nextBatchWatermarkMs set"))
    warnings = _lowering_warnings(ckpt, current, watermark_ms, window_ms) if watermark_ms < current else []
    if watermark_ms > current:
        warnings.append(f"raising the watermark by {format_duration(watermark_ms - current)}: the next batch drops "
                        f"rows with event time before {format_ms(watermark_ms)} and evicts state older than it")
    return Plan(
        command="set-watermark",
        checkpoint=ckpt.location,
        file_sink=None,
        request=WatermarkParams(watermark_ms, allow_raise, window_ms),
        before=Position(last, ckpt.last_committed_batch, watermark_ms=current),
        after=Position(last, ckpt.last_committed_batch, next_batch=ckpt.next_batch, watermark_ms=watermark_ms),
        steps=tuple(steps),
        warnings=tuple(warnings),
        created_ms=created_ms,
        notes=(f"batch {ckpt.next_batch} starts from watermark {format_ms(watermark_ms)} ({watermark_ms})",),
    )


def _lowering_warnings(ckpt: Checkpoint, current: int, new: int, window_ms: int | None) -> list[str]:
    """What lowering cannot undo: state the old watermark evicted, windows already emitted in append mode."""
    batches = sorted(ckpt.offset_ids)
    ckpt.load_batches(batches)
    passed = next((b for b in batches if (m := ckpt.offsets(b).metadata) and m.batch_watermark_ms > new), None)
    since = f"since batch {passed}" if passed is not None else "in batches no longer retained"
    out = [
        f"lowering the watermark by {format_duration(current - new)} (from {format_ms(current)} to {format_ms(new)}): "
        f"state evicted while the watermark was above {format_ms(new)} ({since}) does not come back; "
        "only rows that arrive from now on with event times after the new watermark are accepted again",
    ]
    if window_ms:
        ends = range((new // window_ms + 1) * window_ms, current + 1, window_ms)
        shown = ", ".join(f"[{format_ms(e - window_ms)}, {format_ms(e)})" for e in list(ends)[:MAX_WINDOWS])
        more = f" and {len(ends) - MAX_WINDOWS} more" if len(ends) > MAX_WINDOWS else ""
        out.append(f"append mode: {len(ends)} window(s) of {format_duration(window_ms)} ending after the new "
                   f"watermark were already emitted and evicted; a late row re-opens its window as a partial one, "
                   f"emitted again once the watermark passes it: {shown}{more}")
    else:
        out.append("append mode: windows that ended between the new and the old watermark were already emitted; "
                   "late rows re-open them as partial windows that are emitted a second time "
                   f"(pass {arg('window')} to list them)")
    return out
