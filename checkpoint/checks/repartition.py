"""Checks of Spark's offline state repartition (Spark 4.2+): an attempt that did not finish, and a file sink
whose log lacks the repartition batch."""
from __future__ import annotations

from collections.abc import Iterator

from wmcheck.checkpoint.logs.metadata_log import DEFAULT_COMPACT_INTERVAL, FILE_SINK_LOG, OFFSET_LOG, next_compaction

from ..layout import SINK_LOG
from ..repartitions import (
    PROVIDER,
    ROCKSDB_PROVIDER,
    UNFINISHED_RESTART_ERROR,
    Repartition,
    find_repartitions,
    partitions_in,
)
from .context import Context
from .definition import ERROR, Issue, check


def moves(ctx: Context) -> tuple[Repartition, ...]:
    """The repartition batches among the offsets files that parsed."""
    return ctx.once(_moves)


def _moves(ctx: Context) -> tuple[Repartition, ...]:
    plans = {b: (partitions_in(ctx.confs[b]), [s.raw for s in seq.sources]) for b, seq in ctx.offsets.items()}
    return find_repartitions(plans, ctx.commits, ctx.ckpt.state_layout)


def repartition_batches(ctx: Context) -> set[int]:
    return {r.batch for r in moves(ctx)}


@check("WM035", ERROR, "unfinished repartition")
def unfinished_repartition(ctx: Context) -> Iterator[Issue]:
    last = ctx.ckpt.last_batch
    stuck = next((r for r in moves(ctx) if not r.committed and r.batch == last), None)
    if stuck is None:
        return
    done = stuck.batch - 1
    yield Issue(OFFSET_LOG.path(stuck.batch), (
        f"batch {stuck.batch} is a repartition of the state from {stuck.from_partitions} to {stuck.to_partitions} "
        f"partitions (the offsets of batch {done} with another spark.sql.shuffle.partitions) that was never committed: "
        f"Spark's offline repartition failed or was killed half way. Restarting the query fails: "
        f"{UNFINISHED_RESTART_ERROR.format(batch=stuck.batch, done=done)} A rewind to batch {done} removes everything "
        f"the attempt wrote (offsets/{stuck.batch} and any state it wrote; undoable); then restart the query" + (
            f" or repartition again (wmcheck repartition CKPT --partitions {stuck.to_partitions})"
            if ctx.conf(PROVIDER) == ROCKSDB_PROVIDER else
            f" (Spark repartitions only RocksDB state: {ctx.conf(PROVIDER) or 'the HDFS-backed provider'} is not supported)")
    ), ctx.rewind(done))


@check("WM036", ERROR, "file sink log lacks a repartition batch", needs_sink=True)
def sink_lacks_repartition(ctx: Context) -> Iterator[Issue]:
    assert ctx.sink is not None
    log = ctx.sink.log(SINK_LOG)
    if not log.files:
        return
    for move in moves(ctx):
        if not move.committed or log.covered(move.batch):
            continue
        interval, how = log.interval or (DEFAULT_COMPACT_INTERVAL, f"Spark's default {FILE_SINK_LOG.interval_conf}")
        fails = next_compaction(move.batch, interval)
        from ..repair.repartition import RepartitionRequest  # the repair's module: imported only for a finding

        yield Issue(ctx.sink.shown(FILE_SINK_LOG.path(move.batch)), (
            f"batch {move.batch} repartitioned the state ({move.from_partitions} -> {move.to_partitions} partitions) "
            f"and wrote no file sink log entry: the query restarts, but the sink log's compaction at batch {fails} "
            f"(compact interval {interval}, {how}) needs every batch since the last compact file and fails "
            f"([BATCH_METADATA_NOT_FOUND] Unable to find batch {SINK_LOG}/{move.batch}); completing the repartition "
            f"writes the empty entry {SINK_LOG}/{move.batch} (undoable)"
        ), RepartitionRequest(file_sink=ctx.sink_location))


def sink_entry_batches(ctx: Context) -> list[int]:
    """Committed repartition batches the file sink log lacks (reported by WM036, not as WM025)."""
    if ctx.sink is None:
        return []
    log = ctx.sink.log(SINK_LOG)
    return [r.batch for r in moves(ctx) if r.committed and not log.covered(r.batch)]

