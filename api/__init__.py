"""wmcheck: inspect, validate and safely repair Spark Structured Streaming checkpoints, from Python.

Every command of the command line is a function here first, taking a checkpoint's location (or an opened
:class:`Checkpoint`) and returning typed results (frozen dataclasses) that the command prints::

    import wmcheck

    ckpt = wmcheck.open_checkpoint("s3://bucket/checkpoints/orders", fs_options={"region": "eu-west-1"})
    summary = wmcheck.show(ckpt)                          # wmcheck show
    findings = wmcheck.check("/data/ckpt")                # wmcheck check: [Finding(code, severity, ...)]
    result = wmcheck.rewind("/data/ckpt", to_batch=7)     # a dry run; execute=True applies it (backed up)
    wmcheck.undo("/data/ckpt")                            # wmcheck undo

Errors are :class:`CheckpointError` subclasses naming the parameter at fault (``error.param``). Importing this
package loads nothing else: each function imports what it needs when called (pyspark only for ``engine="spark"``,
``replay_batches``, ``repartition`` and ``compat``).
"""
from __future__ import annotations

from datetime import timezone, tzinfo
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence

from wmcheck.checkpoint.errors import (
    CheckpointError,
    MalformedFileError,
    MissingFileError,
    NewerVersionError,
    NotACheckpointError,
    RefusedError,
    SparkUnavailableError,
    UnsupportedError,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from pyspark.sql import DataFrame, SparkSession

    from wmcheck.checkpoint.batch_inputs import ReplayPlan
    from wmcheck.checkpoint.checks.definition import Finding
    from wmcheck.checkpoint.model import Checkpoint
    from wmcheck.checkpoint.repair import BackupRow, RepairRequest, RepairResult, RunOptions, UndoResult
    from wmcheck.checkpoint.summary import BatchRow, CheckpointSummary
    from wmcheck.checkpoint.watermarks.timeline import Timeline
    from wmcheck.statestore.engines import EngineChoice
    from wmcheck.statestore.spark.compat import CompatReport
    from wmcheck.statestore.summary import StateSummary

FsOptions = Mapping[str, str] | None

__all__ = ["CheckpointError", "MalformedFileError", "MissingFileError", "NewerVersionError", "NotACheckpointError",
           "RefusedError", "SparkUnavailableError", "UnsupportedError", "backups", "batches", "check", "compat",
           "older_than_watermark", "open_checkpoint", "relocate", "repartition", "replay_batches", "replay_plan", "reset_offsets",
           "rewind", "set_watermark", "show", "state", "timeline", "undo"]


def open_checkpoint(location: str, fs_options: FsOptions = None) -> Checkpoint:
    """Open a checkpoint by path or URI (``s3://``, ``gs://``, ``abfss://``, ``hdfs://``, ``file:``); ``fs_options``
    are its store's options (docs/remote.md). Files are read when a fact needs them."""
    from wmcheck.checkpoint.model import open_checkpoint as opened

    return opened(location, fs_options)


def _opened(checkpoint: str | Checkpoint, fs_options: FsOptions) -> Checkpoint:
    return open_checkpoint(checkpoint, fs_options) if isinstance(checkpoint, str) else checkpoint


def _location(checkpoint: str | Checkpoint) -> str:
    return checkpoint if isinstance(checkpoint, str) else checkpoint.location


def _progress(ckpt: Checkpoint, progress: str | None, fs_options: FsOptions) -> Any:
    if progress is None:
        return None
    from wmcheck.checkpoint.watermarks.progress_files import load_progress

    return load_progress(ckpt.query_metadata.query_id if ckpt.query_metadata else None, progress, fs_options or {})


def show(checkpoint: str | Checkpoint, *, progress: str | None = None, tz: tzinfo = timezone.utc,
         fs_options: FsOptions = None) -> CheckpointSummary:
    """``wmcheck show``: check's restart verdict (``verdict``, ``findings``), batches, the watermark the next batch
    uses (and why it is stuck), pinned conf, sources, stateful operators, warnings. ``progress``: Spark's event logs or progress JSON lines."""
    from wmcheck.checkpoint.verdict import show_checkpoint

    ckpt = _opened(checkpoint, fs_options)
    return show_checkpoint(ckpt, tz, _progress(ckpt, progress, fs_options))


def batches(checkpoint: str | Checkpoint, *, last: int | None = None, start: int | None = None, end: int | None = None,
            progress: str | None = None, tz: tzinfo = timezone.utc, fs_options: FsOptions = None) -> list[BatchRow]:
    """``wmcheck batches``: one row per batch (the ``last`` K, or ``start``..``end``)."""
    from wmcheck.checkpoint.summary import batch_range, batch_rows

    ckpt = _opened(checkpoint, fs_options)
    return batch_rows(ckpt, batch_range(ckpt, last, start, end), tz, _progress(ckpt, progress, fs_options))


def check(checkpoint: str, *, file_sink: str | None = None, select: Iterable[str] | None = None,
          ignore: Iterable[str] = (), stall_batches: int | None = None, content: bool = True,
          tz: tzinfo = timezone.utc, fs_options: FsOptions = None, delta_sink: str | None = None,
          delta_sources: Sequence[str] = (), delta_txn_app_id: str | None = None) -> list[Finding]:
    """``wmcheck check``: every finding (code, severity, path, message, fix); a checkpoint that cannot be read
    is one WM000 finding. ``select``/``ignore``: check codes; ``delta_sink``: the query's Delta table (WM086, WM087;
    a CheckpointError when it is not one), judged by the ``txn`` of ``delta_txn_app_id`` (the ``txnAppId`` writer option
    of a foreachBatch function's idempotent writes; default: the query id); ``delta_sources``: the Delta tables it reads (WM089-WM091; a CheckpointError
    for a path that is not a Delta table or not one of its sources)."""
    from wmcheck.checkpoint.checks.context import STALL_BATCHES
    from wmcheck.checkpoint.sinks.delta import check_txn_app_id, read_delta_log
    from wmcheck.checkpoint.validate import check_location, select_checks

    app_id = check_txn_app_id(delta_txn_app_id, delta_sink)
    delta = read_delta_log(delta_sink, fs_options) if delta_sink is not None else None
    return check_location(checkpoint, file_sink, fs_options=fs_options, checks=select_checks(select, ignore), tz=tz,
                          stall_batches=STALL_BATCHES if stall_batches is None else stall_batches, content=content,
                          delta=delta, delta_sources=delta_sources, delta_app_id=app_id)


def _repair(checkpoint: str | Checkpoint, request: RepairRequest, execute: bool, options: RunOptions | None,
            fs_options: FsOptions) -> RepairResult:
    import dataclasses

    from wmcheck.checkpoint import repair

    run = options or repair.RunOptions()
    if execute or fs_options is not None:
        run = dataclasses.replace(run, execute=execute or run.execute,
                                  fs_options=fs_options if fs_options is not None else run.fs_options)
    return repair.run(_location(checkpoint), request, run)


def rewind(checkpoint: str | Checkpoint, *, to_batch: int | None = None, to_watermark: str | None = None,
           to_time: str | None = None, shift: int | None = None, file_sink: str | None = None,
           keep_next_offsets: bool = False, keep_source_log: bool = False, execute: bool = False,
           options: RunOptions | None = None, fs_options: FsOptions = None,
           delta_sink: str | None = None, delta_txn_app_id: str | None = None) -> RepairResult:
    """``wmcheck rewind``: make an earlier batch the last committed one. A dry run (the plan) unless ``execute``;
    ``options`` for saved plans, the idle check, the backup directory; ``delta_sink``: the query's Delta table, for
    the plan's ``sinks`` (what it does with the re-run batches); ``delta_txn_app_id``: the ``txn`` app id its writer
    uses (default: the query id)."""
    from wmcheck.checkpoint.repair import RewindRequest

    request = RewindRequest(to_batch=to_batch, to_watermark=to_watermark, to_time=to_time, shift=shift,
                            file_sink=file_sink, keep_next_offsets=keep_next_offsets, keep_source_log=keep_source_log,
                            delta_sink=delta_sink, delta_txn_app_id=delta_txn_app_id)
    return _repair(checkpoint, request, execute, options, fs_options)


def set_watermark(checkpoint: str | Checkpoint, watermark: str | int, *, allow_raise: bool = False,
                  window: str | int | None = None, execute: bool = False, options: RunOptions | None = None,
                  fs_options: FsOptions = None, delta_sink: str | None = None, kafka_sink: str | None = None,
                  foreach_batch: bool = False, bootstrap_server: str | None = None) -> RepairResult:
    """``wmcheck set-watermark``: the watermark the next batch starts from (ISO time, epoch ms, ``-2 hours``);
    ``delta_sink``, ``kafka_sink`` (its broker ``bootstrap_server``), ``foreach_batch``: the query's sinks, for the
    plan's ``sinks`` (what each gets)."""
    from wmcheck.checkpoint.repair import SetWatermarkRequest

    return _repair(checkpoint, SetWatermarkRequest(watermark=watermark, allow_raise=allow_raise, window=window,
                                                   delta_sink=delta_sink, kafka_sink=kafka_sink,
                                                   foreach_batch=foreach_batch, bootstrap_server=bootstrap_server),
                   execute, options, fs_options)


def reset_offsets(checkpoint: str | Checkpoint, *, to_datetime: str | None = None, by_duration: str | None = None,
                  to_offset: int | None = None, shift_by: int | None = None, to_earliest: bool = False,
                  to_latest: bool = False, from_file: str | None = None, topic: Iterable[str] = (),
                  source: str | None = None, bootstrap_server: str | None = None,
                  kafka_options: Mapping[str, str] | None = None, file_sink: str | None = None, execute: bool = False,
                  options: RunOptions | None = None, fs_options: FsOptions = None, delta_sink: str | None = None,
                  kafka_sink: str | None = None, foreach_batch: bool = False) -> RepairResult:
    """``wmcheck reset-offsets``: start a Kafka source (``source``; its partitions ``topics``, ``T`` or ``T:P,P``) at
    other offsets, given by exactly one of ``to_datetime`` ... ``from_file``; the broker (``bootstrap_server``) is asked
    where they need it; ``delta_sink``, ``kafka_sink``, ``foreach_batch`` (and ``file_sink``): the query's sinks, for
    the plan's ``sinks`` (what the records read again or skipped do to each)."""
    from wmcheck.checkpoint.repair import ResetOffsetsRequest

    request = ResetOffsetsRequest(source=source, topic=tuple(topic), to_datetime=to_datetime, by_duration=by_duration,
                                  to_offset=to_offset, shift_by=shift_by, to_earliest=to_earliest, to_latest=to_latest,
                                  from_file=from_file, bootstrap_server=bootstrap_server, kafka_options=kafka_options,
                                  file_sink=file_sink, delta_sink=delta_sink, kafka_sink=kafka_sink,
                                  foreach_batch=foreach_batch)
    return _repair(checkpoint, request, execute, options, fs_options)


def relocate(checkpoint: str | Checkpoint, *, path_map: Mapping[str, str] | None = None, file_sink: str | None = None,
             execute: bool = False, options: RunOptions | None = None, fs_options: FsOptions = None) -> RepairResult:
    """``wmcheck relocate``: a copied or moved checkpoint names its own files (``path_map``: FROM -> TO)."""
    from wmcheck.checkpoint.repair import RelocateRequest

    return _repair(checkpoint, RelocateRequest(path_map=path_map, file_sink=file_sink), execute, options, fs_options)


def repartition(checkpoint: str | Checkpoint, partitions: int | None, *, file_sink: str | None = None,
                execute: bool = False, options: RunOptions | None = None, fs_options: FsOptions = None,
                master: str | None = None, conf: Mapping[str, str] | None = None) -> RepairResult:
    """``wmcheck repartition``: Spark's offline state repartition (pyspark 4.2+); planning needs no Spark."""
    from wmcheck.checkpoint.repair import RepartitionRequest
    from wmcheck.statestore.spark.repartition import SparkRepartitioner

    runner = SparkRepartitioner(master=master, conf=dict(conf or {})) if execute else None
    return _repair(checkpoint, RepartitionRequest(partitions=partitions, file_sink=file_sink, runner=runner),
                   execute, options, fs_options)


def undo(checkpoint: str | Checkpoint, *, backup_id: str | None = None, force: bool = False, idle_ms: int | None = None,
         file_sink: str | None = None, fs_options: FsOptions = None) -> UndoResult:
    """``wmcheck undo``: restore the checkpoint from a wmcheck backup (the last one by default)."""
    from wmcheck.checkpoint.activity import DEFAULT_IDLE_MS
    from wmcheck.checkpoint.repair import undo_repair

    return undo_repair(_location(checkpoint), backup_id=backup_id, force=force,
                       idle_ms=DEFAULT_IDLE_MS if idle_ms is None else idle_ms, file_sink=file_sink, fs_options=fs_options)


def backups(checkpoint: str | Checkpoint, *, fs_options: FsOptions = None) -> list[BackupRow]:
    """``wmcheck backups``: the backups wmcheck made of the checkpoint."""
    from wmcheck.checkpoint.repair import list_backups

    return list_backups(_location(checkpoint), fs_options=fs_options)


def state(checkpoint: str | Checkpoint, *, operator: int | None = None, store: str | None = None,
          batch: int | None = None, watermark_ms: int | None = None, engine: EngineChoice = "auto",
          spark: SparkSession | None = None, progress: str | None = None, tz: tzinfo = timezone.utc,
          fs_options: FsOptions = None) -> StateSummary:
    """``wmcheck state``: rows per operator and store and their age against each operator's own watermark, read
    without a JVM (``engine="python"``, the default when it reads every store) or by Spark's reader; ``progress``:
    Spark's event log, where the plan decides an operator's watermark (after a stream-stream join)."""
    from wmcheck.statestore.engines import summarize

    ckpt = _opened(checkpoint, fs_options)
    return summarize(ckpt, operator, store, batch, watermark_ms, tz, engine, spark, _progress(ckpt, progress, fs_options))


def older_than_watermark(checkpoint: str | Checkpoint, *, operator: int = 0, store: str | None = None,
                         batch: int | None = None, watermark_ms: int | None = None, engine: EngineChoice = "auto",
                         spark: SparkSession | None = None, progress: str | None = None,
                         fs_options: FsOptions = None) -> Any:
    """``wmcheck state --older-than-watermark``: the rows the next batch evicts by the operator's own watermark (an
    Arrow table; a DataFrame with ``engine="spark"``); refused when that watermark is unknown (pass ``progress``)."""
    from wmcheck.statestore.engines import older_than_watermark as older

    ckpt = _opened(checkpoint, fs_options)
    return older(ckpt, operator, store, batch, watermark_ms, engine, spark, _progress(ckpt, progress, fs_options))


def replay_plan(checkpoint: str | Checkpoint, start: int, end: int | None = None, *, source: str | None = None,
                include_pending: bool = False, path_map: Mapping[str, str] | None = None,
                fs_options: FsOptions = None, delta_source: str | None = None,
                delta_starting_version: int | None = None) -> ReplayPlan:
    """``wmcheck replay --plan``: the input files and offsets of batches ``start``..``end``, no Spark; ``delta_source``:
    the Delta table the query reads, whose log gives a Delta source's files; ``delta_starting_version``: the query's
    startingVersion option, where its first batch started reading."""
    from wmcheck.checkpoint.batch_inputs import plan
    from wmcheck.checkpoint.batch_inputs import replay_plan as assembled
    from wmcheck.checkpoint.sources.delta_files import DeltaSourceLog

    ckpt = _opened(checkpoint, fs_options)
    table = DeltaSourceLog(delta_source, fs_options, delta_starting_version) if delta_source is not None else None
    return assembled(ckpt, plan(ckpt, start, end, source=source, include_pending=include_pending, path_map=path_map,
                                delta_source=table, fs_options=fs_options))


def replay_batches(spark: SparkSession, checkpoint: str | Checkpoint, start: int, end: int | None = None, *,
                   delta_source: str | None = None, delta_starting_version: int | None = None,
                   **options: Any) -> Iterator[tuple[int, DataFrame, int]]:
    """``wmcheck replay``: ``(batch id, DataFrame, watermark ms)`` of each recorded batch's exact input (options
    as :class:`wmcheck.statestore.spark.replay.ReplayOptions`: ``event_time``, ``keep="late"``, ``path_map``...);
    ``delta_source`` and ``delta_starting_version`` as for :func:`replay_plan`."""
    from wmcheck.checkpoint.sources.delta_files import DeltaSourceLog
    from wmcheck.statestore.spark.replay import batch_inputs

    table = None
    if delta_source is not None:
        table = DeltaSourceLog(delta_source, options.get("fs_options"), delta_starting_version)
    return batch_inputs(spark, checkpoint, start, end, delta_source=table, **options)


def timeline(checkpoint: str | Checkpoint, *, output: str | None = None, progress: str | None = None,
             tz: tzinfo = timezone.utc, fs_options: FsOptions = None) -> tuple[Timeline, Figure]:
    """``wmcheck timeline``: the facts and the matplotlib figure; with ``output`` also written (``.html``,
    ``.png``, ``.svg``)."""
    from wmcheck.checkpoint.watermarks import timeline as drawing

    ckpt = _opened(checkpoint, fs_options)
    facts = drawing.timeline(ckpt, _progress(ckpt, progress, fs_options), tz)
    fig = drawing.figure(facts, tz)
    if output is not None:
        drawing.save(facts, fig, output, tz=tz)
    return facts, fig


def compat(spark: SparkSession, checkpoint: str | Checkpoint, query: str | Callable[[SparkSession], Any], *,
           file_sink: str | None = None, batch: int | None = None, inputs: Mapping[str, str] | None = None,
           scratch_dir: str | None = None, keep_scratch: bool = False, timeout_s: float = 600.0,
           progress: str | None = None, baseline: str | Callable[[SparkSession], Any] | None = None,
           fs_options: FsOptions = None) -> CompatReport:
    """``wmcheck compat``: will the new query code (``module:function``, or the function: ``function(spark)``
    returns its streaming DataFrame or DataStreamWriter) restart on the checkpoint, and what will it change? One
    batch runs with Spark on a scratch copy; the checkpoint is only read (docs/compat.md). ``progress``: Spark's
    event log of the old query, whose plans give each watermarked input's old delay; ``baseline``: the old code, run
    with the new on the batches a restart runs next."""
    from wmcheck.statestore.spark.compat import CompatOptions
    from wmcheck.statestore.spark.compat import compat as run

    options = CompatOptions(file_sink=file_sink, batch=batch, inputs=dict(inputs or {}), scratch_dir=scratch_dir,
                            keep_scratch=keep_scratch, timeout_s=timeout_s, fs_options=dict(fs_options or {}),
                            progress=progress, baseline=baseline)
    return run(spark, checkpoint, query, options)
