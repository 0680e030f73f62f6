"""The next batches under both codes: with a baseline (the old code), ``compat`` also runs the batches a restart
runs next (on the input the sources hold now that their logs do not name, and the no-data batch that closes
windows after it) on two more scratch copies, one with the new code and one with the old, and compares what each
wrote. A change that shows only when windows close (append mode) shows there: the re-run batch may emit nothing.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import TYPE_CHECKING, Callable, Mapping

from wmcheck.checkpoint import repair
from wmcheck.checkpoint.fs import FileSystem, open_fs
from wmcheck.checkpoint.model import Checkpoint
from wmcheck.statestore.spark.compat.compare import SELF_DESCRIBING, diff_output, read_files, sink_batch_files
from wmcheck.statestore.spark.compat.next_input import NextInput, feed, not_fed
from wmcheck.statestore.spark.compat.query import CAPTURED, CAPTURED_SCHEMA, BatchRun, NewQuery, run_batch
from wmcheck.statestore.spark.compat.results import NextBatches
from wmcheck.statestore.spark.compat.scratch import Scratch, make_scratch
from wmcheck.statestore.spark.compat.substitute import BatchRows, replace_in_copy

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def scratch_copy(ckpt: Checkpoint, batch: int, root: str, sink: FileSystem | None, rewind: bool,
                 rows: Mapping[str, BatchRows], path_map: Mapping[str, str]) -> Scratch:
    """A scratch copy that runs ``batch`` (rewound by it with ``rewind``), the sources of ``rows`` replaced by those
    rows (a re-run batch only) and the logged files relocated by ``path_map``."""
    scratch = make_scratch(ckpt, batch, root, sink, rewind=rewind)
    if rows and rewind:
        replace_in_copy(scratch.checkpoint, batch, rows)
    if path_map:
        repair.run(scratch.checkpoint, repair.RelocateRequest(path_map=path_map), repair.RunOptions(execute=True, idle_ms=0))
        shutil.rmtree(f"{scratch.checkpoint}/_wmcheck", ignore_errors=True)
    return scratch


def _ran(scratch: Scratch) -> tuple[int, ...]:
    """The batches the copy committed from ``scratch.batch`` on (its commit log, not the progress Spark kept)."""
    return tuple(sorted(b for b in Checkpoint.open(scratch.checkpoint).commit_ids if b >= scratch.batch))


def _written(spark: "SparkSession", query: NewQuery, scratch: Scratch, run: BatchRun) -> "DataFrame | None":
    """Everything the run wrote: the file sink's files of its batches (through the copy's sink log), or the batches
    captured."""
    if run.captured is not None:
        folder = os.path.join(run.captured, CAPTURED)
        return spark.read.parquet(folder) if os.path.exists(os.path.join(run.captured, CAPTURED_SCHEMA)) else None
    assert scratch.sink is not None
    sink = open_fs(scratch.sink)
    files = [f for b in _ran(scratch) for f in sink_batch_files(sink, b) or []]
    return read_files(spark, query.sink.format.lower(), files, query.df)


Builder = Callable[[Mapping[str, BatchRows]], NewQuery]
"""Builds one code's query, the sources of the rows given reading them (the user's reader over their location)."""


def next_batches(spark: "SparkSession", ckpt: Checkpoint, codes: tuple[Builder, Builder], baseline: str,
                 sink: FileSystem | None, path_map: Mapping[str, str], fed: tuple[NextInput, ...], timeout_s: float,
                 scratch_dir: str | None, fs_options: Mapping[str, str]) -> NextBatches:
    """The batches after the last committed one, run by the new code and by the old (``codes``: their builders),
    each on its own scratch copy of the checkpoint as it is, and their outputs compared (old against new). The file
    sources of ``fed`` read those files; a source compat cannot give input to keeps them from running."""
    last = ckpt.last_committed_batch if ckpt.last_committed_batch is not None else -1
    unfed = not_fed(ckpt, last)
    if unfed:
        return NextBatches(baseline, (), None, note="not run: " + "; ".join(
            f"source {u.source_id} ({u.kind}): {u.reason}" for u in unfed), not_run=unfed)
    batch = last + 1
    runs: list[tuple[NewQuery, Scratch, BatchRun]] = []
    roots = []
    try:
        for code in codes:
            root = tempfile.mkdtemp(prefix="wmcheck-compat-next-", dir=scratch_dir)
            roots.append(root)
            query = code({})
            scratch = scratch_copy(ckpt, batch, root, sink if query.sink.is_file else None, False, {}, path_map)
            if fed:
                query = code({given.source_id: feed(scratch.checkpoint, last, root, given, fs_options) for given in fed})
            runs.append((query, scratch, run_batch(query, scratch.checkpoint, scratch.sink, root, timeout_s,
                                                   available=True)))
        failed = [(side, r.failure) for side, (_, _, r) in zip(("new", "old"), runs) if r.failure is not None]
        if failed:
            side, failure = failed[0]
            assert failure is not None
            return NextBatches(baseline, _ran(runs[0][1]), None,
                               note=f"the {side} code failed on the next batches: {failure.error_class}")
        (new, new_copy, new_run), (_, old_copy, _) = runs
        ran, old_ran = _ran(new_copy), _ran(old_copy)
        if not ran and not old_ran:
            return NextBatches(baseline, (), None, note="no new input: a restart runs no batch")
        note = None if ran == old_ran else f"the old code ran batches {', '.join(map(str, old_ran)) or 'none'}"
        written = [_written(spark, q, s, r) for q, s, r in runs]
        if written[0] is None:
            return NextBatches(baseline, ran, None, note="the new code's batches handed nothing to the sink")
        kind = "captured" if new_run.captured is not None else "file"
        typed = kind == "captured" or new.sink.format.lower() in SELF_DESCRIBING
        return NextBatches(baseline, ran, diff_output(kind, written[1], written[0], typed=typed), note=note)
    finally:
        for root in roots:
            shutil.rmtree(root, ignore_errors=True)
