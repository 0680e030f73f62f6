"""Which column of a state store Spark compares with the watermark, and how (no Spark needed).

Spark's rules, per operator (the watermark is epoch ms; timestamps in state are microseconds):

* aggregation, deduplication, session windows, stream-stream join rows: the column whose schema
  metadata carries ``spark.watermarkDelayMs`` (a window or session window struct: its ``end``) is
  removed once it is ``<=`` the watermark (``WatermarkSupport.watermarkExpression``); the key is
  searched first, then the value (session windows and join rows keep it in the value);
* ``dropDuplicatesWithinWatermark``: ``value.expiresAtMicros <= watermark``;
* ``flatMapGroupsWithState`` / ``applyInPandasWithState``: a key times out once
  ``value.timeoutTimestamp`` (ms, ``-1`` = none set) is ``<`` the watermark;
* ``transformWithState`` (Scala and Python): an event-time timer fires once ``expiration_timestamp_ms <=`` the
  operator's eviction watermark of the batch (``TimerStateImpl.getExpiredTimers``: ``result._2 <= expiryTimestampMs``,
  called with ``eventTimeWatermarkForEviction`` by ``TransformWithStateExec.processTimers`` and, for Python, by the
  state server, which also gives the processor that watermark); one registered in the batch at or before it fires in
  the same batch. State variables are never evicted by the watermark (the processor or TTL clears them).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from wmcheck.checkpoint.operator_kinds import JOIN_SIDES, is_transform_with_state
from wmcheck.checkpoint.records import dataclass
from wmcheck.statestore.formats.schema import StructType, event_time_field

if TYPE_CHECKING:
    from wmcheck.checkpoint.model import Checkpoint

    from .discovery import Store

EVENT_TIMERS = "$eventTimers_keyToTimestamp"
TIMER_COLUMN = "expiration_timestamp_ms"
FMGWS_NAMES = ("flatMapGroupsWithState", "applyInPandasWithState")
NO_WATERMARK = "this state is never evicted by the watermark and grows with every new key"


@dataclass(frozen=True)
class Eviction:
    """How the watermark evicts one store; ``column`` is None when it never does."""

    column: tuple[str, ...] | None
    rule: str
    unit: str = "us"
    """``us`` (timestamps, ``expiresAtMicros``) or ``ms`` (timeouts, timers)."""
    strict: bool = False
    """Evicted when ``< watermark`` (timeouts) rather than ``<=``."""
    unset: int | None = None
    """A value that means "no event time set" (``-1``: no timeout)."""

    @property
    def evictable(self) -> bool:
        return self.column is not None

    @property
    def column_name(self) -> str | None:
        return ".".join(self.column) if self.column else None


def _never(why: str) -> Eviction:
    return Eviction(None, f"no event-time column: {why}; {NO_WATERMARK}")


def _watermarked(key: StructType | None, value: StructType | None) -> tuple[str, ...] | None:
    for prefix, schema in (("key", key), ("value", value)):
        found = event_time_field(schema) if schema is not None else None
        if found:
            return (prefix, *found.path)
    return None


def eviction_rule(operator_name: str | None, store: str, key: StructType | None, value: StructType | None) -> Eviction:
    """The eviction rule of ``store`` (a store name, join side or state variable) of an operator.

    ``key``/``value`` are the schemas of the rows Spark's state reader returns for it.
    """
    value_fields = {f.name for f in value.fields} if value is not None else set()
    if is_transform_with_state(operator_name):
        if store == EVENT_TIMERS:
            return Eviction((TIMER_COLUMN,), f"an event-time timer fires (handleExpiredTimer) once {TIMER_COLUMN} <= watermark",
                            "ms")
        if store.startswith("$procTimers"):
            return _never("processing-time timers fire by the batch time, not the watermark")
        return Eviction(None, "state variable: the watermark never evicts it; the processor clears it "
                              "(typically when an event-time timer fires) or its TTL expires it")
    if operator_name in FMGWS_NAMES or (operator_name is None and "groupState" in value_fields):
        if "timeoutTimestamp" not in value_fields:
            return _never("no timeout is configured (NoTimeout): only the function removes state")
        return Eviction(("value", "timeoutTimestamp"),
                        "a key times out (the function is called with hasTimedOut) once value.timeoutTimestamp < watermark "
                        "with EventTimeTimeout; the state goes only if the function removes it", "ms", strict=True, unset=-1)
    if operator_name == "dedupeWithinWatermark" or (operator_name is None and value_fields == {"expiresAtMicros"}):
        return Eviction(("value", "expiresAtMicros"), "a key is removed once value.expiresAtMicros (event time + delay) <= watermark")
    column = _watermarked(key, value)
    if store.endswith("-keyToNumValues") and column is None:
        side = store.split("-")[0]
        return Eviction(None, f"join key row counts: no event-time column of their own; Spark updates them when it "
                              f"removes rows of {side}-keyWithIndexToValue")
    if column is None:
        return _never(_why_never(operator_name))
    name = ".".join(column)
    if store in JOIN_SIDES or store.endswith("-keyWithIndexToValue"):
        return Eviction(column, f"a row is removed once {name} <= the join's state watermark: the watermark, or earlier by a "
                                "time-range join condition (not recorded in the checkpoint); without an event-time bound in "
                                "the join condition Spark never evicts join state")
    return Eviction(column, f"removed once {name} <= watermark" + (" (never in complete output mode)" if operator_name == "stateStoreSave" else ""))


def _why_never(operator_name: str | None) -> str:
    if operator_name == "stateStoreSave":
        return "the grouping keys hold neither the watermarked column nor a window on it"
    if operator_name == "dedupe":
        return "the dropDuplicates columns do not include the watermarked event-time column"
    return "no column carries the watermark (spark.watermarkDelayMs metadata)"


def store_eviction(ckpt: "Checkpoint", store: "Store", key: StructType | None, value: StructType | None,
                   has_column: Callable[[tuple[str, ...]], bool]) -> Eviction:
    """The eviction rule of a store the reader shows with ``key``/``value`` schemas: the event-time
    column from the store's schema file, else from the reader's schemas (the same
    ``spark.watermarkDelayMs`` metadata); ``has_column`` says whether the reader's rows hold a column."""
    if not is_transform_with_state(store.operator_name):
        schema = ckpt.store_schema(store.operator_id, store.schema_store)
        if schema is not None:
            rule = eviction_rule(store.operator_name, store.name, schema.key_schema, schema.value_schema)
            if rule.column is None or has_column(rule.column):
                return rule
    return eviction_rule(store.operator_name, store.name, key, value)
