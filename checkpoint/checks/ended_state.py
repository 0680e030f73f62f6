"""Checks of state the batch that wrote it had already ended: a group whose timeout it passed, a timer it fired, a
session its eviction watermark closed."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Iterator

from wmcheck.checkpoint.logs.metadata_log import COMMIT_LOG
from wmcheck.checkpoint.watermarks.operators import CHECKPOINT, PLAN, operator_watermarks
from wmcheck.statestore.formats.content import Decoding
from wmcheck.statestore.formats.schema import StructType, event_time_field

from ..errors import CheckpointError
from ..layout import DEFAULT_STORE
from ..model import PINNED_CONFS, Operator
from ..operator_kinds import GROUP_STATE
from ..repair.requests import RewindRequest
from ..timeutil import format_ms
from .context import Context
from .definition import ERROR, Issue, check
from .loaded_state import Reader
from .state_reads import (
    APPEND,
    judged_for_output,
    load_version,
    plans,
    printed_modes,
    ran_with_recorded_watermark,
    rewind_fix,
)
from .text import plural

TIMERS = frozenset({"transformWithStateExec", "transformWithStateInPandasExec", "transformWithStateInPySparkExec"})
EVENT_TIMERS, PROCESSING_TIMERS = "$eventTimers_timestampToKey", "$procTimers_timestampToKey"
"""transformWithState's timers by time (``TimerStateUtils``), a range-scan key: the family's 2-byte id, the int32
length of the ordering part, a version byte, then an ``UnsafeRow`` whose binary field is a marker byte (2: null) and
the expiry time (ms) big-endian."""
SESSIONS = "sessionWindowStateStoreSaveExec"
TIMEOUT = "timeoutTimestamp"
READ_LIMIT = 32 << 20
STAMP_SKEW_MS = 600_000
"""Clock skew allowed between Spark's driver (a batch's ``batchTimestampMs``) and the file system (its commit's
modification time)."""


def processing_time(ctx: Context, batch: int) -> int | None:
    """The ``batchTimestampMs`` ``batch`` ran with, None where it cannot be: later than its own commit file was
    written (the batch ran before it committed) while the batch before's agrees with its commit's time (the files'
    times are believed then: a copy that reset them makes them later, not earlier). Tested: tws_ttl's last
    timestamp raised a day, the control run's output."""
    return ctx.once(_processing_time, batch)  # asked for every partition: the commits' times looked up once


def _processing_time(ctx: Context, batch: int) -> int | None:
    def after_commit(number: int) -> bool | None:
        seq, info = ctx.offsets.get(number), ctx.ckpt.fs.info(COMMIT_LOG.path(number))
        if seq is None or seq.metadata is None or info is None:
            return None
        return seq.metadata.batch_timestamp_ms > info.mtime_ms + STAMP_SKEW_MS

    meta = ctx.offsets[batch].metadata
    assert meta is not None  # ran_with_recorded_watermark
    return None if after_commit(batch) and after_commit(batch - 1) is False else meta.batch_timestamp_ms
"""The most bytes of state files this check reads (larger states are not judged)."""

Ended = Callable[[bytes], int | None]
"""``value row -> the time (ms) at which the batch ended it``, None for a row it keeps."""


def timed_out(value: StructType, threshold_ms: int) -> Ended | None:
    """A group's state (its value's last field ``timeoutTimestamp``, ms, -1 for none) timed out before
    ``threshold_ms``: Spark calls the function of every group whose timeout is below it, which removes the state or sets
    a timeout not below it, else the timeout is cleared."""
    names = [f.name for f in value.fields]
    if not names or names[-1] != TIMEOUT or value.fields[-1].data_type != "long":
        return None
    index, total = len(names) - 1, len(names)
    from wmcheck.statestore.encodings.join_rows import long_field

    def ended(row: bytes) -> int | None:
        at = long_field(row, index, total)
        return at if 0 <= at < threshold_ms else None

    return ended


def closed(value: StructType, evict_ms: int) -> Ended | None:
    """A session (its value's watermarked ``session_window.end``) at or before ``evict_ms``: evicted and emitted."""
    from wmcheck.statestore.keys.stale import event_time_reader

    column = event_time_field(value)
    event = event_time_reader(value, column.path) if column is not None else None
    if event is None:
        return None

    def ended(row: bytes) -> int | None:
        end = event(row, 0)
        return end // 1000 if end is not None and end <= evict_ms * 1000 else None

    return ended


def timer_times(rows: dict[bytes, bytes], family: int) -> list[int]:
    """The expiry times of the timers of one timer column family (keys as stored)."""
    prefix, out = family.to_bytes(2, "little"), []
    for key in rows:
        if not key.startswith(prefix) or len(key) < 23 or key[7] & 1:
            continue
        word = int.from_bytes(key[15:23], "little")
        value = key[7 + (word >> 32):7 + (word >> 32) + (word & 0xFFFFFFFF)]
        if len(value) >= 9 and value[0] != 2:
            out.append(int.from_bytes(value[1:9], "big", signed=True))
    return out


def fired_timers(ctx: Context, reader: Reader, plan, version: int, writer: int, model) -> tuple[list[int], str] | None:
    """The timers of a transformWithState partition's next load that batch ``writer`` had fired (Spark 4.3's
    ``TransformWithStateExec.processTimers``: event-time timers at or before its eviction watermark, processing-time
    ones at or before its processing time; each fired timer is deleted), and the rule; None when not read."""
    own = model.of(writer, plan.op.operator_id)
    rows = reader.state(plan.part, version, plan.ids, families=True)
    if rows is None or own is None or own.source not in (PLAN, CHECKPOINT):
        return None
    stamp = processing_time(ctx, writer)
    event = own.evict_ms
    fired = []
    for family, bound in ((EVENT_TIMERS, event), (PROCESSING_TIMERS, stamp)):
        if family in reader.families and bound:
            fired += [t for t in timer_times(rows, reader.families[family]) if t <= bound]
    what = (f"timers at or before {format_ms(event, ctx.tz)}, the eviction watermark of batch {writer}" if EVENT_TIMERS in
            reader.families else f"timers at or before {format_ms(stamp or 0, ctx.tz)}, the processing time of batch "
            f"{writer}")
    return sorted(fired), what


def rule(ctx: Context, op: Operator, writer: int, model) -> tuple[Ended, str] | None:
    """How the rows of an operator's state are judged, and what ends them."""
    own = model.of(writer, op.operator_id)
    schema = ctx.ckpt.store_schema(op.operator_id, DEFAULT_STORE)
    if own is None or own.source not in (PLAN, CHECKPOINT) or schema is None:
        return None
    if op.name == SESSIONS:
        if not own.evict_ms or printed_modes(ctx, op.operator_id) - {APPEND}:
            return None
        ended = closed(schema.value_schema, own.evict_ms)
        return None if ended is None else (ended, f"session ends at or before the eviction watermark of batch {writer}, "
                                                  f"{format_ms(own.evict_ms, ctx.tz)}")
    stamp = processing_time(ctx, writer)
    if stamp is None:
        return None
    threshold = min(own.evict_ms, stamp) if own.evict_ms else stamp
    ended = timed_out(schema.value_schema, threshold)
    return None if ended is None else (ended, f"timeouts before {format_ms(threshold, ctx.tz)}, below both the "
                                              f"eviction watermark and the processing time of batch {writer}")


def removes(ctx: Context, reader: Reader, op: Operator, version: int) -> bool:
    """Whether the operator removes state: the query writes to a file sink (append mode only) or its event log prints
    append mode, a delete or tombstone in a file of a load, or a key of a partition's version gone from the next one
    (within the two versions before ``version``); complete mode never removes."""
    if ctx.sink is not None or printed_modes(ctx, op.operator_id) == {APPEND}:
        return True
    known = ctx.once(_removals_known)
    if op.operator_id not in known:
        before = reader.removals
        found = False
        for plan in plans(ctx):
            if plan.op.operator_id != op.operator_id or plan.part.store != DEFAULT_STORE or found:
                continue
            states = [reader.state(plan.part, v, plan.ids) for v in range(version, max(version - 3, 0), -1)]
            found = reader.removals > before or any(
                new is not None and old is not None and bool(set(old) - set(new)) for new, old in zip(states, states[1:]))
        known[op.operator_id] = found
    return known[op.operator_id]


def _removals_known(ctx: Context) -> dict[int, bool]:
    """By operator id: whether :func:`removes` found it removes state (filled as it is asked)."""
    return {}


@check("WM069", ERROR, "state holding groups, timers or sessions the batch that wrote it had ended")
def ended_state_loaded(ctx: Context) -> Iterator[Issue]:
    if (ctx.conf(PINNED_CONFS["encoding_format"]) or "unsaferow").lower() != "unsaferow" or not ctx.content \
            or Decoding.of(ctx.conf).row_checksums:
        return
    version = load_version(ctx)
    writer = version - 1
    ops = {op.operator_id: op for op in ctx.operators if op.name in GROUP_STATE or op.name == SESSIONS or op.name in TIMERS}
    if writer < 0 or not ops or not ran_with_recorded_watermark(ctx, writer):
        return
    try:
        model = operator_watermarks(ctx.ckpt, ctx.progress, [writer])
    except CheckpointError:
        return  # a file that does not parse: WM001
    reader = Reader(ctx, READ_LIMIT)
    for plan in plans(ctx):
        op = ops.get(plan.op.operator_id)
        if op is None or plan.part.store != DEFAULT_STORE or not plan.load.loadable \
                or not judged_for_output(ctx, op.operator_id):
            continue
        if op.name in TIMERS:
            timers = fired_timers(ctx, reader, plan, version, writer, model)
            if timers is None or not timers[0]:
                continue
            stale, what = timers
        else:
            judged = rule(ctx, op, writer, model)
            if judged is None:
                continue
            ended, what = judged
            rows = reader.state(plan.part, version, plan.ids)
            if rows is None or (op.name == SESSIONS and not removes(ctx, reader, op, version)):
                continue  # not read; or sessions never removed (complete mode keeps them)
            stale = sorted(t for t in map(ended, rows.values()) if t is not None)
            if not stale:
                continue
        why, fix = rewind_fix(ctx, writer)
        if isinstance(fix, RewindRequest) and fix.to_batch is not None:
            target = fix.to_batch
            fix = replace(fix, keep_next_offsets=True)
            why = (f"rewinding to batch {target}, keeping offsets/{target + 1}, makes Spark load state "
                   f"version {target + 1} and run batch {target + 1} again as it was planned (its offsets "
                   f"and watermark: a batch planned anew with new input would end other groups), writing version "
                   f"{version} anew")
        kind = "session" if plan.op.name == SESSIONS else "timer" if plan.op.name in TIMERS else "group"
        yield Issue(plan.part.directory, (
            f"state version {version} of {plan.part.directory}, which the next batch loads, holds "
            f"{plural(len(stale), kind)} of operator {plan.op.operator_id} ({plan.op.name}) that batch {writer} had "
            f"already ended before it wrote that version ({what}; e.g. {format_ms(stale[0], ctx.tz)}): a file of it "
            "is not the one Spark wrote (an older version's, another partition's). Spark loads it without an error "
            f"and ends those {kind}s again in the next batch: their rows are emitted a second time, or their state "
            "continues from an old value (tested with Spark 4.3: the restart's output differs from a control run); "
            f"{why}"
        ), fix)
    if reader.over:
        ctx.notes.append(f"WM069 reads {READ_LIMIT:,} bytes of state files per check and left the rest unjudged (their "
                         "timeouts and sessions are not compared with the last batch's)")
