"""``wmcheck show``."""
from __future__ import annotations

from datetime import tzinfo

import click

from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.summary import describe

from .options import common_options, parse_pairs
from .output import make_output


@click.command()
@click.argument("checkpoint")
@common_options()
def show(checkpoint: str, fmt: str, tz: tzinfo, fs_options: tuple[str, ...]) -> None:
    """Summarise CHECKPOINT: batches, watermark, pinned conf, sources, state operators, warnings."""
    summary = describe(open_checkpoint(checkpoint, parse_pairs(fs_options, "--fs-option")), tz)
    make_output(fmt, tz=tz).checkpoint_summary(summary)
