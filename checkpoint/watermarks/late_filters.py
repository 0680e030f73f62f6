"""Which group-state operators drop late input rows: by operator kind, timeout (or time mode) and Spark version.

From Spark's source, the same in 3.5 and 4.x (3.5 split the one watermark into late-events and eviction ones):

- ``flatMapGroupsWithState`` / ``mapGroupsWithState`` (``FlatMapGroupsWithStateExec``) and
  ``applyInPandasWithState`` (``FlatMapGroupsInPandasWithStateExec``, which reuses the base's loop) drop the input rows
  at or before their late-events watermark only with ``EventTimeTimeout``: ``FlatMapGroupsWithStateExecBase.
  processDataWithPartition`` filters ``case Some(predicate) if timeoutConf == EventTimeTimeout`` (sql/core/.../
  streaming/FlatMapGroupsWithStateExec.scala; operators/stateful/flatmapgroupswithstate/ in 4.1+). With
  ``NoTimeout`` or ``ProcessingTimeTimeout`` every row reaches the function.
- ``transformWithState`` (``TransformWithStateExec``, Spark 4.0+) and its Python form drop them only in
  ``TimeMode.EventTime``: ``processDataWithPartition`` filters ``if timeMode == TimeMode.EventTime()``
  (operators/stateful/transformwithstate/TransformWithStateExec.scala).

The timeout is not written in the checkpoint as such, but the group state's value schema
(``FlatMapGroupsWithStateExecHelper``) holds a ``timeoutTimestamp`` field only when a timeout is set: without it the
timeout is ``NoTimeout``; with it, only the plan (Spark's event log) tells processing time from event time.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Mapping

from wmcheck.checkpoint.errors import CheckpointError, arg
from wmcheck.checkpoint.layout import DEFAULT_STORE
from wmcheck.checkpoint.operator_kinds import is_group_state, is_transform_with_state
from wmcheck.checkpoint.records import dataclass

if TYPE_CHECKING:
    from wmcheck.checkpoint.model import Checkpoint, Operator
    from wmcheck.checkpoint.watermarks.plans import BatchPlan
    from wmcheck.statestore.formats.schema import ColumnFamilySchema

NO_TIMEOUT, PROCESSING_TIME_TIMEOUT, EVENT_TIME_TIMEOUT = "NoTimeout", "ProcessingTimeTimeout", "EventTimeTimeout"
TIMEOUT_FIELD = "timeoutTimestamp"


@dataclass(frozen=True)
class LateFilter:
    """Whether an operator drops late input rows, and why."""

    drops: bool | None
    """True: rows at or before its late-events watermark are dropped; False: none are; None: unknown."""
    reason: str


def schema_timeout(schema: "ColumnFamilySchema | None") -> str | None:
    """``NoTimeout`` when the group state's value schema has no ``timeoutTimestamp`` field; None when it has one (a
    processing-time or event-time timeout) or there is no schema."""
    if schema is None:
        return None
    return None if any(f.name == TIMEOUT_FIELD for f in schema.value_schema.fields) else NO_TIMEOUT


def group_state_filter(name: str, timeout: str | None, timeout_set: bool | None = None) -> LateFilter:
    """The rule for (flat)MapGroupsWithState / applyInPandasWithState. ``timeout``: the plan's timeout conf (or
    ``NoTimeout`` from the state schema); ``timeout_set``: the state schema holds a timeout timestamp."""
    if timeout == EVENT_TIME_TIMEOUT:
        return LateFilter(True, f"{name} with EventTimeTimeout drops the input rows behind its late-events watermark")
    if timeout in (NO_TIMEOUT, PROCESSING_TIME_TIMEOUT):
        return LateFilter(False, f"0: {name} with {timeout} drops no late rows (Spark filters them only with "
                                 "EventTimeTimeout)")
    which = ("its state stores a timeout timestamp, but whether the timeout is ProcessingTimeTimeout or "
             "EventTimeTimeout only the plan shows") if timeout_set else "its timeout is unknown here"
    return LateFilter(None, f"{name} drops late rows only with EventTimeTimeout; {which}: pass Spark's event log of "
                            f"the query ({arg('progress', 'EVENTLOG')})")


def time_mode_filter(name: str, properties: Mapping[str, object] | None) -> LateFilter:
    """The rule for transformWithState: its ``timeMode`` from the operator metadata's properties."""
    mode = properties.get("timeMode") if properties else None
    if mode == "EventTime":
        return LateFilter(True, f"{name} in event time drops the input rows behind its late-events watermark")
    if mode is None:
        return LateFilter(None, f"{name}'s time mode is not in its operator metadata")
    return LateFilter(False, f"0: {name} in time mode {mode} drops no late rows (Spark filters them only in EventTime)")


def late_filter(name: str | None, timeout: str | None = None, schema: "ColumnFamilySchema | None" = None,
                properties: Mapping[str, object] | None = None) -> LateFilter | None:
    """The rule for a group-state or transformWithState operator (None for any other operator). ``timeout`` is the
    plan's timeout conf, ``schema`` the default store's schema, ``properties`` the operator metadata's."""
    if name is not None and is_transform_with_state(name):
        return time_mode_filter(name, properties)
    if not is_group_state(name):
        return None
    assert name is not None
    from_schema = schema_timeout(schema)
    return group_state_filter(name, timeout or from_schema, None if schema is None else from_schema is None)


def operator_filter(ckpt: "Checkpoint", operator: "int | Operator", plans: Iterable["BatchPlan"] = ()) -> LateFilter | None:
    """:func:`late_filter` for one operator of ``ckpt`` (by id, or as the caller read it: check reads the operators
    itself, a v1 metadata file that does not parse being its own finding): its timeout from the latest of ``plans``
    that prints it."""
    op = operator if not isinstance(operator, int) else next(
        (o for o in ckpt.operators if o.operator_id == operator), None)
    if op is None:
        return None
    operator_id = op.operator_id
    printed = [p.operators.get(operator_id) for p in plans]
    timeout = next((o.timeout for o in reversed(printed) if o is not None and o.timeout), None)
    schema = None
    if is_group_state(op.name):
        try:
            schema = ckpt.store_schema(operator_id, DEFAULT_STORE)
        except CheckpointError:
            schema = None
    props = getattr(op.metadata, "properties", None)
    return late_filter(op.name, timeout, schema, props if isinstance(props, Mapping) else None)
