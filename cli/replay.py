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
from wmcheck.checkpoint.operator_watermarks import operator_watermarks
from wmcheck.checkpoint.sources.delta_files import DeltaSourceLog
from wmcheck.checkpoint.timeutil import format_duration

from .options import checkpoint_progress, common_options, parse_pairs, progress_option
from .output import Output, make_output
from .process import own_interrupts
from .progress import progress_for, quiet_option, spark_progress

if TYPE_CHECKING:
    from wmcheck.statestore.late_rows import Lateness

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
@click.option("--path-map", "path_maps", multiple=True, metavar="FROM=TO", help="Read files logged under FROM from TO (repeatable).")
@click.option("--skip-missing", is_flag=True, help="Replay without input files that no longer exist.")
@click.option("--master", help="Spark master (default local[*]; an active session is reused).")
@click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE", help="Spark conf (repeatable).")
@click.option("--packages", multiple=True, metavar="COORDS", help="Maven packages for Spark, e.g. the Kafka connector (repeatable).")
@click.option("--jars", multiple=True, metavar="JARS", help="Jars for Spark (repeatable).")
@quiet_option()
@progress_option()
@common_options()
def replay(checkpoint: str, start: int, end: int | None, source: str | None, show_plan: bool, output: str | None,
           overwrite: bool, foreach: str | None, count_only: bool, show_lateness: bool, include_pending: bool,
           late_only: bool, on_time_only: bool,
           event_time: str | None, window: str | None, group_by: str | None, late_watermark: str | None,
           source_format: str | None, schema: str | None, reader_options: tuple[str, ...], delta_source: str | None,
           path_maps: tuple[str, ...], skip_missing: bool, master: str | None, confs: tuple[str, ...], packages: tuple[str, ...],
           jars: tuple[str, ...], quiet: bool, progress: str | None, fmt: str, tz: tzinfo,
           fs_options: tuple[str, ...]) -> None:
    """Rebuild the exact input of batches --from N --to M of CHECKPOINT and reprocess it (see docs/replay.md)."""
    if sum(map(bool, (show_plan, output, foreach, count_only, show_lateness))) != 1:
        raise click.UsageError("pass exactly one of --plan, --output DIR, --foreach-batch MODULE:FUNCTION, --count or --lateness")
    if late_only and on_time_only:
        raise click.UsageError("use either --late-only or --on-time-only")
    if (late_only or on_time_only or window or group_by or show_lateness) and not event_time:
        raise click.UsageError("--late-only, --on-time-only, --window, --group-by and --lateness need --event-time COL")
    fs_opts = parse_pairs(fs_options, "--fs-option")
    path_map = parse_pairs(path_maps, "--path-map")
    ckpt = open_checkpoint(checkpoint, fs_opts)
    table = DeltaSourceLog(delta_source, fs_opts) if delta_source else None
    reports = checkpoint_progress(ckpt, progress, fs_opts)
    if late_watermark is None:  # the batches' plans say whether the operators had watermarks of their own
        late_watermark = "previous" if operator_watermarks(ckpt, reports, []).allow_multiple else "current"
    if show_plan:
        batches = plan(ckpt, start, end, source=source, include_pending=include_pending, path_map=path_map,
                       late_rule=late_watermark, fs_options=fs_opts, delta_source=table)
        bootstrap = parse_pairs(reader_options, "--option").get(BOOTSTRAP_OPTION)
        asked = ask_retention(batches, bootstrap) if bootstrap and kafka_sources(batches) and client_installed() else None
        make_output(fmt, tz=tz).replay_plan(replay_plan(ckpt, batches, asked))
        return
    from wmcheck.statestore.late_rows import infer_window, lateness, window_key
    from wmcheck.statestore.replay import ReplayOptions, prepare, read_batches
    from wmcheck.statestore.replay import replay as run_replay
    from wmcheck.statestore.session import get_session
    from wmcheck.statestore.sinks import ParquetSink, load_function

    opts = ReplayOptions(
        source=source, source_format=source_format, schema=schema, options=parse_pairs(reader_options, "--option"),
        path_map=path_map, skip_missing=skip_missing, include_pending=include_pending, event_time=event_time,
        window=window, keep="late" if late_only else "on_time" if on_time_only else "all",
        late_watermark=late_watermark, fs_options=fs_opts,
    )
    batches = prepare(ckpt, start, end, opts, table)
    if foreach and os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # --foreach-batch MODULE:FUNCTION: MODULE may be in the current directory
    sink = ParquetSink(output, overwrite, fs_opts) if output else load_function(foreach) if foreach else None
    with spark_progress(progress_for(quiet)) as meter:
        spark, _created = get_session(master, parse_pairs(confs, "--conf"), None, packages, jars)
        own_interrupts()  # pyspark installed its own Ctrl-C handler with the session
        meter.phase(f"reading {len(batches)} batch(es)")
        keys = tuple(c.strip() for c in group_by.split(",") if c.strip()) if group_by else ()
        out = make_output(fmt, tz=tz)
        stored = window_key(ckpt, reports) if event_time and not window else None
        if stored is not None:
            inferred = infer_window(spark, ckpt, stored)
            opts = dataclasses.replace(opts, window=inferred.spec)
            keys = keys or inferred.group_by
            out.note(f"window: {format_duration(inferred.duration_ms)} every {format_duration(inferred.slide_ms)}, "
                     f"grouped by {', '.join(inferred.group_by) or 'nothing else'} (inferred from state/{stored.operator_id})")
        if show_lateness:
            found = lateness(list(read_batches(spark, batches, opts)), str(event_time))
            meter.clear()
            _print_lateness(out, found)
            return
        rows = run_replay(spark, batches, opts, sink or (lambda _df, _batch: None), keys,
                          lambda done, total, batch: meter.phase(f"batch {batch}: {done} of {total}"), ckpt, reports,
                          grouped=stored is not None)
        meter.clear()
    out.replay_rows(rows)
