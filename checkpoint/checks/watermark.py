"""Checks of the watermark across batches."""
from __future__ import annotations

from typing import Iterator, Mapping

from wmcheck.checkpoint.logs.metadata_log import COMMIT_LOG, OFFSET_LOG
from wmcheck.statestore.formats.schema import event_time_field

from ..errors import CheckpointError
from ..layout import COMMITS
from ..model import WATERMARK_POLICY
from ..operator_kinds import is_transform_with_state
from ..repair.requests import SetWatermarkRequest
from ..repair_records import APPLIED, list_heads, manifest_json
from ..timeutil import format_duration, format_ms
from .context import Context
from .definition import ERROR, WARNING, Instruction, Issue, check
from .operators import TIMER_OPERATORS, delay_ms
from .remedies import rewind_before
from .repartition import repartition_batches
from .sources import late_rows_dropped
from .text import listed

FUTURE_TOLERANCE_MS = 86_400_000
STUCK_AFTER_BATCHES = 10


def watermarks(ctx: Context) -> list[tuple[int, int, int]]:
    """(batch, batchWatermarkMs, batchTimestampMs) of every parsed offsets file with metadata."""
    return ctx.once(_watermarks)


def _watermarks(ctx: Context) -> list[tuple[int, int, int]]:
    return [(b, s.metadata.batch_watermark_ms, s.metadata.batch_timestamp_ms)
            for b, s in ctx.offsets.items() if s.metadata is not None]


def next_watermark(ctx: Context) -> int | None:
    """The watermark the next batch starts from, as Spark computes it on restart (None when its files do not parse)."""
    last = ctx.ckpt.last_batch
    seq = ctx.offsets.get(last) if last is not None else None
    if seq is None or seq.metadata is None:
        return None
    commit = ctx.commits.get(last) if last is not None else None
    return max(seq.metadata.batch_watermark_ms, (commit.next_batch_watermark_ms or 0) if commit else 0)


def set_by_wmcheck(ctx: Context) -> dict[tuple[int, int], str]:
    """``(batch, watermark) -> backup id`` of each watermark an applied wmcheck set-watermark set (its repair record's
    ``after``); an unreadable record counts for none (WM026 reports it)."""
    out = {}
    try:
        for head in list_heads(ctx.ckpt.fs):
            got = manifest_json(ctx.ckpt.fs, head.backup_id) if head.command == "set-watermark" and head.status == APPLIED else None
            after = got[1].get("after") if got else None
            if isinstance(after, dict) and isinstance(after.get("last_batch"), int) and isinstance(after.get("watermark_ms"), int):
                out[(after["last_batch"], after["watermark_ms"])] = head.backup_id
    except CheckpointError:
        return {}
    return out


@check("WM011", WARNING, "watermark decreases between batches")
def decreasing(ctx: Context) -> Iterator[Issue]:
    rows = watermarks(ctx)
    upcoming = next_watermark(ctx)
    planned = set_by_wmcheck(ctx) if any(w2 < w1 for (_, w1, _), (_, w2, _) in zip(rows, rows[1:])) else {}
    for (b1, w1, _), (b2, w2, _) in zip(rows, rows[1:]):
        if w2 < w1 and (b2, w2) in planned:
            ctx.notes.append(f"{OFFSET_LOG.path(b2)}: the watermark {w2} ({format_ms(w2, ctx.tz)}), below batch {b1}'s, "
                             f"was set by wmcheck set-watermark (backup {planned[(b2, w2)]}): an intended change, not "
                             "WM011 (wmcheck undo puts the old one back)")
        elif w2 < w1:  # the highest watermark Spark had reached: batch b1's, or what batch b1 (or one before) computed
            peak = max([w1, *(c.next_batch_watermark_ms or 0 for b, c in ctx.commits.items() if b < b2)])
            held = upcoming is not None and upcoming < peak
            yield Issue(OFFSET_LOG.path(b2), (
                f"batchWatermarkMs {w2} ({format_ms(w2, ctx.tz)}) is below batch {b1}'s {w1} ({format_ms(w1, ctx.tz)}): "
                f"Spark never lowers the watermark; a lower one re-opens windows that were already emitted and evicted "
                f"(duplicate or partial output in append mode). "
                + (f"The next batch starts from {upcoming} ({format_ms(upcoming, ctx.tz)}), below the {peak} Spark "
                   f"had reached: setting it back raises it" if held and upcoming is not None else
                   "The watermark the next batch starts from is back where Spark had it")
            ), SetWatermarkRequest(watermark=peak, allow_raise=True) if held else Instruction(
                "nothing to change for a restart; if the watermark was lowered on purpose by hand, ignore WM011"))


@check("WM012", WARNING, "commit watermark differs from the next batch's")
def commit_vs_next(ctx: Context) -> Iterator[Issue]:
    last = ctx.ckpt.last_batch
    moved = repartition_batches(ctx)  # Spark's repartition batch copies offsets/L, not the watermark commits/L set
    for batch, entry in ctx.commits.items():
        nxt = ctx.offsets.get(batch + 1)
        if entry.next_batch_watermark_ms is None or nxt is None or nxt.metadata is None or batch + 1 == last \
                or batch + 1 in moved:
            continue  # the last batch is what wmcheck set-watermark rewrites (offsets/L with commits/L)
        planned = nxt.metadata.batch_watermark_ms
        if entry.next_batch_watermark_ms != planned:
            yield Issue(COMMIT_LOG.path(batch), (
                f"nextBatchWatermarkMs {entry.next_batch_watermark_ms} differs from offsets/{batch + 1} batchWatermarkMs "
                f"{planned}: Spark writes both from the same value, so one of them was edited. A restart reads only "
                f"the last batch's pair, but after a rewind to batch {batch} Spark restarts from the larger of the two"
            ), Instruction(f"restore commits/{batch} and offsets/{batch + 1} from a backup before rewinding to batch "
                           f"{batch}; nothing to change for a restart"))


@check("WM013", ERROR, "watermark far ahead of the batch's processing time")
def future_watermark(ctx: Context) -> Iterator[Issue]:
    if not late_rows_dropped(ctx) and not emits_on_eviction(ctx):
        return  # no operator drops or evicts by it (tested: a processing-time transformWithState, the control run's output)
    rows = [(OFFSET_LOG.path(b), b, w, t) for b, w, t in watermarks(ctx)]
    stamps = {b: t for b, _, t in watermarks(ctx)}
    rows += [(COMMIT_LOG.path(b), b, c.next_batch_watermark_ms, stamps[b]) for b, c in ctx.commits.items()
             if c.next_batch_watermark_ms is not None and b in stamps]  # the watermark a rewind to batch b keeps
    rows.sort(key=lambda r: (r[1], r[0].startswith(COMMITS)))
    ahead = [r for r in rows if r[3] > 0 and r[2] - r[3] > FUTURE_TOLERANCE_MS]
    if ahead:
        path, batch, wm, ts = ahead[0]
        others = f" (also {listed([r[0] for r in ahead[1:]])})" if len(ahead) > 1 else ""
        yield Issue(path, (
            f"watermark {wm} ({format_ms(wm, ctx.tz)}) is {format_duration(wm - ts)} after the batch's processing time "
            f"{format_ms(ts, ctx.tz)}{others}: a unit error (epoch milliseconds cast to timestamp are read as seconds; "
            f"microseconds as milliseconds) or a wrong clock. Every row older than the watermark is dropped as late and "
            f"state is evicted at once. Correct the event-time column before the restart; a rewind to before batch "
            f"{batch} drops the watermark"
        ), rewind_before(ctx, batch))


def has_event_time_column(ctx: Context) -> bool:
    """Whether any state schema carries a column the watermark evicts by."""
    return any(
        event_time_field(cf.key_schema) or event_time_field(cf.value_schema)
        for schema in ctx.schemas.values() for cf in schema.column_families
    )


@check("WM014", WARNING, "watermark stuck at 0")
def stuck_watermark(ctx: Context) -> Iterator[Issue]:
    rows = list(ctx.offsets.items())
    if not rows or any(w for _, w, _ in watermarks(ctx)) or any(c.next_batch_watermark_ms for c in ctx.commits.values()):
        return
    with_data = sum(1 for (_, a), (_, b) in zip(rows, rows[1:]) if [s.raw for s in a.sources] != [s.raw for s in b.sources])
    with_data += rows[0][0] == 0  # the first batch of a query always has input
    if with_data >= STUCK_AFTER_BATCHES and has_event_time_column(ctx):
        policy = ctx.conf(WATERMARK_POLICY) or "min"
        yield Issue(OFFSET_LOG.path(rows[-1][0]), (
            f"the watermark is still 0 after {with_data} batches with new input although the state has an event-time "
            f"column: under the {policy} policy ({WATERMARK_POLICY}) a watermarked input that never receives data holds "
            f"the watermark at 0, so state is never evicted and append-mode output is never emitted"
        ), Instruction("send data (or heartbeat rows) to every input, or check the event-time column for nulls"))


def last_watermarks(ctx: Context) -> tuple[int, int, int, int] | None:
    """``(last batch, its batchTimestampMs, the watermark it ran with, the one its commit passes on)``, None where
    its offsets file or commit is missing or has none."""
    last = ctx.ckpt.last_batch
    seq = ctx.offsets.get(last) if last is not None else None
    commit = ctx.commits.get(last) if last is not None else None
    if last is None or seq is None or seq.metadata is None or commit is None or commit.next_batch_watermark_ms is None:
        return None
    return last, seq.metadata.batch_timestamp_ms, seq.metadata.batch_watermark_ms, commit.next_batch_watermark_ms


def batch_read_input(ctx: Context, batch: int) -> bool:
    """Whether ``batch`` read new input: its offsets end any source elsewhere than the batch before's (the first batch
    of a query always does)."""
    seq, before = ctx.offsets.get(batch), ctx.offsets.get(batch - 1)
    return seq is None or before is None or [s.raw for s in seq.sources] != [s.raw for s in before.sources]


def emits_on_eviction(ctx: Context) -> bool:
    """Whether an operator emits what the watermark evicts: an aggregation or session window (append output), a
    (flat)MapGroupsWithState's event-time timeouts, an event-time transformWithState's timers. (A deduplication or a
    join only forgets: a later watermark changes their output only through rows that arrive later.)"""
    for op in ctx.operators:
        if op.name in ("stateStoreSave", "sessionWindowStateStoreSaveExec", "StatefulStreamlineAggregate", *TIMER_OPERATORS):
            return True
        props = getattr(op.metadata, "properties", None)
        if is_transform_with_state(op.name) and isinstance(props, Mapping) and props.get("timeMode") == "EventTime":
            return True
    return False


@check("WM065", ERROR, "the last batch's watermark is above the one its commit passes on")
def raised_last_watermark(ctx: Context) -> Iterator[Issue]:
    found = last_watermarks(ctx)
    if found is None:
        return
    last, _, planned, passed = found
    if planned <= passed or not late_rows_dropped(ctx):
        return  # as Spark writes them; or no operator drops rows or evicts state by the watermark
    earlier = ctx.commits.get(last - 1)
    previous = earlier.next_batch_watermark_ms if earlier is not None else None
    if previous is not None and planned <= previous:  # offsets/L as Spark planned it: commits/L was lowered
        if not batch_read_input(ctx, last):
            return  # a batch without input passes on its own watermark, the one the next batch takes (the larger)
        yield Issue(COMMIT_LOG.path(last), (
            f"nextBatchWatermarkMs {passed} ({format_ms(passed, ctx.tz)}) is {format_duration(planned - passed)} below "
            f"the watermark batch {last} ran with ({format_ms(planned, ctx.tz)}): Spark computes the next watermark from "
            f"that one and the event times the batch read, never lower, so commits/{last} was edited. Batch {last} read "
            f"new input and may have moved the watermark: the next batch evicts state and emits by "
            f"{format_ms(planned, ctx.tz)} only, later than Spark would have (tested with Spark 4.3: other output than "
            "the control run's)"
        ), Instruction(f"restore commits/{last} from a backup before restarting (a rewind makes Spark run batch "
                       f"{last} again, with the input that has arrived since in other batches than the ones it ran)"))
        return
    newest = passed + (delay_ms(ctx) or 0)  # the newest event time the query has seen, by the watermark passed on
    if planned <= newest:
        return  # only rows older than the newest seen are dropped (tested: raised a second, the control run's output)
    yield Issue(OFFSET_LOG.path(last), (
        f"batchWatermarkMs {planned} ({format_ms(planned, ctx.tz)}) is {format_duration(planned - passed)} above the "
        f"nextBatchWatermarkMs {passed} ({format_ms(passed, ctx.tz)}) of commits/{last}, and above every event time "
        f"the query has seen ({format_ms(newest, ctx.tz)}, that watermark plus the query's delay): Spark computes the "
        f"next watermark from this batch's and never lowers it, and wmcheck set-watermark writes both, so offsets/{last} "
        f"was edited. The next batch drops rows older than {format_ms(planned, ctx.tz)} as late, new ones too, and "
        "evicts state by it (tested with Spark 4.3: raised by an hour, the new rows are dropped); a rewind to before "
        f"batch {last} makes Spark plan it again with the watermark batch {last - 1} passed on"
    ), rewind_before(ctx, last))


@check("WM079", ERROR, "the last commit passes on a watermark its batch without input cannot have reached")
def raised_last_commit_watermark(ctx: Context) -> Iterator[Issue]:
    found = last_watermarks(ctx)
    if found is None or batch_read_input(ctx, found[0]) or not emits_on_eviction(ctx):
        return
    last, stamp, planned, passed = found
    before = ctx.offsets.get(last - 1)
    if before is not None and before.metadata is not None and before.metadata.batch_timestamp_ms == stamp:
        return  # offsets/L is a copy of the one before (WM077): the batch read input the copy does not show
    earlier = ctx.commits.get(last - 1)
    if earlier is not None and earlier.next_batch_watermark_ms is not None:
        planned = max(planned, earlier.next_batch_watermark_ms)  # the batch ran with at least that (offsets/L lowered)
    newest = planned + (delay_ms(ctx) or 0)  # the newest event time the query has seen, by the batch's watermark
    if passed <= newest:
        return  # below every event time seen: what it evicts early no later row would have changed (tested: a second)
    yield Issue(COMMIT_LOG.path(last), (
        f"nextBatchWatermarkMs {passed} ({format_ms(passed, ctx.tz)}) is {format_duration(passed - planned)} above the "
        f"watermark batch {last} ran with ({format_ms(planned, ctx.tz)}), although the batch read no input: the "
        "watermark moves only with the event times of new rows, so commits/"
        f"{last} was edited, beyond every event time the query has seen ({format_ms(newest, ctx.tz)}). The next batch "
        "evicts state by it: windows, sessions and timeouts are emitted before the rows that belong to them arrive, "
        "and those rows are then dropped as late (tested with Spark 4.3: raised by an hour, other output than the "
        f"control run's); a rewind to before batch {last} makes Spark run it again and pass on its own watermark"
    ), rewind_before(ctx, last))


@check("WM077", ERROR, "the last offsets file is a copy of the one before, short of the input its batch read")
def copied_last_offsets(ctx: Context) -> Iterator[Issue]:
    last = ctx.ckpt.last_batch
    if last is None or last < 1:
        return
    seq, before = ctx.offsets.get(last), ctx.offsets.get(last - 1)
    commit, previous = ctx.commits.get(last), ctx.commits.get(last - 1)
    if seq is None or before is None or seq.metadata is None or before.metadata is None or commit is None \
            or previous is None or commit.next_batch_watermark_ms is None or previous.next_batch_watermark_ms is None:
        return
    stamp = seq.metadata.batch_timestamp_ms
    if stamp != before.metadata.batch_timestamp_ms or seq.sources != before.sources \
            or commit.next_batch_watermark_ms <= previous.next_batch_watermark_ms:
        return
    yield Issue(OFFSET_LOG.path(last), (
        f"offsets/{last} has the batchTimestampMs ({stamp}) and the source offsets of offsets/{last - 1}: Spark stamps "
        f"every batch with its own clock reading, so it is a copy of that file, while commits/{last} passes on a later "
        f"watermark ({format_ms(commit.next_batch_watermark_ms, ctx.tz)}) than commits/{last - 1} "
        f"({format_ms(previous.next_batch_watermark_ms, ctx.tz)}): batch {last} read new rows, up to offsets the copy "
        f"does not reach. On restart Spark takes the copy as the end of batch {last} and reads that input again in the "
        f"next batch (tested with Spark 4.3: rows counted twice)"
    ), Instruction(f"restore offsets/{last} from a backup before restarting (a rewind to before batch {last} would plan "
                   "it again with the input that has arrived since, in batches other than the ones Spark ran)"))
