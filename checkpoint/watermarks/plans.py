"""The physical plans of a query's batches as Spark's event log records them (``SparkListenerSQLExecutionStart``).

Pure parsing (decoded JSON in, frozen dataclasses out). Spark prints every stateful operator of a batch with
the two watermarks ``IncrementalExecution`` gave it (``WatermarkPropagationRule``): the one it drops late rows
by and the one it evicts state with, e.g. ``StateStoreSave [...], state info [ ..., opId = 0, ...]
stateStoreCkptIds = None, Append, <late>, <evict>, 2``; a stream-stream join also prints the state cleanup
predicates the join condition gives its sides (``left value predicate: (l_ts#1-T10000ms <= <micros>)``).
Only what the watermark propagation needs is kept: watermark nodes (each with its event-time column and delay:
``EventTimeWatermark 9795..., ts#24: timestamp, 10 seconds``), stateful operators and the nodes where several inputs
meet (a union), in the plan's shape.
"""
from __future__ import annotations

import re
from typing import Any, Iterator, Mapping

from wmcheck.checkpoint.records import dataclass

SQL_START = "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart"
ENVIRONMENT = "SparkListenerEnvironmentUpdate"
ALLOW_MULTIPLE = "spark.sql.streaming.statefulOperator.allowMultiple"
WATERMARK_NODE = "EventTimeWatermark"
JOIN_NODE = "StreamingSymmetricHashJoin"
NO_OUTPUT_NODES = ("FlatMapGroupsWithState", "FlatMapGroupsInPandasWithState")
"""``produceOutputWatermark`` is None: (flat)MapGroupsWithState's function may emit any event time."""
TWS_PREFIX = "TransformWithState"
OUTPUT_MODES = ("Append", "Update", "Complete")
TIMEOUTS = ("NoTimeout", "ProcessingTimeTimeout", "EventTimeTimeout")
PASSES, NONE, JOIN = "input", "none", "join"

_BATCH = re.compile(r"id = (\S+)\s+runId = (\S+)\s+batch = (\d+)")
_STATE_INFO = re.compile(r"state info \[ checkpoint = .*?, runId = [^,\]]*, opId = (\d+), ver = \d+, numPartitions = \d+\]")
_INT = re.compile(r"-?\d+")
_CLEANUP = re.compile(r"(left|right) (value|key) predicate: \(.* <= (-?\d+)\)$")
_NODE_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}, ")
_EVENT_TIME = re.compile(r"(.*)#\d+(?:-T-?\d+ms)?(?:: [^,]*)?")
_INTERVAL_PART = re.compile(r"(-?\d+(?:\.\d+)?) (years|months|days|hours|minutes|seconds)")
MICROS_PER_UNIT = {"days": 86_400_000_000, "hours": 3_600_000_000, "minutes": 60_000_000, "seconds": 1_000_000}
DAYS_PER_MONTH = 31
"""``EventTimeWatermark.getDelayMs``: a month of a delay counts 31 days (``IntervalUtils.getDuration``)."""


@dataclass(frozen=True)
class JoinCleanup:
    """One side's state cleanup of a stream-stream join: rows whose event time (``value``) or join key (``key``)
    is ``<= state_ms`` are removed."""

    side: str
    kind: str
    state_ms: int


@dataclass(frozen=True)
class PlanOperator:
    """A stateful operator as one batch's plan prints it."""

    operator_id: int
    node: str
    """The exec node (``StateStoreSave``, ``StreamingSymmetricHashJoin``, ``FlatMapGroupsInPandasWithState`` ...)."""
    late_ms: int | None
    evict_ms: int | None
    output_watermark: str
    """What it passes downstream (``produceOutputWatermark``): ``input``, ``none`` or ``join``."""
    cleanup: tuple[JoinCleanup, ...] = ()
    output_mode: str | None = None
    """A streaming aggregation's output mode (``Append``, ``Update``, ``Complete``), where it prints one."""
    timeout: str | None = None
    """A (flat)MapGroupsWithState's timeout conf (``NoTimeout``, ``ProcessingTimeTimeout``, ``EventTimeTimeout``)."""


@dataclass(frozen=True)
class PlanWatermark:
    """A ``withWatermark`` as a batch's plan prints it (``EventTimeWatermark [<node id>, ]ts#1: timestamp, 10 seconds``):
    its event-time column and delay."""

    column: str
    delay_ms: int
    delay: str
    """The delay as Spark prints it (``CalendarInterval.toString``: ``1 minutes 30 seconds``)."""


@dataclass(frozen=True)
class PlanNode:
    """A node of the reduced plan: ``watermark`` (EventTimeWatermark), ``operator`` or ``merge`` (several inputs)."""

    kind: str
    children: tuple["PlanNode", ...] = ()
    operator: PlanOperator | None = None
    watermark: PlanWatermark | None = None
    """A ``watermark`` node's column and delay (None where its text could not be read)."""

    def watermarks(self) -> Iterator[PlanWatermark | None]:
        """Every watermark node's column and delay, pre-order, left to right (the order of the inputs under them)."""
        if self.kind == "watermark":
            yield self.watermark
        for child in self.children:
            yield from child.watermarks()

    def operators(self) -> Iterator[PlanOperator]:
        """Every stateful operator, downstream first."""
        if self.operator is not None:
            yield self.operator
        for child in self.children:
            yield from child.operators()

    def upstream(self, watermarks: bool = False) -> Iterator[tuple[int, tuple[int, ...]]]:
        """(operator id, the stateful operators whose output reaches it directly) for every operator; with
        ``watermarks``, only those whose output *watermark* reaches it (not through a watermark node, which
        replaces it with the global watermark)."""
        if self.operator is not None:
            yield self.operator.operator_id, tuple(sorted(_nearest(self.children, watermarks)))
        for child in self.children:
            yield from child.upstream(watermarks)


def _nearest(nodes: tuple[PlanNode, ...], stop_at_watermark: bool) -> Iterator[int]:
    for node in nodes:
        if node.operator is not None:
            yield node.operator.operator_id
        elif not (stop_at_watermark and node.kind == "watermark"):
            yield from _nearest(node.children, stop_at_watermark)


@dataclass(frozen=True)
class BatchPlan:
    """One batch's physical plan: its query, run and batch, and the conf that decides the propagation."""

    query_id: str
    run_id: str
    batch_id: int
    time_ms: int | None
    allow_multiple: bool | None
    """``spark.sql.streaming.statefulOperator.allowMultiple`` as the session set it (None: not set, default true)."""
    root: PlanNode

    @property
    def operators(self) -> dict[int, PlanOperator]:
        return {op.operator_id: op for op in self.root.operators()}

    @property
    def watermarks(self) -> tuple[PlanWatermark | None, ...]:
        return tuple(self.root.watermarks())


def _split_args(text: str) -> list[str]:
    """Top-level comma-separated arguments (brackets and parentheses nest)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    out.append(text[start:].strip())
    return [a for a in out if a]


def _int(token: str) -> int | None:
    return int(token) if _INT.fullmatch(token) else None


def _int_run(tokens: list[str], start: int = 0) -> list[int]:
    """The integers from the first integer at or after ``start`` up to the next other token."""
    run: list[int] = []
    for token in tokens[start:]:
        value = _int(token)
        if value is None:
            if run:
                break
            continue
        run.append(value)
    return run


def _watermarks(node: str, tokens: list[str]) -> tuple[int | None, int | None]:
    """(late, evict) from the arguments after the state info, by the exec's argument order."""
    run: list[int] = []
    if node in ("StateStoreSave", "SessionWindowStateStoreSave"):
        at = next((i for i, t in enumerate(tokens) if t in OUTPUT_MODES), None)
        run = _int_run(tokens, at + 1)[:2] if at is not None else []
    elif node.startswith("StreamingDeduplicate") or node == JOIN_NODE:
        run = _int_run(tokens)[:2]
    elif node in NO_OUTPUT_NODES:
        at = next((i for i, t in enumerate(tokens) if t in TIMEOUTS), None)
        run = _int_run(tokens, at + 1)[-2:] if at is not None else []  # [batch timestamp,] late, evict
    elif node.startswith(TWS_PREFIX):
        run = _int_run(tokens)[-2:]  # batch timestamp[, previous batch timestamp], late, evict
    return (run[0], run[1]) if len(run) == 2 else (None, None)


def _cleanup(tokens: list[str]) -> tuple[JoinCleanup, ...]:
    found = next((t for t in tokens if t.startswith("state cleanup [")), None)
    if found is None:
        return ()
    out = []
    for part in _split_args(found[len("state cleanup ["):-1]):
        match = _CLEANUP.match(part.strip())
        if match:
            micros = int(match[3])
            out.append(JoinCleanup(match[1], match[2], micros // 1000))
    return tuple(out)


def _output_watermark(node: str, tokens: list[str]) -> str:
    if node in NO_OUTPUT_NODES or (node.startswith(TWS_PREFIX) and "ProcessingTime" in tokens):
        return NONE
    return JOIN if node == JOIN_NODE else PASSES


def plan_operator(node: str, text: str) -> PlanOperator | None:
    """The stateful operator a plan node prints (``node`` its name, ``text`` its ``simpleString``), or None."""
    match = _STATE_INFO.search(text)
    if match is None:
        return None
    tokens = _split_args(text[match.end():])
    if tokens and tokens[0].startswith("stateStoreCkptIds"):
        tokens = tokens[1:]
    late, evict = _watermarks(node, tokens)
    mode = next((t for t in tokens if t in OUTPUT_MODES), None) if node == "StateStoreSave" else None
    timeout = next((t for t in tokens if t in TIMEOUTS), None) if node in NO_OUTPUT_NODES else None
    return PlanOperator(int(match[1]), node, late, evict, _output_watermark(node, tokens),
                        _cleanup(tokens) if node == JOIN_NODE else (), mode, timeout)


def interval_ms(text: str) -> int | None:
    """A delay as ``CalendarInterval.toString`` prints it (``1 years 2 months 3 days 4 hours 5 minutes 6.5 seconds``) in
    ms as ``EventTimeWatermark.getDelayMs`` counts it (a month 31 days, micros truncated toward zero); None if not one."""
    from decimal import Decimal

    months, micros, pos = 0, Decimal(0), 0
    body = text.strip()
    for match in _INTERVAL_PART.finditer(body):
        if body[pos:match.start()].strip():
            return None
        value, unit = Decimal(match[1]), match[2]
        if unit in ("years", "months"):
            months += int(value) * (12 if unit == "years" else 1)
        else:
            micros += value * MICROS_PER_UNIT[unit]
        pos = match.end()
    if pos == 0 or body[pos:].strip():
        return None
    total = int(micros) + months * DAYS_PER_MONTH * MICROS_PER_UNIT["days"]
    return total // 1000 if total >= 0 else -(-total // 1000)


def plan_watermark(text: str) -> PlanWatermark | None:
    """The column and delay of an ``EventTimeWatermark`` node's ``simpleString`` (Spark 4 prints its node id first,
    3.5 does not), or None."""
    body = text[len(WATERMARK_NODE):].strip() if text.startswith(WATERMARK_NODE) else text.strip()
    node_id = _NODE_ID.match(body)
    if node_id:
        body = body[node_id.end():]
    column, sep, delay = body.rpartition(", ")
    match = _EVENT_TIME.fullmatch(column) if sep else None
    delay_ms = interval_ms(delay) if match else None
    if match is None or delay_ms is None:
        return None
    return PlanWatermark(match[1], delay_ms, delay)


def _reduce(info: Mapping[str, Any], seen: set[int]) -> list[PlanNode]:
    """The reduced nodes of a ``sparkPlanInfo`` subtree, top-down (an operator printed twice, e.g. StateStoreRestore
    below StateStoreSave, keeps its upper node)."""
    name = str(info.get("nodeName", ""))
    op = None if name == WATERMARK_NODE else plan_operator(name, str(info.get("simpleString", "")))
    if op is not None and op.operator_id in seen:
        op = None
    if op is not None:
        seen.add(op.operator_id)
    children = tuple(n for child in info.get("children") or () if isinstance(child, Mapping) for n in _reduce(child, seen))
    if name == WATERMARK_NODE:
        return [PlanNode("watermark", children, watermark=plan_watermark(str(info.get("simpleString", ""))))]
    if op is not None:
        return [PlanNode("operator", children, op)]
    return list(children) if len(children) <= 1 else [PlanNode("merge", children)]


def _allow_multiple(value: Any) -> bool | None:
    return None if value is None else str(value).strip().lower() == "true"


def batch_plan(event: Mapping[str, Any], default_allow_multiple: bool | None = None) -> BatchPlan | None:
    """The plan of a streaming batch's execution (an ``SQLExecutionStart`` event), None for other executions."""
    match = _BATCH.search(str(event.get("description") or ""))
    info = event.get("sparkPlanInfo")
    if match is None or not isinstance(info, Mapping):
        return None
    seen: set[int] = set()
    nodes = _reduce(info, seen)
    if not seen:
        return None
    root = nodes[0] if len(nodes) == 1 else PlanNode("merge", tuple(nodes))
    confs = event.get("modifiedConfigs") or {}
    allow = _allow_multiple(confs.get(ALLOW_MULTIPLE)) if isinstance(confs, Mapping) else None
    time = event.get("time")
    return BatchPlan(match[1], match[2], int(match[3]), time if isinstance(time, int) else None,
                     default_allow_multiple if allow is None else allow, root)


def environment_allow_multiple(event: Mapping[str, Any]) -> bool | None:
    """``allowMultiple`` from an ``EnvironmentUpdate`` event (the application's Spark properties), if set there."""
    props = event.get("Spark Properties")
    if isinstance(props, Mapping):
        return _allow_multiple(props.get(ALLOW_MULTIPLE))
    if isinstance(props, list):  # [[key, value], ...]
        return _allow_multiple(next((p[1] for p in props if isinstance(p, list) and len(p) == 2 and p[0] == ALLOW_MULTIPLE), None))
    return None
