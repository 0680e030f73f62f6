"""Each stateful operator's own watermarks, batch by batch, as Spark 3.5+ propagates them.

Since Spark 3.5 (``spark.sql.streaming.statefulOperator.allowMultiple``, default true, not pinned in the
checkpoint) every stateful operator drops late rows by its *late-events* watermark and evicts state by its
*eviction* watermark. ``PropagateWatermarkSimulator`` walks the physical plan children first: a watermark node
(``withWatermark``) outputs the global watermark, any other node the minimum of its inputs, and a stateful
operator takes the minimum of its inputs and outputs ``produceOutputWatermark`` of it: the same value for
aggregations, deduplications and event-time transformWithState, nothing for (flat)MapGroupsWithState,
applyInPandasWithState and processing-time transformWithState, and for a stream-stream join the minimum of
its two state watermarks (the time-range condition solved for the watermark) and its input. An operator that
receives nothing gets 0, and so does every operator while the global watermark is 0. Batch N evicts with the
propagation of ``offsets/N``'s watermark and drops late rows by that of ``offsets/N-1``'s (0 for batch 0).
With ``allowMultiple=false`` (``UseSingleWatermarkPropagator``) every operator uses ``offsets/N``'s for both.

Where each value comes from (``source``): ``plan``, printed in that batch's plan in Spark's event log;
``checkpoint``, the global watermark of ``offsets/`` as the operators upstream pass it on (0 below an operator
that passes none); ``join condition``, the global watermark moved by the offset a join's condition gives its
output, read from the join's printed state cleanup in the event log; ``unknown`` with the reason.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Mapping

from wmcheck.checkpoint.errors import arg
from wmcheck.checkpoint.operator_kinds import is_join, is_transform_with_state
from wmcheck.checkpoint.records import dataclass
from wmcheck.checkpoint.watermarks.plans import JOIN, NONE, PASSES, BatchPlan, PlanNode, PlanOperator

if TYPE_CHECKING:
    from wmcheck.checkpoint.model import Checkpoint
    from wmcheck.checkpoint.watermarks.progress import QueryProgress

PLAN, CHECKPOINT, JOIN_CONDITION, UNKNOWN = "plan", "checkpoint", "join condition", "unknown"
NO_OUTPUT_NAMES = ("flatMapGroupsWithState", "applyInPandasWithState")
PASS_EVENT_LOG = f"pass Spark's event log of the query ({arg('progress', 'EVENTLOG')})"


@dataclass(frozen=True)
class OperatorLink:
    """A stateful operator in the plan: what it is, which operators feed it, what it passes on."""

    operator_id: int
    name: str | None
    """The operator's name in the checkpoint (``stateStoreSave``, ``symmetricHashJoin`` ...)."""
    node: str | None
    """Its exec node in the plan (``StateStoreSave`` ...), when an event log gave the plan."""
    upstream: tuple[int, ...]
    """The stateful operators whose output reaches it without another stateful operator in between."""
    watermark_from: tuple[int, ...]
    """Those of ``upstream`` whose output watermark reaches it (not through a withWatermark, which gives the global one)."""
    output: str
    """What it passes downstream: ``input`` (its input watermark), ``none`` or ``join``."""
    join_offset_ms: int | None = None
    """For a join whose plan shows its state cleanup: its output watermark minus its input watermark (<= 0)."""
    join_sides: Mapping[str, int] | None = None
    """For such a join: per side (``left``/``right``), its state watermark minus its eviction watermark (the side's
    rows at or before it are removed; 0 for a key predicate)."""

    @property
    def label(self) -> str:
        """``stateStoreSave (operator 0)``: its name and id."""
        return f"{self.name or self.node or 'operator'} (operator {self.operator_id})"


@dataclass(frozen=True)
class OperatorWatermark:
    """One operator's watermarks in one batch."""

    operator_id: int
    late_ms: int | None
    """Rows at or before it (event time, or window end) are dropped as late; None when unknown."""
    evict_ms: int | None
    """State at or before it is evicted (windows emitted in append mode); None when unknown."""
    source: str
    note: str
    """Where the values come from, or why they are unknown."""
    drops_late_input: bool | None = True
    """Whether the operator drops late input at all (a group-state operator without an event-time timeout drops none;
    None: only the plan tells), as replay counts it (``late_filters``)."""

    @property
    def known(self) -> bool:
        return self.late_ms is not None and self.evict_ms is not None


@dataclass(frozen=True)
class BatchWatermarks:
    """The operators' watermarks in one batch, beside the global ones it ran with."""

    batch: int
    watermark_ms: int
    """The global watermark of the batch (``offsets/N``; for the next batch, the one a restart uses)."""
    previous_ms: int | None
    """The previous batch's global watermark (0 for batch 0; None when ``offsets/N-1`` was purged)."""
    planned: bool
    """The event log holds this batch's plan."""
    operators: tuple[OperatorWatermark, ...]

    def of(self, operator_id: int) -> OperatorWatermark | None:
        return next((o for o in self.operators if o.operator_id == operator_id), None)


@dataclass(frozen=True)
class OperatorWatermarks:
    """Every operator's watermarks in the chosen batches."""

    allow_multiple: bool
    allow_multiple_from: str
    topology_from: str
    """Where the operators' order comes from: a batch's plan, or the checkpoint taken as one chain."""
    operators: tuple[OperatorLink, ...]
    batches: tuple[BatchWatermarks, ...]
    root: PlanNode
    """The plan's shape the values were propagated through."""

    def batch(self, batch: int) -> BatchWatermarks | None:
        return next((b for b in self.batches if b.batch == batch), None)

    def of(self, batch: int, operator_id: int) -> OperatorWatermark | None:
        found = self.batch(batch)
        return found.of(operator_id) if found else None

    def link(self, operator_id: int) -> OperatorLink | None:
        return next((o for o in self.operators if o.operator_id == operator_id), None)

    def upstream(self, operator_id: int, rows: bool = False) -> tuple[OperatorLink, ...]:
        """Every operator whose output watermark reaches ``operator_id`` (not through a withWatermark), nearest first;
        with ``rows``, every operator whose output rows reach it (through a withWatermark too)."""
        return tuple(_upstream_of({o.operator_id: o for o in self.operators}, operator_id, rows))

    def evicting(self, watermark_ms: int) -> tuple[OperatorWatermark, ...]:
        """Each operator's eviction watermark if the global watermark were ``watermark_ms`` (a what-if); ``late_ms``
        is left None."""
        ctx = _Context(self.root, {o.operator_id: o for o in self.operators},
                       {o.operator_id: o.join_offset_ms for o in self.operators if o.join_offset_ms is not None},
                       self.topology_from, not self.topology_from.startswith("the checkpoint"), self.allow_multiple)
        if not self.allow_multiple:
            return tuple(OperatorWatermark(o.operator_id, None, watermark_ms, CHECKPOINT, "allowMultiple=false: the "
                                           "global watermark") for o in self.operators)
        inputs = _inputs(self.root, watermark_ms, ctx.offsets)
        out = []
        for link in self.operators:
            own = _derived(ctx, link.operator_id, 0, _operator_value(inputs.get(link.operator_id, _NONE), watermark_ms),
                           watermark_ms, False)
            out.append(OperatorWatermark(link.operator_id, None, own.evict_ms, own.source, own.note))
        return tuple(out)


# -- the plan's shape -------------------------------------------------------------------------


def _checkpoint_output(ckpt: "Checkpoint", operator_id: int) -> str:
    op = next(o for o in ckpt.operators if o.operator_id == operator_id)
    if is_join(op.name, op.stores):
        return JOIN
    if op.name in NO_OUTPUT_NAMES:
        return NONE
    if is_transform_with_state(op.name):
        props = getattr(op.metadata, "properties", None)
        mode = props.get("timeMode") if isinstance(props, Mapping) else None
        return NONE if mode == "ProcessingTime" else PASSES
    return PASSES


def _chain(ckpt: "Checkpoint") -> PlanNode:
    """The operators as one chain fed by one watermark node (operator 0 last, as Spark numbers them from the sink)."""
    node = PlanNode("watermark")
    for op in sorted(ckpt.operators, key=lambda o: -o.operator_id):
        node = PlanNode("operator", (node,), PlanOperator(op.operator_id, "", None, None, _checkpoint_output(ckpt, op.operator_id)))
    return node


def _join_sides(plans: Iterable[BatchPlan]) -> dict[int, dict[str, int]]:
    """Per join operator and side, its state watermark minus its eviction watermark, from the latest plan whose printed
    eviction watermark and state cleanup are past 0 (Spark solves the condition in doubles and truncates toward zero,
    so a value at or below 0 would not give the offset of later batches)."""
    out: dict[int, dict[str, int]] = {}
    for plan in plans:
        for op in plan.root.operators():
            if op.output_watermark != JOIN or op.evict_ms is None or op.evict_ms <= 0:
                continue
            if all(c.state_ms > 0 for c in op.cleanup):
                out[op.operator_id] = {c.side: c.state_ms - op.evict_ms if c.kind == "value" else 0 for c in op.cleanup}
    return out


# -- the propagation --------------------------------------------------------------------------

_NONE = "none"
_UNKNOWN = "unknown"
Value = int | str  # a watermark, or _NONE (no watermark reaches it) or _UNKNOWN


def _min(values: list[Value]) -> Value:
    if _UNKNOWN in values:
        return _UNKNOWN
    known = [v for v in values if isinstance(v, int)]
    return min(known) if known else _NONE


def _propagate(node: PlanNode, origin: int, offsets: Mapping[int, int], inputs: dict[int, Value]) -> Value:
    """The output watermark of ``node``; each operator's input watermark goes into ``inputs``."""
    outs = [_propagate(child, origin, offsets, inputs) for child in node.children]
    if node.kind == "watermark":
        return origin
    value = _min(outs)
    op = node.operator
    if op is None:
        return value
    inputs[op.operator_id] = value
    if not isinstance(value, int) or op.output_watermark == PASSES:
        return value
    if op.output_watermark == NONE:
        return _NONE
    return value + offsets[op.operator_id] if op.operator_id in offsets else _UNKNOWN


def _inputs(root: PlanNode, origin: int, offsets: Mapping[int, int]) -> dict[int, Value]:
    inputs: dict[int, Value] = {}
    _propagate(root, origin, offsets, inputs)
    return inputs


def _operator_value(value: Value, origin: int | None) -> int | None:
    if origin == 0:
        return 0  # Spark skips the propagation: every operator gets 0
    if origin is None or value == _UNKNOWN:
        return None
    return max(value, 0) if isinstance(value, int) else 0


# -- per batch --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Context:
    root: PlanNode
    links: Mapping[int, OperatorLink]
    offsets: Mapping[int, int]
    topology_from: str
    has_plans: bool
    allow_multiple: bool


def _upstream_of(links: Mapping[int, OperatorLink], operator_id: int, rows: bool = False) -> list[OperatorLink]:
    """Every stateful operator whose output watermark (with ``rows``: whose output) reaches ``operator_id``, nearest
    first."""
    def feeding(link: OperatorLink) -> tuple[int, ...]:
        return link.upstream if rows else link.watermark_from

    out, todo = [], list(feeding(links[operator_id])) if operator_id in links else []
    while todo:
        op = links.get(todo.pop(0))
        if op is not None and op not in out:
            out.append(op)
            todo += feeding(op)
    return out


def _derived(ctx: _Context, operator_id: int, late: int | None, evict: int | None, origin: int,
             purged: bool) -> OperatorWatermark:
    """An operator's watermarks worked out from the checkpoint's global ones, with the reason."""
    upstream = _upstream_of(ctx.links, operator_id)
    joins = [u for u in upstream if u.output == JOIN]
    blocked = next((u for u in upstream if u.output == NONE), None)
    shape = f"; the operators' order from {ctx.topology_from}"
    held = next((j for j in joins if j.join_offset_ms is None), None)
    if late == 0 and evict == 0 and origin == 0:
        return OperatorWatermark(operator_id, 0, 0, CHECKPOINT, "0: the global watermark is 0, which Spark gives every "
                                                                "operator as it is")
    if evict is None and held is not None:
        why = (f"a stream-stream join upstream, {held.label}, holds its output watermark back by its time-range "
               "condition, which only the plan records: " + (PASS_EVENT_LOG if not ctx.has_plans else
                                                            "the event log shows no state cleanup of it past watermark 0"))
        return OperatorWatermark(operator_id, late, evict, UNKNOWN, why)
    if late is None:
        reason = "offsets/N-1 was purged, so the late-events watermark is unknown" if purged else \
            f"the late-events watermark depends on {held.label if held else 'a join'} upstream, unknown here"
        return OperatorWatermark(operator_id, late, evict, UNKNOWN, reason)
    if blocked is not None and not ctx.has_plans:
        return OperatorWatermark(operator_id, None, None, UNKNOWN,
                                 f"{blocked.label} upstream passes no watermark on: this operator gets 0 (it never evicts "
                                 "and never drops late rows) unless the query calls withWatermark again after it, which "
                                 f"only the plan shows: {PASS_EVENT_LOG}")
    if blocked is not None and late == 0 and evict == 0:
        return OperatorWatermark(operator_id, 0, 0, CHECKPOINT,
                                 f"0: {blocked.label} upstream passes no watermark on (its function may emit any event "
                                 "time), so this operator never evicts and never drops late rows" + shape)
    if joins:
        lag = sum(j.join_offset_ms or 0 for j in joins)
        return OperatorWatermark(operator_id, late, evict, JOIN_CONDITION,
                                 f"the global watermark {lag / 1000:+.3f} s: the condition of {', '.join(j.label for j in joins)} "
                                 "upstream (its state cleanup in the event log)" + shape)
    return OperatorWatermark(operator_id, late, evict, CHECKPOINT,
                             "the global watermark (offsets/N for eviction, offsets/N-1 for late rows), which every "
                             "operator upstream passes on" + shape)


def _batch(ctx: _Context, batch: int, watermark: int, previous: int | None, plan: BatchPlan | None) -> BatchWatermarks:
    printed = plan.operators if plan is not None else {}
    out = []
    for operator_id in sorted(ctx.links):
        op = printed.get(operator_id)
        if op is not None and op.late_ms is not None and op.evict_ms is not None:
            out.append(OperatorWatermark(operator_id, op.late_ms, op.evict_ms, PLAN, f"batch {batch}'s plan ({op.node}) in the event log"))
        elif not ctx.allow_multiple:
            out.append(OperatorWatermark(operator_id, watermark, watermark, CHECKPOINT,
                                         "allowMultiple=false: one global watermark (offsets/N) for late rows and eviction"))
        else:
            evict = _operator_value(_inputs(ctx.root, watermark, ctx.offsets).get(operator_id, _NONE), watermark)
            late = _operator_value(_inputs(ctx.root, previous, ctx.offsets).get(operator_id, _NONE), previous) \
                if previous is not None else None
            out.append(_derived(ctx, operator_id, late, evict, watermark, previous is None))
    return BatchWatermarks(batch, watermark, previous, plan is not None, tuple(out))


def _context(ckpt: "Checkpoint", progress: "QueryProgress | None", allow_multiple: bool | None) -> tuple[_Context, str]:
    plans = list(progress.plans.values()) if progress is not None else []
    names = {o.operator_id: o.name for o in ckpt.operators}
    latest = plans[-1] if plans else None
    if latest is not None:
        root, topology = latest.root, f"batch {latest.batch_id}'s plan in the event log"
    else:
        root, topology = _chain(ckpt), "the checkpoint (no plan: operators taken as one chain, operator 0 last)"
    sides = _join_sides(plans)
    offsets = {op: min([*by_side.values(), 0]) for op, by_side in sides.items()}
    upstream, watermark_from = dict(root.upstream()), dict(root.upstream(watermarks=True))
    printed = {op.operator_id: op for op in root.operators()}
    links = {}
    for operator_id in sorted(set(names) | set(printed)):
        op = printed.get(operator_id)
        links[operator_id] = OperatorLink(operator_id, names.get(operator_id), op.node or None if op else None,
                                          upstream.get(operator_id, ()), watermark_from.get(operator_id, ()),
                                          op.output_watermark if op else PASSES,
                                          offsets.get(operator_id), sides.get(operator_id))
    if allow_multiple is not None:
        chosen, source = allow_multiple, f"given (allow_multiple={allow_multiple})"
    elif latest is not None and latest.allow_multiple is not None:
        chosen, source = latest.allow_multiple, f"batch {latest.batch_id}'s session conf in the event log"
    else:
        chosen, source = True, "Spark's default (spark.sql.streaming.statefulOperator.allowMultiple is not pinned in the checkpoint)"
    return _Context(root, links, offsets, topology, latest is not None, chosen), source


def operator_watermarks(ckpt: "Checkpoint", progress: "QueryProgress | None" = None, batches: Iterable[int] | None = None,
                        allow_multiple: bool | None = None) -> OperatorWatermarks:
    """Every stateful operator's late-events and eviction watermarks in ``batches`` (default: every batch with an
    offsets file, and the next batch). ``progress`` with plans (an event log) makes them exact where the plan
    decides; ``allow_multiple`` overrides the conf (default: the event log's, else Spark's default, true)."""
    ctx, allow_from = _context(ckpt, progress, allow_multiple)
    ids = ckpt.offset_ids
    nxt = ckpt.next_batch
    wanted = sorted(set(ids) | {nxt}) if batches is None else sorted(set(batches))
    ckpt.load_batches(sorted({b for w in wanted for b in (w - 1, w) if b in ckpt.offset_id_set}))
    plans = progress.plans if progress is not None else {}
    out = []
    for batch in wanted:
        watermark = _global(ckpt, batch)
        if watermark is None:
            continue
        previous = 0 if batch == 0 else _global(ckpt, batch - 1, committed_only=False)
        out.append(_batch(ctx, batch, watermark, previous, plans.get(batch)))
    return OperatorWatermarks(ctx.allow_multiple, allow_from, ctx.topology_from, tuple(ctx.links.values()), tuple(out), ctx.root)


def _global(ckpt: "Checkpoint", batch: int, committed_only: bool = True) -> int | None:
    """The global watermark batch ``batch`` ran (or runs) with: ``offsets/N``, or for the next batch the one a restart
    uses (also when its offsets file is a broken tail, which Spark plans again); None when neither is there."""
    seq = ckpt.readable_offsets(batch) if batch in ckpt.offset_id_set else None
    if seq is not None:
        return seq.metadata.batch_watermark_ms if seq.metadata else 0
    if batch == ckpt.next_batch and committed_only:
        return ckpt.watermark_ms
    return None


@dataclass(frozen=True)
class OperatorStall:
    """A stateful operator whose own eviction watermark has not moved while the global watermark did."""

    operator_id: int
    watermark_ms: int
    since_batch: int
    global_watermark_ms: int
    explanation: str


def operator_stalls(ckpt: "Checkpoint", progress: "QueryProgress | None" = None) -> tuple[OperatorStall, ...]:
    """Operators held still while the global watermark moved on (only where their values are known): the last batches
    each one's eviction watermark stayed the same over, from the first of them to the next batch."""
    if len(ckpt.operators) < 2:
        return ()
    model = operator_watermarks(ckpt, progress)
    if not model.batches:
        return ()
    last = model.batches[-1]
    out = []
    for own in last.operators:
        if own.evict_ms is None:
            continue
        since = last.batch
        for b in reversed(model.batches[:-1]):
            value = b.of(own.operator_id)
            if value is None or value.evict_ms != own.evict_ms:
                break
            since = b.batch
        start = model.batch(since)
        if start is None or start.watermark_ms >= last.watermark_ms:
            continue  # the global watermark did not move either (the global stall diagnosis says why)
        link = model.link(own.operator_id)
        assert link is not None
        blocked = next((u for u in model.upstream(own.operator_id) if u.output == NONE), None)
        cause = (f"{blocked.label} upstream passes no watermark on" if blocked is not None
                 else f"the operators upstream hold it back ({own.note})")
        out.append(OperatorStall(own.operator_id, own.evict_ms, since, last.watermark_ms,
                                 f"{link.label}'s own watermark has stayed at {own.evict_ms} since batch {since} while "
                                 f"the global watermark moved on to {last.watermark_ms}: {cause}"))
    return tuple(out)
