"""``wmcheck batches``."""
from __future__ import annotations

from datetime import tzinfo

import click

from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.summary import batch_range, batch_rows

from .options import common_options, parse_pairs
from .output import make_output


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
    make_output(fmt, tz=tz).batches(batch_rows(ckpt, batch_range(ckpt, last, start, end), tz))
