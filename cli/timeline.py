"""``wmcheck timeline``."""
from __future__ import annotations

from datetime import tzinfo

import click

from wmcheck.checkpoint.broken_tail import broken_tail_warning
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.watermarks.timeline import FORMATS, figure, save, stall_label, timeline

from .flags import cli_spelling
from .options import checkpoint_progress, common_options, parse_pairs, progress_option
from .output import make_output
from .process import writable_matplotlib_dir


@click.command("timeline")
@click.argument("checkpoint")
@click.option("--output", "output", required=True, type=click.Path(dir_okay=False),
              help=f"The picture to write: {', '.join(FORMATS)} (HTML is self-contained and works offline).")
@progress_option()
@common_options()
def timeline_command(checkpoint: str, output: str, progress: str | None, fmt: str, tz: tzinfo,
                     fs_options: tuple[str, ...]) -> None:
    """Draw CHECKPOINT over its batches: watermark, batch time, per-source lanes, no-data and repartition
    batches, a stalled watermark and (with --progress) max event time and late rows."""
    options = parse_pairs(fs_options, "--fs-option")
    ckpt = open_checkpoint(checkpoint, options)
    tl = timeline(ckpt, checkpoint_progress(ckpt, progress, options), tz)
    out = make_output(fmt)
    out.warning(broken_tail_warning(ckpt))
    writable_matplotlib_dir()
    save(tl, figure(tl, tz), output, cli_spelling, tz)
    doc = {"output": output, "batches": len(tl.batches), "stall": stall_label(tl)}
    out.document(doc, [("wrote", output), ("batches", doc["batches"]), ("stall", doc["stall"] or "none")], [])
