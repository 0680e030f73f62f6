"""Each stateful operator's own watermark (Spark 3.5+): an operator that can never evict, or evicts far behind."""
from __future__ import annotations

from typing import Iterator

from wmcheck.checkpoint.watermarks.operators import JOIN, NONE, OperatorLink, operator_watermarks
from wmcheck.statestore.formats.schema import event_time_field

from ..errors import CheckpointError, arg
from ..layout import STATE
from ..operator_kinds import is_transform_with_state
from ..timeutil import format_duration, format_ms
from .context import Context
from .definition import WARNING, Instruction, Issue, check

TIMER_OPERATORS = ("flatMapGroupsWithState", "applyInPandasWithState")


def _by_watermark(ctx: Context, operator_id: int) -> bool:
    """Whether the operator evicts (or fires timers, times keys out) by its watermark: an event-time column in its
    state, or transformWithState / (flat)MapGroupsWithState, whose timers and timeouts follow the watermark."""
    op = next(o for o in ctx.operators if o.operator_id == operator_id)
    if is_transform_with_state(op.name) or op.name in TIMER_OPERATORS:
        return True
    for store in op.stores:
        schema = ctx.ckpt.store_schema(operator_id, store)
        if schema is not None and (event_time_field(schema.key_schema) or event_time_field(schema.value_schema)):
            return True
    return False


def delay_ms(ctx: Context) -> int | None:
    """The query's longest withWatermark delay, as its state schemas record it (``spark.watermarkDelayMs``)."""
    delays = []
    for op in ctx.operators:
        for store in op.stores:
            schema = ctx.ckpt.store_schema(op.operator_id, store)
            for part in (schema.key_schema, schema.value_schema) if schema is not None else ():
                found = event_time_field(part)
                if found is not None:
                    delays.append(found.delay_ms)
    return max(delays) if delays else None


@check("WM042", WARNING, "stateful operator never evicts, or evicts far behind the global watermark")
def operator_watermark(ctx: Context) -> Iterator[Issue]:
    if len(ctx.operators) < 2 or ctx.ckpt.last_batch is None:
        return
    try:
        model = operator_watermarks(ctx.ckpt, ctx.progress, [ctx.ckpt.next_batch])
    except CheckpointError:
        return  # a file that does not parse is reported as WM001
    batch = model.batch(ctx.ckpt.next_batch)
    if batch is None or batch.watermark_ms <= 0:
        return  # nothing is evicted before the global watermark moves (WM014 says when it is stuck at 0)
    threshold = ctx.operator_lag_ms if ctx.operator_lag_ms is not None else delay_ms(ctx)
    shown = format_ms(batch.watermark_ms, ctx.tz)
    stranded: dict[int, list[tuple[OperatorLink, bool]]] = {}
    for own in batch.operators:
        link = model.link(own.operator_id)
        assert link is not None
        upstream = model.upstream(own.operator_id)
        blocked = next((u for u in upstream if u.output == NONE), None)
        if blocked is not None and not own.evict_ms and _by_watermark(ctx, own.operator_id):
            stranded.setdefault(blocked.operator_id, []).append((link, own.evict_ms == 0))
            continue
        lag = batch.watermark_ms - own.evict_ms if own.evict_ms is not None else None
        if lag is None or threshold is None or lag <= threshold:
            continue
        joins = [u for u in upstream if u.output == JOIN]
        cause = (f"the time-range condition of {', '.join(j.label for j in joins)} upstream holds its output watermark back"
                 if joins else "an operator upstream holds its output watermark back")
        yield Issue(f"{STATE}/{own.operator_id}", (
            f"{link.label} evicts by its own watermark {format_ms(own.evict_ms, ctx.tz)}, {format_duration(lag)} behind "
            f"the global watermark {shown} (more than {format_duration(threshold)}): {cause} (Spark 3.5+ gives each "
            f"stateful operator its own watermark), so its state is evicted and, in append mode, its output emitted "
            f"that much later than the global watermark suggests; {arg('operator_lag')} sets when this warns"
        ), Instruction("Spark's rule, not a fault: narrow the join's time range to emit sooner"))
    for blocked_id, after in stranded.items():
        blocked = model.link(blocked_id)
        assert blocked is not None
        sure = all(known for _, known in after)
        names = ", ".join(link.label for link, _ in after)
        yield Issue(f"{STATE}/{blocked_id}", (
            f"{blocked.label} passes no watermark on (Spark 3.5+ gives each stateful operator its own, and "
            f"(flat)MapGroupsWithState's function may emit any event time), so {names} after it "
            + ("run with watermark 0" if sure else "run with watermark 0 unless the query calls withWatermark again "
               f"after it (the checkpoint does not record the plan: pass {arg('progress', 'EVENTLOG')} to know)")
            + f" while the global watermark is {shown}: they never evict, their state grows with every key, their "
              "timers and timeouts never fire and in append mode they never emit"
        ), Instruction(f"call withWatermark again on the event-time column {blocked.label} emits, or put those "
                       "operators before it (the query changes)"))
