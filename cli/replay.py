"""``wmcheck replay``."""
from __future__ import annotations

import dataclasses
import os
import sys
from datetime import tzinfo
from typing import TYPE_CHECKING

import click

from wmcheck.checkpoint.batch_inputs import LATE_RULES, plan, replay_plan
from wmcheck.checkpoint.kafka_retention import BOOTSTRAP_OPTION, ask_retention, client_installed, kafka_sources
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.records import dataclass
from wmcheck.checkpoint.sources.delta_files import DeltaSourceLog
from wmcheck.checkpoint.timeutil import format_duration
from wmcheck.checkpoint.watermarks.operators import operator_watermarks

from .options import checkpoint_progress, common_options, options_object, parse_pairs, progress_option
from .output import Output, make_output
from .process import own_interrupts
from .progress import progress_for, quiet_option, spark_progress

if TYPE_CHECKING:
    from wmcheck.checkpoint.model import Checkpoint
    from wmcheck.checkpoint.watermarks.progress import QueryProgress
    from wmcheck.statestore.spark.late_rows import Lateness
    from wmcheck.statestore.spark.replay import ReplayOptions


@dataclass(frozen=True)
class ReplayArgs:
    """``wmcheck replay``'s options: the batches, what to do with them, how the query read its input, and Spark's."""

    start: int
    end: int | None
    source: str | None
    show_plan: bool
    output: str | None
    overwrite: bool
    foreach: str | None
    count_only: bool
    show_lateness: bool
    include_pending: bool
    late_only: bool
    on_time_only: bool
    event_time: str | None
    window: str | None
    group_by: str | None
    late_watermark: str | None
    source_format: str | None
    schema: str | None
    reader_options: tuple[str, ...]
    delta_source: str | None
    delta_starting_version: int | None
    path_maps: tuple[str, ...]
    skip_missing: bool
    master: str | None
    confs: tuple[str, ...]
    packages: tuple[str, ...]
    jars: tuple[str, ...]
    quiet: bool
    progress: str | None

    def validate(self) -> None:
        """Options that go together: one thing to do; late or on-time rows, windows and groups need the event time."""
        if sum(map(bool, (self.show_plan, self.output, self.foreach, self.count_only, self.show_lateness))) != 1:
            raise click.UsageError("pass exactly one of --plan, --output DIR, --foreach-batch MODULE:FUNCTION, --count or --lateness")
        if self.late_only and self.on_time_only:
            raise click.UsageError("use either --late-only or --on-time-only")
        if (self.late_only or self.on_time_only or self.window or self.group_by or self.show_lateness) and not self.event_time:
            raise click.UsageError("--late-only, --on-time-only, --window, --group-by and --lateness need --event-time COL")
        if self.delta_starting_version is not None and not self.delta_source:
            raise click.UsageError("--delta-starting-version needs --delta-source PATH (the table the query reads)")

    def replay_options(self, late_rule: str, fs_options: dict[str, str]) -> "ReplayOptions":
        """How the library reads the batches (``late_rule``: the watermark late rows are judged by)."""
        from wmcheck.statestore.spark.replay import ReplayOptions

        return ReplayOptions(
            source=self.source, source_format=self.source_format, schema=self.schema,
            options=parse_pairs(self.reader_options, "--option"), path_map=parse_pairs(self.path_maps, "--path-map"),
            skip_missing=self.skip_missing, include_pending=self.include_pending, event_time=self.event_time,
            window=self.window, keep="late" if self.late_only else "on_time" if self.on_time_only else "all",
            late_watermark=late_rule, fs_options=fs_options)

def _print_lateness(out: Output, found: "Lateness") -> None:
    doc = dataclasses.asdict(found)
    doc["keep_ms"] = dict(found.keep_ms)
    fields = [("late rows", found.late_rows),
              *[(label, format_duration(doc[key])) for label, key in
                (("least late", "min_ms"), ("median", "median_ms"), ("90th percentile", "p90_ms"), ("most late", "max_ms"))],
              *[(f"keeps {share}", f"a watermark delay longer by {format_duration(ms)}") for share, ms in found.keep_ms]]
    out.document(doc, fields, [])


@click.command()
@click.argument("checkpoint")
@click.option("--from", "start", type=int, required=True, help="First batch to replay.")
@click.option("--to", "end", type=int, help="Last batch (default: the last committed one).")
@click.option("--source", help="Source id to replay (as `wmcheck batches` lists them); needed with several sources.")
@click.option("--plan", "show_plan", is_flag=True,
              help="Only print each batch's offsets, files and watermarks (no Spark; with --option "
                   "kafka.bootstrap.servers=..., which recorded Kafka offsets the broker still holds).")
@click.option("--output", metavar="DIR", help="Write the rows as Parquet partitioned by batch_id.")
@click.option("--overwrite", is_flag=True, help="Replace a non-empty --output DIR.")
@click.option("--foreach-batch", "foreach", metavar="MODULE:FUNCTION", help="Call FUNCTION(df, batch_id) per batch, in order.")
@click.option("--count", "count_only", is_flag=True, help="Only count each batch's input, late rows and late groups (no output).")
@click.option("--lateness", "show_lateness", is_flag=True,
              help="How late the late rows were, and the watermark delay that would have kept 99%, 99.9%, 100% of them.")
@click.option("--include-pending", is_flag=True, help="Also the planned but uncommitted batch.")
@click.option("--late-only", is_flag=True, help="Only the rows Spark dropped as late in each batch.")
@click.option("--on-time-only", is_flag=True, help="Only the rows Spark did not drop as late.")
@click.option("--event-time", metavar="COL", help="The column the query's withWatermark used.")
@click.option("--window", metavar="DURATION[,SLIDE]",
              help="The query's window(): a row is late by its window's end (default: inferred from a window state key).")
@click.option("--group-by", metavar="COLS",
              help="Also count distinct late groups (window + COLS, comma-separated; default: the state key's columns).")
@click.option("--late-watermark", type=click.Choice(LATE_RULES),
              help="previous: Spark >= 3.4; current: Spark < 3.4 or statefulOperator.allowMultiple=false (default: "
                   "previous, or what --progress's event log shows).")
@click.option("--source-format", metavar="FORMAT", help="The format the query read: json, csv, parquet, text, ...")
@click.option("--schema", metavar="DDL", help="The schema the query read with, e.g. 'id STRING, ts TIMESTAMP'.")
@click.option("--option", "reader_options", multiple=True, metavar="KEY=VALUE", help="A reader option the query used (repeatable).")
@click.option("--delta-source", metavar="PATH", help="The Delta table the query reads: each batch's data files from "
              "its _delta_log (the range of the batch's Delta offsets).")
@click.option("--delta-starting-version", type=click.IntRange(min=0), metavar="V",
              help="The query's startingVersion option (with --delta-source): its first batch read the table's commits "
                   "from version V on (not recorded in the checkpoint).")
@click.option("--path-map", "path_maps", multiple=True, metavar="FROM=TO", help="Read files logged under FROM from TO (repeatable).")
@click.option("--skip-missing", is_flag=True, help="Replay without input files that no longer exist.")
@click.option("--master", help="Spark master (default local[*]; an active session is reused).")
@click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE", help="Spark conf (repeatable).")
@click.option("--packages", multiple=True, metavar="COORDS", help="Maven packages for Spark, e.g. the Kafka connector (repeatable).")
@click.option("--jars", multiple=True, metavar="JARS", help="Jars for Spark (repeatable).")
@quiet_option()
@progress_option()
@common_options()
@options_object(ReplayArgs)
def replay(checkpoint: str, opts: ReplayArgs, fmt: str, tz: tzinfo, fs_options: tuple[str, ...]) -> None:
    """Rebuild the exact input of batches --from N --to M of CHECKPOINT and reprocess it (see docs/replay.md)."""
    opts.validate()
    fs_opts = parse_pairs(fs_options, "--fs-option")
    ckpt = open_checkpoint(checkpoint, fs_opts)
    table = DeltaSourceLog(opts.delta_source, fs_opts, opts.delta_starting_version) if opts.delta_source else None
    reports = checkpoint_progress(ckpt, opts.progress, fs_opts)
    # the batches' plans say whether the operators had watermarks of their own
    late_rule = opts.late_watermark or ("previous" if operator_watermarks(ckpt, reports, []).allow_multiple else "current")
    if opts.show_plan:
        batches = plan(ckpt, opts.start, opts.end, source=opts.source, include_pending=opts.include_pending,
                       path_map=parse_pairs(opts.path_maps, "--path-map"), late_rule=late_rule, fs_options=fs_opts,
                       delta_source=table)
        bootstrap = parse_pairs(opts.reader_options, "--option").get(BOOTSTRAP_OPTION)
        asked = ask_retention(batches, bootstrap) if bootstrap and kafka_sources(batches) and client_installed() else None
        make_output(fmt, tz=tz).replay_plan(replay_plan(ckpt, batches, asked))
        return
    _run(ckpt, reports, opts, opts.replay_options(late_rule, fs_opts), make_output(fmt, tz=tz), table)


def _run(ckpt: "Checkpoint", reports: "QueryProgress | None", args: ReplayArgs, opts: "ReplayOptions", out: Output,
         table: DeltaSourceLog | None) -> None:
    """Replay under Spark: the batches' rows to the sink, or how late their late rows were."""
    from wmcheck.statestore.spark.late_rows import infer_window, lateness, window_key
    from wmcheck.statestore.spark.replay import prepare, read_batches
    from wmcheck.statestore.spark.replay import replay as run_replay
    from wmcheck.statestore.spark.session import get_session
    from wmcheck.statestore.spark.sinks import ParquetSink, load_function

    batches = prepare(ckpt, args.start, args.end, opts, table)
    if args.foreach and os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # --foreach-batch MODULE:FUNCTION: MODULE may be in the current directory
    sink = ParquetSink(args.output, args.overwrite, opts.fs_options) if args.output else \
        load_function(args.foreach) if args.foreach else None
    with spark_progress(progress_for(args.quiet)) as meter:
        spark, _created = get_session(args.master, parse_pairs(args.confs, "--conf"), None, args.packages, args.jars)
        own_interrupts()  # pyspark installed its own Ctrl-C handler with the session
        meter.phase(f"reading {len(batches)} batch(es)")
        keys = tuple(c.strip() for c in args.group_by.split(",") if c.strip()) if args.group_by else ()
        stored = window_key(ckpt, reports) if args.event_time and not args.window else None
        if stored is not None:
            inferred = infer_window(spark, ckpt, stored)
            opts = dataclasses.replace(opts, window=inferred.spec)
            keys = keys or inferred.group_by
            out.note(f"window: {format_duration(inferred.duration_ms)} every {format_duration(inferred.slide_ms)}, "
                     f"grouped by {', '.join(inferred.group_by) or 'nothing else'} (inferred from state/{stored.operator_id})")
        if args.show_lateness:
            found = lateness(list(read_batches(spark, batches, opts)), str(args.event_time))
            meter.clear()
            _print_lateness(out, found)
            return
        rows = run_replay(spark, batches, opts, sink or (lambda _df, _batch: None), keys,
                          lambda done, total, batch: meter.phase(f"batch {batch}: {done} of {total}"), ckpt, reports,
                          grouped=stored is not None)
        meter.clear()
    out.replay_rows(rows)
