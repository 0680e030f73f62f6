"""``wmcheck compat``."""
from __future__ import annotations

import contextlib
import os
import sys
from datetime import tzinfo
from typing import TYPE_CHECKING

import click

from wmcheck.checkpoint.records import dataclass

from .options import common_options, options_object, parse_pairs, progress_option
from .output import REPORT_OUTPUTS, make_output
from .process import own_interrupts
from .progress import progress_for, quiet_option, spark_progress

if TYPE_CHECKING:
    from wmcheck.statestore.spark.compat import CompatOptions


@dataclass(frozen=True)
class CompatArgs:
    """``wmcheck compat``'s options: the new code, the batch it re-runs and where, the report, Spark's."""

    query: str
    inputs: tuple[str, ...]
    file_sink: str | None
    batch: int | None
    progress: str | None
    baseline: str | None
    next_inputs: tuple[str, ...]
    allow_output_change: bool
    output: str | None
    scratch_dir: str | None
    keep_scratch: bool
    timeout_s: float
    master: str | None
    confs: tuple[str, ...]
    packages: tuple[str, ...]
    jars: tuple[str, ...]
    quiet: bool

    def compat_options(self, fs_options: tuple[str, ...]) -> CompatOptions:
        """How the library re-runs the batch."""
        from wmcheck.statestore.spark.compat import CompatOptions

        return CompatOptions(file_sink=self.file_sink, batch=self.batch, inputs=parse_pairs(self.inputs, "--input"),
                             scratch_dir=self.scratch_dir, keep_scratch=self.keep_scratch, timeout_s=self.timeout_s,
                             fs_options=parse_pairs(fs_options, "--fs-option"), progress=self.progress,
                             baseline=self.baseline, next_inputs=parse_pairs(self.next_inputs, "--next-input"))


@click.command()
@click.argument("checkpoint", metavar="CKPT")
@click.option("--query", required=True, metavar="MODULE:FUNCTION",
              help="The new code: FUNCTION(spark) returns its streaming DataFrame or DataStreamWriter.")
@click.option("--input", "inputs", multiple=True, metavar="SOURCE=PATH",
              help="Where a file source's logged input files are now (source id as `wmcheck batches` lists it; repeatable).")
@click.option("--file-sink", metavar="PATH", help="The old query's file sink directory (default: the new writer's path).")
@click.option("--batch", type=click.IntRange(min=0),
              help="The committed batch to re-run (default: the last one that read input).")
@progress_option()
@click.option("--baseline-query", "baseline", metavar="MODULE:FUNCTION",
              help="The old code: the batches a restart runs next are also run by it and by the new code, on two more "
                   "scratch copies, and their output compared (what shows only when windows close).")
@click.option("--next-input", "next_inputs", multiple=True, metavar="SOURCE=DIR",
              help="New input files for the next batches (with --baseline-query): file source SOURCE reads DIR's files "
                   "instead of the files its directory holds now (repeatable).")
@click.option("--allow-output-change", is_flag=True, help="Output or state that differs is a warning (exit 0), not a failure.")
@click.option("--output", "output", type=click.Path(dir_okay=False), help="Write the report to FILE instead of stdout.")
@click.option("--scratch-dir", metavar="DIR", help="Where the scratch copy goes (default: the system's temporary directory).")
@click.option("--keep-scratch", is_flag=True, help="Keep the scratch copy (its path is printed).")
@click.option("--batch-timeout", "timeout_s", type=click.FloatRange(min=1), default=600, show_default=True,
              metavar="SECONDS", help="Seconds the batch may take before compat stops it.")
@click.option("--master", help="Spark master (default local[*]).")
@click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE", help="Spark conf (repeatable).")
@click.option("--packages", multiple=True, metavar="COORDS", help="Maven packages for Spark (repeatable).")
@click.option("--jars", multiple=True, metavar="JARS", help="Jars for Spark (repeatable).")
@quiet_option()
@common_options(("table", "json") + tuple(REPORT_OUTPUTS))
@options_object(CompatArgs)
def compat(checkpoint: str, opts: CompatArgs, fmt: str, tz: tzinfo, fs_options: tuple[str, ...]) -> None:
    """Will the new query code restart on CKPT, and what will it change? (docs/compat.md)

    Re-runs CKPT's last data batch with the new code on a scratch copy (CKPT is only read). Exit 0: it restarts
    with the same output and state; 1: it restarts but changes them (0 with --allow-output-change); 2: Spark
    refuses it, or the input cannot be used.
    """
    from wmcheck.statestore.spark.compat import prepare, run
    from wmcheck.statestore.spark.session import get_session

    options = opts.compat_options(fs_options)
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # --query MODULE:FUNCTION: MODULE may be in the current directory
    prepared = prepare(checkpoint, opts.query, options)  # everything that can fail before Spark starts
    with spark_progress(progress_for(opts.quiet)) as phases:
        spark, _created = get_session(opts.master, parse_pairs(opts.confs, "--conf"), None, opts.packages, opts.jars)
        own_interrupts()  # pyspark installed its own Ctrl-C handler with the session
        report = run(spark, prepared, phases.phase)
    with open(opts.output, "w", encoding="utf-8") if opts.output else contextlib.nullcontext() as stream:
        make_output(fmt, stream, tz).compat(report, opts.allow_output_change)
    code = report.exit_code(opts.allow_output_change)
    if code:
        raise click.exceptions.Exit(code)
