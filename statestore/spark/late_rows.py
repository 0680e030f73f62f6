"""Late rows without ceremony: the query's window inferred from its state, and how late the late rows were.

A windowed aggregation keys its state by ``window`` (``struct<start, end>``) and its grouping
columns. The window's size is ``end - start`` of the stored windows and its slide the greatest common
divisor of the distances between their starts (equal to the size for tumbling windows). How late a
late row was is the watermark it was judged by minus its event time (its window's end when windowed);
a ``withWatermark`` delay longer by more than that would have kept it, so the delay that keeps q of
the late rows is the q-quantile (nearest rank) of that lateness, plus 1 ms.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Sequence

from wmcheck.checkpoint.errors import CheckpointError, arg
from wmcheck.checkpoint.model import Checkpoint
from wmcheck.checkpoint.records import dataclass
from wmcheck.statestore.formats.files import DEFAULT_STORE
from wmcheck.statestore.formats.schema import StructType

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from wmcheck.checkpoint.watermarks.progress import QueryProgress
    from wmcheck.statestore.spark.replay import ReplayBatch

WINDOW = "window"
WINDOW_HINT = (f"pass {arg('window', 'DURATION[,SLIDE]')} (the query's window(), "
               f"e.g. {arg('window', repr('10 seconds,5 seconds'))})")
KEEP_SHARES = ((0.99, "99%"), (0.999, "99.9%"), (1.0, "100%"))


@dataclass(frozen=True)
class WindowKey:
    """An operator whose state key is a window plus grouping columns."""

    operator_id: int
    group_by: tuple[str, ...]


@dataclass(frozen=True)
class InferredWindow:
    """The query's window as its state shows it."""

    operator_id: int
    duration_ms: int
    slide_ms: int
    group_by: tuple[str, ...]

    @property
    def spec(self) -> str:
        """As ``--window`` takes it."""
        return f"{self.duration_ms} milliseconds,{self.slide_ms} milliseconds"


def _is_window(key: StructType) -> bool:
    field = next((f for f in key.fields if f.name == WINDOW), None)
    return field is not None and isinstance(field.data_type, StructType) and \
        {f.name for f in field.data_type.fields} >= {"start", "end"}


def window_key(ckpt: Checkpoint, progress: "QueryProgress | None" = None) -> WindowKey | None:
    """The operator reading the raw input whose state key holds a ``window`` struct (from the schema files, no Spark):
    the replayed rows enter the operators with no stateful operator upstream (the plan's order from ``progress``,
    else the checkpoint's operators as one chain, the last one first); a window further down the query is not theirs."""
    from wmcheck.checkpoint.watermarks.operators import operator_watermarks

    entries = {link.operator_id for link in operator_watermarks(ckpt, progress, []).operators if not link.upstream}
    for op in (o for o in ckpt.operators if o.operator_id in entries):
        schema = ckpt.store_schema(op.operator_id, DEFAULT_STORE)
        if schema is not None and _is_window(schema.key_schema):
            return WindowKey(op.operator_id, tuple(f.name for f in schema.key_schema.fields if f.name != WINDOW))
    return None


def window_from_bounds(bounds: Sequence[tuple[int, int]]) -> tuple[int, int] | None:
    """(size, slide) in ms from stored (start, end) pairs; None when they do not settle it."""
    sizes = {end - start for start, end in bounds}
    if len(sizes) != 1:
        return None
    size = sizes.pop()
    starts = sorted({start for start, _ in bounds})
    step = 0
    for a, b in zip(starts, starts[1:]):
        step = math.gcd(step, b - a)
    if step == 0 or size <= 0:
        return None
    slide = size if step % size == 0 else step
    if size % slide or starts[0] % slide:
        return None  # a slide that does not divide the size, or a window startTime offset
    return size, slide


def infer_window(spark: "SparkSession", ckpt: Checkpoint, key: WindowKey) -> InferredWindow:
    """The window of ``key``'s operator from the windows stored in its state (read with Spark's state reader)."""
    from pyspark.sql import functions as F

    from wmcheck.statestore.spark.reader import read_state

    rows = (read_state(spark, ckpt, key.operator_id, DEFAULT_STORE)
            .select(F.unix_millis(F.col("key.window.start")).alias("s"), F.unix_millis(F.col("key.window.end")).alias("e"))
            .distinct().collect())
    found = window_from_bounds([(r["s"], r["e"]) for r in rows])
    if found is None:
        stored = f"{len(rows)} stored window{'s do' if len(rows) != 1 else ' does'}"
        raise CheckpointError(f"the state of operator {key.operator_id} is keyed by a window, but its {stored} not "
                              "tell its size and slide", hint=WINDOW_HINT)
    return InferredWindow(key.operator_id, found[0], found[1], key.group_by)


@dataclass(frozen=True)
class Lateness:
    """How late the late rows of the replayed batches were (ms past the watermark they were judged by)."""

    late_rows: int
    min_ms: int | None
    median_ms: int | None
    p90_ms: int | None
    max_ms: int | None
    keep_ms: tuple[tuple[str, int], ...]
    """(share, extra delay) pairs: a withWatermark delay longer by this keeps that share of the late rows."""


def nearest_rank(sorted_values: Sequence[int], share: float) -> int:
    """The value at rank ceil(share * n) (1-based) of sorted values."""
    return sorted_values[max(math.ceil(share * len(sorted_values)), 1) - 1]


def lateness_of(values: Sequence[int]) -> Lateness:
    """The distribution of lateness values (pure)."""
    ordered = sorted(values)
    if not ordered:
        return Lateness(0, None, None, None, None, ())
    return Lateness(len(ordered), ordered[0], nearest_rank(ordered, 0.5), nearest_rank(ordered, 0.9), ordered[-1],
                    tuple((label, nearest_rank(ordered, share) + 1) for share, label in KEEP_SHARES))


def lateness(batches: "Sequence[ReplayBatch]", event_time: str) -> Lateness:
    """Lateness of every late row (row and window when windowed) of the replayed batches, in one Spark job."""
    from pyspark.sql import functions as F

    parts = []
    for rb in batches:
        if rb.late is None:
            raise CheckpointError(f"{arg('lateness')} needs the event-time column", hint=f"pass {arg('event_time', 'COL')}",
                                  param="event_time")
        bound = F.col("window.end") if rb.data is not rb.input else F.col(event_time)
        parts.append(rb.data.filter(rb.late).select((F.lit(rb.plan.late_watermark_ms) - F.unix_millis(bound)).alias("l")))
    if not parts:
        return lateness_of([])
    union = parts[0]
    for df in parts[1:]:
        union = union.union(df)
    return lateness_of([r["l"] for r in union.collect()])
