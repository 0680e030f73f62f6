"""The watermark held back by an input that stopped receiving data (``--stall-batches``, progress when given)."""
from __future__ import annotations

from typing import Iterator

from wmcheck.checkpoint.logs.metadata_log import OFFSET_LOG
from wmcheck.checkpoint.watermarks.stall import HELD, watermark_stall

from ..errors import CheckpointError
from .context import Context
from .definition import WARNING, Instruction, Issue, check


@check("WM038", WARNING, "watermark held back by an input without new data")
def held_watermark(ctx: Context) -> Iterator[Issue]:
    try:
        stall = watermark_stall(ctx.ckpt, ctx.progress, ctx.tz)
    except CheckpointError:
        return  # a file that does not parse is reported as WM001
    if stall is None or stall.reason != HELD or stall.batches < ctx.stall_batches:
        return
    yield Issue(OFFSET_LOG.path(stall.since_batch), (
        f"{stall.explanation}. State is not evicted and append-mode output stops until it moves"
    ), Instruction("send data (or heartbeat rows) to that input, or, if it is gone for good, restart without it (a new "
                   "checkpoint) or with spark.sql.streaming.multipleWatermarkPolicy=max on a new query"))
