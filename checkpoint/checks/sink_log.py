"""Checks of the file sink's log (``_spark_metadata/``) against the checkpoint's batches, and of the compaction of the
file source and sink logs."""
from __future__ import annotations

import posixpath
from typing import Iterator

from wmcheck.checkpoint.logs.metadata_log import (
    DEFAULT_COMPACT_INTERVAL,
    FILE_SINK_LOG,
    FILE_SOURCE_LOG,
    is_compaction_batch,
    next_compaction,
)

from ..layout import COMPACT_SUFFIX, SINK_LOG
from .context import Context, Tree
from .definition import ERROR, Instruction, Issue, check
from .logs import checkpoint_format
from .remedies import NEW_CHECKPOINT, rewind_before
from .repartition import sink_entry_batches
from .text import span


def compaction_issues(tree: Tree, folder: str) -> Iterator[Issue]:
    log = tree.log(folder)
    if log.interval is None:
        return
    interval, how = log.interval
    files = log.forms
    for batch in sorted(b for b in files if b >= log.compacts[-1]):
        expect = is_compaction_batch(batch, interval)
        if expect not in files[batch]:
            wanted = f"{batch}{COMPACT_SUFFIX}" if expect else str(batch)
            found = str(batch) if expect else f"{batch}{COMPACT_SUFFIX}"
            yield Issue(tree.shown(posixpath.join(folder, found)), (
                f"with compact interval {interval} ({how}) Spark reads log batch {batch} from {wanted}, but the log holds "
                f"{found}: reading the log fails (file not found). The log was compacted with another interval or "
                f"edited by hand"
            ), Instruction(f"restore {tree.shown(folder)}/ from a backup"))
            return


@check("WM023", ERROR, "compaction files inconsistent with the interval")
def compaction(ctx: Context) -> Iterator[Issue]:
    for source in ctx.ckpt.source_dirs:
        yield from compaction_issues(ctx.tree, FILE_SOURCE_LOG.folder(source))
    if ctx.sink is not None:
        yield from compaction_issues(ctx.sink, SINK_LOG)


def sink_latest(sink: Tree) -> int | None:
    return sink.log(SINK_LOG).latest


@check("WM024", ERROR, "file sink log ahead of the last committed batch", needs_sink=True)
def sink_ahead(ctx: Context) -> Iterator[Issue]:
    ckpt, sink = ctx.ckpt, ctx.sink
    if sink is None:
        return
    latest = sink_latest(sink)
    allowed = ckpt.last_batch if ckpt.pending_batch is not None else ckpt.last_committed_batch
    if latest is not None and (allowed is None or latest > allowed):
        name = f"{latest}{COMPACT_SUFFIX}" if True in sink.log(SINK_LOG).forms[latest] else str(latest)
        done = ckpt.last_committed_batch
        yield Issue(sink.shown(sink.log(SINK_LOG).path(name)), (
            f"the file sink has committed batch {latest} but the checkpoint's last committed batch is {done}"
            f"{f' (planned: {ckpt.last_batch})' if ckpt.pending_batch is not None else ''}: on restart Spark runs "
            f"batch {span(0 if done is None else done + 1, latest)} and the sink skips it as already committed, "
            f"so whatever it produces now is lost"
        ), ctx.rewind(done) if done is not None else Instruction(
            f"remove {sink.shown(SINK_LOG)}/ (no batch of this checkpoint was committed)"))


@check("WM025", ERROR, "file sink log behind the last committed batch", needs_sink=True)
def sink_behind(ctx: Context) -> Iterator[Issue]:
    done, sink = ctx.ckpt.last_committed_batch, ctx.sink
    if sink is None:
        return
    latest = sink_latest(sink)
    lacking = set(sink_entry_batches(ctx))  # its own check (WM036): batches that wrote no output
    if latest is not None and done is not None and lacking >= set(range(latest + 1, done + 1)):
        return
    if done is not None and latest is None:
        gone = "is gone" if SINK_LOG not in sink.names("") else "is empty"
        yield Issue(sink.shown(SINK_LOG), (
            f"the checkpoint has committed batch {span(0, done)} but the file sink's log {sink.shown(SINK_LOG)}/ {gone} "
            f"while the sink holds data files (a cleanup of '_' directories, or a copy without it): on restart Spark "
            f"writes a new log from batch {done + 1} on, and readers of the sink then read only through it and fail "
            f"('.../{SINK_LOG}/{sink_restart_reads(done + 1)} doesn't exist'): the output of batch {span(0, done)} is "
            f"lost to them. Without a backup of the log, a new checkpoint and an empty output directory reprocess the "
            f"input (with other batch boundaries)"
        ), Instruction(f"restore {sink.shown(SINK_LOG)}/ from a backup before restarting the query"))
    elif done is not None and latest is not None and latest < done:
        first = latest + 1
        yield Issue(sink.shown(SINK_LOG), (
            f"the checkpoint has committed batch {span(first, done)} but the file sink's log "
            + f"ends at batch {latest}: the output of these batches is missing from the sink (a rewound or replaced "
            + "sink, or another output path), and Spark will not write it again"
        ), ctx.rewind(latest))


def sink_restart_reads(batch: int) -> str:
    """The first file readers of a sink whose log restarts at ``batch`` look for and miss: the compact file of the
    latest compaction batch at or below it (default interval), else log batch 0."""
    compaction = next((b for b in range(batch, -1, -1) if is_compaction_batch(b, DEFAULT_COMPACT_INTERVAL)), None)
    return f"{compaction}{COMPACT_SUFFIX}" if compaction is not None else "0"


@check("WM031", ERROR, "gap in the file sink log after its last compact file", needs_sink=True)
def sink_log_gap(ctx: Context) -> Iterator[Issue]:
    sink = ctx.sink
    assert sink is not None
    log = sink.log(SINK_LOG)
    files = log.files
    if not files:
        return
    start = log.compacts[-1] + 1 if log.compacts else 0  # CompactibleFileStreamLog.allFiles reads from there
    gone = [b for b in range(start, max(files)) if b not in files]
    if not gone:
        return
    fails_at = next_compaction(max(files), (log.interval or (DEFAULT_COMPACT_INTERVAL, ""))[0])
    fix = rewind_before(ctx, gone[0])
    yield Issue(sink.shown(FILE_SINK_LOG.path(gone[0])), (
        f"the file sink's log has no batch {span(gone[0], gone[-1]) if len(gone) == gone[-1] - gone[0] + 1 else gone[0]} "
        f"although it holds batches up to {max(files)}: Spark's readers of the sink fail now (FileNotFoundException: "
        f".../{SINK_LOG}/{gone[0]} doesn't exist), and the query fails at batch {fails_at}, its next compaction "
        f"('[BATCH_METADATA_NOT_FOUND] Unable to find batch .../{SINK_LOG}/{gone[0]}'); "
        + ("after a rewind to the batch before the gap Spark writes those batches again" if fix != NEW_CHECKPOINT else
           "no committed batch comes before it, so only a backup of the log brings it back")
    ), fix if fix != NEW_CHECKPOINT else Instruction(
        f"restore {sink.shown(FILE_SINK_LOG.path(gone[0]))} from a backup; without one, start the query from a new "
        "checkpoint and an empty output directory"))


@check("WM066", ERROR, "checkpoint format 2: the batch Spark re-runs is already in the file sink", needs_sink=True)
def rerun_already_in_sink(ctx: Context) -> Iterator[Issue]:
    pending, sink = ctx.ckpt.pending_batch, ctx.sink
    if pending is None or sink is None or sink_latest(sink) != pending or not ctx.ckpt.state_layout.operators \
            or checkpoint_format(ctx)[0] != 2:
        return
    yield Issue(sink.shown(sink.log(SINK_LOG).files[pending]), (
        f"batch {pending} is planned but not committed, and the file sink has already committed it (a stop between the "
        f"sink's commit and commits/{pending}). On restart Spark re-runs batch {pending}, its file sink skips a batch it "
        "already has without running it, so no state store reports the state it wrote, and with checkpoint format 2 "
        "Spark fails before it commits the batch (tested with Spark 4.3: 'assertion failed: CheckpointInfo length: 0'); "
        f"a rewind to before batch {pending}, with the sink, makes Spark write the batch again"
    ), rewind_before(ctx, pending))
