"""``wmcheck show``."""
from __future__ import annotations

from datetime import tzinfo

import click

from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.verdict import show_checkpoint

from .options import checkpoint_progress, common_options, parse_pairs, progress_option
from .output import make_output


@click.command()
@click.argument("checkpoint")
@progress_option()
@common_options()
def show(checkpoint: str, progress: str | None, fmt: str, tz: tzinfo, fs_options: tuple[str, ...]) -> None:
    """Summarise CHECKPOINT: first whether Spark restarts it (check's verdict), from which batch and watermark, and
    the worst finding; then batches, watermark (and why it is stuck), pinned conf, sources, state operators."""
    options = parse_pairs(fs_options, "--fs-option")
    ckpt = open_checkpoint(checkpoint, options)
    summary = show_checkpoint(ckpt, tz, checkpoint_progress(ckpt, progress, options))
    make_output(fmt, tz=tz).checkpoint_summary(summary)
