"""``wmcheck batches``."""
from __future__ import annotations

from datetime import tzinfo

import click

from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.source_offsets import SourceOffset
from wmcheck.checkpoint.summary import batch_range, batch_rows
from wmcheck.checkpoint.timeutil import format_duration

from .options import common_options, parse_pairs
from .output import make_output

TABLE_COLUMNS = ["batch", "committed", "watermark", "next watermark ms", "advanced", "timestamp", "lag", "sources"]


@click.command()
@click.argument("checkpoint")
@click.option("--last", "last", type=click.IntRange(min=0), help="Only the last K batches.")
@click.option("--from", "start", type=int, help="First batch to show.")
@click.option("--to", "end", type=int, help="Last batch to show.")
@common_options()
def batches(checkpoint: str, last: int | None, start: int | None, end: int | None, fmt: str, tz: tzinfo, fs_options: tuple[str, ...]) -> None:
    """One row per batch of CHECKPOINT: watermark, how far it advanced, timestamp, lag, source offsets."""
    if last is not None and (start is not None or end is not None):
        raise click.UsageError("use either --last or --from/--to")
    ckpt = open_checkpoint(checkpoint, parse_pairs(fs_options, "--fs-option"))
    rows = batch_rows(ckpt, batch_range(ckpt, last, start, end), tz)
    out = make_output(fmt)
    if fmt != "table":
        out.rows(rows)
        return
    out.rows([
        {
            "batch": r["batch"],
            "committed": r["committed"],
            "watermark": f"{r['batch_watermark_ms']} ({r['batch_watermark']})" if r["batch_watermark_ms"] is not None else None,
            "next watermark ms": r["next_batch_watermark_ms"],
            "advanced": format_duration(r["watermark_advance_ms"]),
            "timestamp": r["batch_timestamp"],
            "lag": format_duration(r["lag_ms"]),
            "sources": [SourceOffset(str(i), raw).summary() for i, raw in enumerate(r["sources"])],
        }
        for r in rows
    ], TABLE_COLUMNS)
