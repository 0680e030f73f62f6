"""``wmcheck batches``."""
from __future__ import annotations

from datetime import tzinfo

import click

from wmcheck.checkpoint.broken_tail import broken_tail_warning
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.records import dataclass
from wmcheck.checkpoint.summary import batch_range, batch_rows

from .options import checkpoint_progress, common_options, options_object, parse_pairs, progress_option
from .output import make_output


@dataclass(frozen=True)
class BatchesArgs:
    """``wmcheck batches``' options: which batches, and what else each row shows."""

    last: int | None
    start: int | None
    end: int | None
    operators: bool
    progress: str | None


@click.command()
@click.argument("checkpoint")
@click.option("--last", "last", type=click.IntRange(min=0), help="Only the last K batches.")
@click.option("--from", "start", type=int, help="First batch to show.")
@click.option("--to", "end", type=int, help="Last batch to show.")
@click.option("--operators", is_flag=True, help="Add each stateful operator's own late-events and eviction watermark "
              "(with --progress from the plans in Spark's event log where they decide).")
@progress_option()
@common_options()
@options_object(BatchesArgs)
def batches(checkpoint: str, opts: BatchesArgs, fmt: str, tz: tzinfo, fs_options: tuple[str, ...]) -> None:
    """One row per batch of CHECKPOINT: watermark, how far it advanced, timestamp, lag, what each source brought
    (with --operators, each stateful operator's own watermarks)."""
    if opts.last is not None and (opts.start is not None or opts.end is not None):
        raise click.UsageError("use either --last or --from/--to")
    options = parse_pairs(fs_options, "--fs-option")
    ckpt = open_checkpoint(checkpoint, options)
    reports = checkpoint_progress(ckpt, opts.progress, options)
    out = make_output(fmt, tz=tz)
    out.warning(broken_tail_warning(ckpt))
    out.batches(batch_rows(ckpt, batch_range(ckpt, opts.last, opts.start, opts.end), tz, reports, opts.operators))
