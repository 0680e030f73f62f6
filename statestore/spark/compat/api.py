"""``compat``: will new query code restart on this checkpoint, and what will it change?

The checkpoint is only read. A scratch copy of what re-running one batch needs (:mod:`.scratch`) is rewound
by that batch and the new query runs it with Spark (:mod:`.query`), reading the batch's recorded input; its
failure is translated (:mod:`.explain`), its output, state and schemas compared with the old code's
(:mod:`.compare`), its watermark with the old one (:mod:`.watermark`).
"""
from __future__ import annotations

import posixpath
import shutil
import tempfile
import time
from dataclasses import field, replace
from typing import TYPE_CHECKING, Callable, Mapping

from wmcheck.checkpoint.batch_inputs import plan_batch
from wmcheck.checkpoint.errors import CheckpointError, MissingFileError, UnsupportedError, arg
from wmcheck.checkpoint.fs import FileSystem, local_path, open_fs
from wmcheck.checkpoint.locations import open_file_sink, spark_location
from wmcheck.checkpoint.logs.metadata_log import OFFSET_LOG
from wmcheck.checkpoint.model import Checkpoint, open_checkpoint
from wmcheck.checkpoint.records import dataclass
from wmcheck.checkpoint.sources.file import FILE
from wmcheck.checkpoint.sources.other import LONG, NONE
from wmcheck.checkpoint.sources.registry import kind_named
from wmcheck.checkpoint.watermarks.plans import BatchPlan
from wmcheck.checkpoint.watermarks.progress_files import load_progress
from wmcheck.statestore.spark.compat.baseline import Builder, next_batches, scratch_copy
from wmcheck.statestore.spark.compat.compare import (
    SELF_DESCRIBING,
    diff_output,
    read_files,
    schema_changes,
    schemas_of,
    sink_batch_files,
    state_changes,
    written_shape,
)
from wmcheck.statestore.spark.compat.explain import explain
from wmcheck.statestore.spark.compat.next_input import NextInput, next_inputs
from wmcheck.statestore.spark.compat.query import (
    CAPTURED,
    CAPTURED_SCHEMA,
    DEFAULT_TIMEOUT_S,
    BatchRun,
    NewQuery,
    build,
    run_batch,
)
from wmcheck.statestore.spark.compat.results import REFUSED, RESTARTS, CompatReport, OutputChange, SourceNote
from wmcheck.statestore.spark.compat.scratch import NEXT, RERUN, Scratch, rerun_batch, sink_format
from wmcheck.statestore.spark.compat.substitute import BatchRows, batch_rows
from wmcheck.statestore.spark.compat.watermark import POLICY, watermark_change, with_late_rows
from wmcheck.statestore.spark.spark_errors import spark_errors
from wmcheck.statestore.spark.user_code import load_callable, locate_callable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

QUERY_EXAMPLE = "jobs.orders:new_query"
REPLAYABLE = (FILE, NONE, LONG)
"""Source kinds a re-run reads again by itself: logged files, nothing, or a deterministic long offset (rate)."""


@dataclass(frozen=True)
class CompatOptions:
    """How ``compat`` runs: ``file_sink`` the old query's sink directory (default: the new writer's path),
    ``batch`` the batch to re-run (default: the last committed one that read input), ``inputs`` where a file
    source's logged files are now (source id -> directory), ``scratch_dir`` where the scratch copy goes (a
    new temporary directory under it, removed after unless ``keep_scratch``), ``progress`` Spark's event log of the
    old query (a file or ``spark.eventLog.dir``: each watermarked input's old delay from its plan), ``baseline`` the
    old code (``module:function`` or the function): the batches a restart runs next are run by both and compared,
    ``next_inputs`` new files for them (file source id -> directory: that source reads those files, not its own)."""

    file_sink: str | None = None
    batch: int | None = None
    inputs: Mapping[str, str] = field(default_factory=dict)
    scratch_dir: str | None = None
    keep_scratch: bool = False
    timeout_s: float = DEFAULT_TIMEOUT_S
    fs_options: Mapping[str, str] = field(default_factory=dict)
    progress: str | None = None
    baseline: str | Callable | None = None
    next_inputs: Mapping[str, str] = field(default_factory=dict)


def _common_dir(paths: list[str]) -> str:
    return posixpath.commonpath([posixpath.dirname(p) for p in paths]) if paths else ""


def source_notes(ckpt: Checkpoint, batch: int, inputs: Mapping[str, str], fs_options: Mapping[str, str]
                 ) -> tuple[tuple[SourceNote, ...], dict[str, str], dict[str, BatchRows]]:
    """What each source of ``batch`` re-reads: the path map that points a file source's logged files at ``inputs``,
    and the rows in ``inputs`` that replace another source's input. Refuses (before any Spark work) a source whose
    input cannot be read again."""
    planned = plan_batch(ckpt, batch, sizes=False)
    unknown = sorted(set(inputs) - {s.source_id for s in planned.sources})
    if unknown:
        raise CheckpointError(f"{arg('inputs')} names source {unknown[0]}, which batch {batch} does not have",
                              param="inputs", hint="source ids as `wmcheck batches` lists them (0, 1, ...)")
    notes, path_map, rows = [], {}, {}
    for src in planned.sources:
        given = inputs.get(src.source_id)
        if kind_named(src.kind) is FILE:
            logged = [f.path for f in src.files]
            if given is not None:
                path_map[_common_dir(logged)] = given.rstrip("/")
            notes.append(SourceNote(src.source_id, "file", True, f"{len(src.files)} logged file(s)" +
                                    (f", read from {given}" if given else "")))
        elif kind_named(src.kind) in REPLAYABLE:
            notes.append(SourceNote(src.source_id, src.kind, True, src.note))
        elif given is not None:
            found = batch_rows(src.source_id, given, batch, fs_options)
            rows[src.source_id] = found
            notes.append(SourceNote(src.source_id, src.kind, True, f"replaced by the {len(found.files)} {found.format} "
                                    f"file(s) in {found.location} (the rows it read in batch {batch})"))
        else:
            raise UnsupportedError(
                f"source {src.source_id} ({src.kind}) is not replayable: {src.note or 'its input cannot be read again'}; "
                f"compat re-runs batch {batch} from its recorded input", path=OFFSET_LOG.path(batch),
                hint=f"pass {arg('inputs', src.source_id + '=DIR')}: a directory of the rows it read in batch {batch} "
                     f"(wmcheck replay CKPT --from {batch} --to {batch} --source {src.source_id} --output DIR writes a "
                     "Kafka source's)")
    return tuple(notes), path_map, rows


def _missing_files(ckpt: Checkpoint, batch: int, path_map: Mapping[str, str], fs_options: Mapping[str, str]) -> None:
    planned = plan_batch(ckpt, batch, path_map=path_map, sizes=True, fs_options=fs_options)
    for src in planned.sources:
        gone = src.missing
        if gone:
            raise MissingFileError(
                f"{len(gone)} of the {len(src.files)} input file(s) source {src.source_id} read in batch {batch} no longer "
                f"exist, e.g. {gone[0].location}", path=f"sources/{src.source_id}/{gone[0].log_batch}",
                hint=f"{arg('inputs', src.source_id + '=DIR')} if they moved, or another {arg('batch')}")


def _canonical(location: str) -> str:
    """A location as Spark reads it, local ones as plain paths (``file:/a%20b`` -> ``/a b``)."""
    read = spark_location(location)
    return local_path(read) or read


def _moved_sources(ckpt: Checkpoint, batch: int, query: NewQuery, path_map: Mapping[str, str]
                   ) -> list[tuple[str, str, str]]:
    """(source id, the new query's path, the directory its log names) of every file source the new query reads from
    another directory than the one holding the files it logged for ``batch`` (where ``path_map``, the ``inputs``
    given, says they are now)."""
    planned = plan_batch(ckpt, batch, path_map=path_map, sizes=False)
    out = []
    for src, new in zip(planned.sources, query.sources):
        if kind_named(src.kind) is not FILE or not new.paths or not src.files:
            continue
        logged = _common_dir([_canonical(f.location) for f in src.files]).rstrip("/")
        wanted = _canonical(new.paths[0]).rstrip("/")
        if not (logged + "/").startswith(wanted + "/"):
            out.append((src.source_id, wanted, logged))
    return out


def _output(spark: "SparkSession", query: NewQuery, scratch: Scratch, run: BatchRun,
            sink: FileSystem | None) -> OutputChange:
    batch = scratch.batch
    if run.captured is not None:
        import os

        folder = os.path.join(run.captured, CAPTURED)
        if not os.path.exists(os.path.join(run.captured, CAPTURED_SCHEMA)):
            return OutputChange("captured", 0, None, None, None, note="the batch handed nothing to the sink")
        new = spark.read.parquet(folder)
        why = f"the {query.sink.format} sink's output of batch {batch} is not recorded in the checkpoint"
        return diff_output("captured", None, new, note=f"old output not compared: {why}")
    assert scratch.sink is not None
    fmt = query.sink.format.lower()
    new_files = sink_batch_files(open_fs(scratch.sink), batch) or []
    new = read_files(spark, fmt, new_files, query.df)
    # a file without a byte holds no row, and of a format that names no columns (JSON) not even them: a batch that
    # wrote only such files is compared by the old code's newest files with rows (written_shape)
    old_files = sink_batch_files(sink, batch, with_bytes=fmt not in SELF_DESCRIBING) if sink is not None else None
    if old_files is None or sink is None:
        return diff_output("file", None, new, note=f"the old sink log does not tell the files batch {batch} wrote (no "
                                                   "entry, or one compact file holds it with the batches before it)")
    if old_files:
        return diff_output("file", read_files(spark, fmt, old_files, query.df), new, typed=fmt in SELF_DESCRIBING)
    shape, how = written_shape(spark, fmt, sink, batch, query.df)
    return diff_output("file", shape, new, typed=fmt in SELF_DESCRIBING, note=how)


@dataclass(frozen=True)
class Prepared:
    """Everything checked before Spark starts: the checkpoint, the batch to re-run, that the user's module exists
    (``query``: its ``module:function``, or the function), what the sources re-read, where logged input files moved,
    and the old sink."""

    ckpt: Checkpoint
    batch: int
    how: str
    spec: str
    query: str | Callable
    sources: tuple[SourceNote, ...]
    path_map: Mapping[str, str]
    rows: Mapping[str, BatchRows]
    sink: FileSystem | None
    options: CompatOptions
    plans: Mapping[int, BatchPlan] | None = None
    """The old query's batch plans from ``options.progress`` (None without it)."""
    baseline: str | Callable | None = None
    """The old code (``module:function``, or the function), whose next batches are compared with the new code's."""
    fed: tuple[NextInput, ...] = ()
    """The new files the next batches of file sources read (``options.next_inputs``)."""


def _spec(query: str | Callable) -> str:
    return query if isinstance(query, str) else getattr(query, "__qualname__", repr(query))


def _plans(ckpt: Checkpoint, location: str | None, fs_options: Mapping[str, str]) -> Mapping[int, BatchPlan] | None:
    if location is None:
        return None
    meta = ckpt.query_metadata
    return load_progress(meta.query_id if meta else None, location, fs_options).plans


def prepare(checkpoint: Checkpoint | str, query: str | Callable, options: CompatOptions = CompatOptions()) -> Prepared:
    """Check what can be checked without Spark (the checkpoint, the batch, that the query's module exists, the
    input). The module is imported by :func:`run`, with the session: a module may need one (a ``@udf`` at its top
    level)."""
    ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else open_checkpoint(str(checkpoint), options.fs_options)
    batch, how = rerun_batch(ckpt, options.batch)
    spec = _spec(query)
    for given, param in ((query, "query"), (options.baseline, "baseline")):
        if isinstance(given, str):
            locate_callable(given, param, QUERY_EXAMPLE)
    sources, path_map, rows = source_notes(ckpt, batch, options.inputs, options.fs_options)
    _missing_files(ckpt, batch, path_map, options.fs_options)
    sink = open_file_sink(options.file_sink, options.fs_options) if options.file_sink else None
    plans = _plans(ckpt, options.progress, options.fs_options)
    if options.next_inputs and options.baseline is None:
        raise CheckpointError(f"{arg('next_inputs')} gives the next batches input, which only {arg('baseline')} runs",
                              param="next_inputs", hint=f"add {arg('baseline', 'MODULE:FUNCTION')}, the old code")
    last = ckpt.last_committed_batch if ckpt.last_committed_batch is not None else -1
    fed = next_inputs(ckpt, last, options.next_inputs, options.fs_options)
    return Prepared(ckpt, batch, how, spec, query, sources, path_map, rows, sink, options, plans, options.baseline, fed)


def _codes(spark: "SparkSession", new: Callable, prepared: Prepared, sink: FileSystem | None
           ) -> tuple[Builder, Builder] | None:
    """With a baseline, the builders of the new code's query and of the old's; the old one is built once here, before
    anything is copied or run, so that what it raises (named ``--baseline-query``) stops compat at once."""
    baseline = prepared.baseline
    if baseline is None:
        return None
    old = load_callable(baseline, "baseline", QUERY_EXAMPLE) if isinstance(baseline, str) else baseline
    fmt = sink_format(sink) if sink is not None else None
    build(spark, old, _spec(baseline), fmt, param="baseline")
    return (lambda fed: build(spark, new, prepared.spec, fmt, fed, same_reader=True),
            lambda fed: build(spark, old, _spec(baseline), fmt, fed, param="baseline", same_reader=True))


def run(spark: "SparkSession", prepared: Prepared, phase: Callable[[str], None] = lambda _text: None) -> CompatReport:
    """Build the new query, run its batch on a scratch copy, and compare; see :func:`compat`. ``phase(text)`` hears
    what runs now (a progress line)."""
    started = time.monotonic()
    phase("building the new query")
    ckpt, batch, spec, options, sink = prepared.ckpt, prepared.batch, prepared.spec, prepared.options, prepared.sink
    fn = load_callable(prepared.query, "query", QUERY_EXAMPLE) if isinstance(prepared.query, str) else prepared.query
    new = build(spark, fn, spec, sink_format(sink) if sink is not None else None, prepared.rows)
    if sink is None and new.sink.is_file and new.sink.path:
        try:
            sink = open_file_sink(new.sink.path, options.fs_options)
        except CheckpointError:
            sink = None
    notes: tuple[str, ...] = tuple(
        f"source {sid} now reads {wanted}, but its log names files under {logged}: after a restart it reads every "
        f"file under {wanted} that the log does not name (the log keeps the old files it saw)"
        for sid, wanted, logged in _moved_sources(ckpt, batch, new, prepared.path_map))
    how = prepared.how
    if notes and how == RERUN:
        batch, how = (ckpt.last_committed_batch or 0) + 1, NEXT
        notes += (f"Spark refuses to re-run a recorded batch whose files are not under the source's new path, so compat "
                  f"runs batch {batch}, the one a restart plans next",)
    if new.sink.is_file and sink is None:
        notes += (f"the old sink's log was not found: pass {arg('file_sink')} to compare the output",)
    codes = _codes(spark, fn, prepared, sink)
    root = tempfile.mkdtemp(prefix="wmcheck-compat-", dir=options.scratch_dir)
    try:
        phase(f"copying what batch {batch} needs")
        scratch = scratch_copy(ckpt, batch, root, sink if new.sink.is_file else None, how != NEXT, prepared.rows,
                               prepared.path_map)
        before = schemas_of(open_checkpoint(scratch.checkpoint))
        phase(f"running batch {batch} with the new code")
        attempt = run_batch(new, scratch.checkpoint, scratch.sink, root, options.timeout_s)
        if options.keep_scratch:
            notes += (f"scratch copy kept at {root}",)
        if attempt.failure is not None:
            return CompatReport(ckpt.location, spec, batch, how, REFUSED, refusal=explain(ckpt, attempt.failure),
                                sources=prepared.sources, notes=notes, seconds=time.monotonic() - started)
        copy = open_checkpoint(scratch.checkpoint)
        if batch not in copy.commit_ids:  # a progress report names the batch even when there was nothing to run
            notes += (f"Spark did not run batch {batch}" + (": there is no new input" if how == NEXT else ""),)
            report = CompatReport(ckpt.location, spec, batch, how, RESTARTS, sources=prepared.sources, notes=notes)
            return replace(report, seconds=time.monotonic() - started)
        phase("comparing the output")
        with spark_errors("reading the batch's output"):
            output = _output(spark, new, scratch, attempt, sink if how != NEXT else None)
        change = watermark_change(ckpt if how != NEXT else copy, copy, batch, new, spark.conf.get(POLICY, None),
                                  prepared.plans)
        if how == NEXT:
            change = replace(change, old_next_ms=None)
        phase("comparing the watermark")
        with spark_errors("replaying the recorded input for late rows"):
            recorded = min(batch, ckpt.last_committed_batch or 0)
            change = with_late_rows(spark, ckpt, recorded, new, change, dict(options.fs_options))
        phase("comparing the state")
        state = state_changes(ckpt, copy, batch) if how != NEXT else ()
        if how == NEXT:
            notes += (f"batch {batch} is new: the old code never ran it, so its output and state are not compared",)
        following = None
        if codes is not None and prepared.baseline is not None:
            phase("running the next batches with the new code and the old")
            with spark_errors("reading the next batches' output"):
                following = next_batches(spark, ckpt, codes, _spec(prepared.baseline), sink, prepared.path_map,
                                         prepared.fed, options.timeout_s, options.scratch_dir, options.fs_options)
        report = CompatReport(ckpt.location, spec, batch, how, RESTARTS, output=output, state=state,
                              schemas=schema_changes(before, schemas_of(copy)), watermark=change, next=following,
                              sources=prepared.sources, notes=notes)
        return replace(report, seconds=time.monotonic() - started)
    finally:
        if not options.keep_scratch:
            shutil.rmtree(root, ignore_errors=True)


def compat(spark: "SparkSession", checkpoint: Checkpoint | str, query: str | Callable,
           options: CompatOptions = CompatOptions()) -> CompatReport:
    """Run the new ``query`` (``module:function`` or the function itself, called as ``function(spark)`` and
    returning the new query's streaming DataFrame or DataStreamWriter) for one batch on a scratch copy of
    ``checkpoint``; see :class:`CompatReport`. The checkpoint and the old sink are only read."""
    return run(spark, prepare(checkpoint, query, options))
