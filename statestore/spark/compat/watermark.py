"""The watermark under the new code: the one the re-run batch ran with, the one Spark computed after it (old code,
new code), each input's ``withWatermark`` delay (the old query's plan in its event log records the old ones, else the
checkpoint's state schemas, as the state was created), the pinned multiple-watermark policy, and which rows of the
recorded batches the new delay would have judged late otherwise (the global watermark, recomputed over the replayed
input)."""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Mapping, Sequence

from wmcheck.checkpoint.batch_inputs import oldest_replayable
from wmcheck.checkpoint.errors import CheckpointError, arg
from wmcheck.checkpoint.model import Checkpoint
from wmcheck.checkpoint.timeutil import format_duration
from wmcheck.checkpoint.watermarks.plans import BatchPlan
from wmcheck.statestore.formats.schema import event_time_field
from wmcheck.statestore.spark.compat.explain import store_schemas
from wmcheck.statestore.spark.compat.query import NewQuery, SourceSpec, WatermarkSpec
from wmcheck.statestore.spark.compat.results import LateRows, RowSample, WatermarkChange, WatermarkDelay
from wmcheck.statestore.spark.late_rows import window_from_bounds, window_key

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

POLICY = "spark.sql.streaming.multipleWatermarkPolicy"
SAMPLES = 5
STATE = "the state schema"
LATE_BATCHES = 20
"""How many recorded batches (up to the re-run one) the late-row comparison replays."""


def old_delays(ckpt: Checkpoint) -> dict[str, int]:
    """Watermark delays the checkpoint's state schemas record (column -> ms), as written when the state was created."""
    out: dict[str, int] = {}
    for _, _, _, cf in store_schemas(ckpt):
        for schema in (cf.key_schema, cf.value_schema):
            found = event_time_field(schema)
            if found is not None:
                out.setdefault(found.path[0], found.delay_ms)
    return out


def _state_delays(ckpt: Checkpoint, new: Sequence[WatermarkSpec]) -> tuple[WatermarkDelay, ...]:
    """Each watermark's old delay from the state schemas: the delay of its column, or the only one recorded where the
    new query has one watermark. Several watermarked inputs (a union, a join) leave one event-time column in the state,
    with one input's delay: their own old delays are unknown (None)."""
    old = old_delays(ckpt)
    if len(new) > 1 and (len(old) < len(new) or len({w.column for w in new}) < len(new)):
        return tuple(WatermarkDelay(w.column, None, w.delay_ms, w.sources) for w in new)
    single = next(iter(old.values())) if len(set(old.values())) == 1 and len(new) == 1 else None
    return tuple(WatermarkDelay(w.column, found, w.delay_ms, w.sources, STATE if found is not None else None)
                 for w in new for found in [old.get(w.column, single)])


def _plan_of(plans: Mapping[int, BatchPlan], batch: int) -> BatchPlan | None:
    """The plan of ``batch``, else of the latest batch before it whose plan has a watermark node."""
    return next((plans[b] for b in sorted(plans, reverse=True) if b <= batch and plans[b].watermarks), None)


def delays(ckpt: Checkpoint, new: Sequence[WatermarkSpec], plans: Mapping[int, BatchPlan] | None = None,
           batch: int = 0) -> tuple[tuple[WatermarkDelay, ...], tuple[str, ...]]:
    """Each of the new query's watermarks with its own old delay, and notes. With the old query's plans (its event
    log), the old delays are those of the plan's EventTimeWatermark nodes, matched to the new query's in plan order
    (pre-order, left to right: the order of the inputs) when their number and columns agree. Else the state schemas'
    (:func:`_state_delays`)."""
    if plans is None or not new:
        return _state_delays(ckpt, new), ()
    plan = _plan_of(plans, batch)
    if plan is None:
        return _state_delays(ckpt, new), (f"the event log holds no plan of batch {batch} or before with a withWatermark: "
                                          "the old delays are the state schema's",)
    old = plan.watermarks
    shown = ", ".join(f"{w.column} {format_duration(w.delay_ms)}" if w else "unreadable" for w in old)
    if len(old) != len(new) or any(o is None or o.column != w.column for o, w in zip(old, new)):
        return _state_delays(ckpt, new), (
            f"the plan of batch {plan.batch_id} has {len(old)} withWatermark(s) ({shown}), the new query {len(new)} "
            f"({', '.join(w.column for w in new)}): they are not matched input by input, and the old delays are the "
            "state schema's",)
    origin = f"the plan of batch {plan.batch_id}"
    return tuple(WatermarkDelay(w.column, o.delay_ms, w.delay_ms, w.sources, origin)
                 for o, w in zip(old, new) if o is not None), ()


def _next(ckpt: Checkpoint, batch: int) -> int | None:
    if batch not in set(ckpt.commit_ids):
        return None
    return ckpt.commit(batch).next_batch_watermark_ms


def watermark_change(ckpt: Checkpoint, copy: Checkpoint | None, batch: int, query: NewQuery,
                     session_policy: str | None, plans: Mapping[int, BatchPlan] | None = None) -> WatermarkChange:
    """The watermark of ``batch`` and the one after it (the old code's in ``ckpt``, the new code's in ``copy``), each
    watermark's delay old and new (the old ones from ``plans``, the old query's plans in its event log, where given),
    and the pinned policy."""
    meta = ckpt.offsets(batch).metadata
    pinned = meta.conf.get(POLICY) if meta is not None else None
    notes = []
    if session_policy and pinned and session_policy.lower() != pinned.lower():
        notes.append(f"the session sets {POLICY}={session_policy}, but the checkpoint pins {pinned}: a restart keeps "
                     f"{pinned} (Spark restores the confs pinned in offsets/ over the session's)")
    found, why = delays(ckpt, query.watermarks, plans, batch)
    notes += why
    if len(found) > 1 and all(d.old_ms is None for d in found):
        notes.append(f"the new query has {len(found)} watermarked inputs and the checkpoint's state records one delay "
                     "for them: each input's old delay is unknown (the old query's plan in Spark's event log records it: "
                     f"{arg('progress', 'EVENTLOG')}), and a change of delay shows in the watermark after the batch (old "
                     "code against new) only where that input sets it in the batch re-run")
    return WatermarkChange(meta.batch_watermark_ms if meta else 0, _next(ckpt, batch),
                           _next(copy, batch) if copy is not None else None, found, pinned, session_policy, None,
                           tuple(notes))


def _window(ckpt: Checkpoint) -> tuple[int, int] | None:
    """The windowed aggregation's window (size, slide in ms) from its stored windows, read without a JVM."""
    from datetime import datetime, timezone

    from wmcheck.statestore.engine.python_engine import read_stores
    from wmcheck.statestore.output.rows import pylist

    key = window_key(ckpt)
    if key is None:
        return None
    bounds = set()
    for read in read_stores(ckpt, key.operator_id):
        for row in pylist(read.raw.select(["key"])):
            window = row["key"]["window"]
            ms = [int(v.replace(tzinfo=timezone.utc).timestamp() * 1000) if isinstance(v, datetime) else int(v) // 1000
                  for v in (window["start"], window["end"])]
            bounds.add((ms[0], ms[1]))
    return window_from_bounds(sorted(bounds))


def _ddl(schema_json: str | None) -> str | None:
    if schema_json is None:
        return None
    import json

    from pyspark.sql.types import StructType

    schema = StructType.fromJson(json.loads(schema_json))
    return ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in schema.fields)


def late_rows(spark: "SparkSession", ckpt: Checkpoint, batch: int, source: SourceSpec, column: str, old_ms: int,
              new_ms: int, fs_options: dict[str, str] | None = None) -> LateRows:
    """Rows of the recorded batches up to ``batch`` that the new delay judges late where the old did not, and the
    reverse: the global watermark recomputed with ``new_ms`` over the replayed input of ``source`` (the first
    replayed batch starts from its recorded watermark moved by the change of delay)."""
    from pyspark.sql import functions as F

    from wmcheck.statestore.spark.late_rule import with_lateness
    from wmcheck.statestore.spark.replay import ReplayOptions, prepare, read_batches

    first = max(oldest_replayable(ckpt) or 0, batch - LATE_BATCHES + 1)
    window = _window(ckpt)
    opts = ReplayOptions(source=source.source_id, source_format=source.format, schema=_ddl(source.schema),
                         options=dict(source.options), event_time=column,
                         window=f"{window[0]} milliseconds,{window[1]} milliseconds" if window else None,
                         fs_options=fs_options or {})
    batches = list(read_batches(spark, prepare(ckpt, first, batch, opts), opts))
    maxima = {}
    if batches:
        union = None
        for rb in batches:
            part = rb.input.select(F.lit(rb.batch_id).alias("b"), F.unix_millis(F.col(column)).alias("t"))
            union = part if union is None else union.union(part)
        assert union is not None
        maxima = {r["b"]: r["m"] for r in union.groupBy("b").agg(F.max("t").alias("m")).collect()}
    shift = old_ms - new_ms
    new_late: dict[int, int] = {}
    if batches:
        head = batches[0].plan
        started = head.batch_id > 0
        # before the first replayed batch only its recorded watermarks are known: moved by the change of delay
        previous = max((head.late_watermark_ms or 0) + shift, 0) if started else 0
        current = max(head.watermark_ms + shift, 0) if started else 0
        seen = head.watermark_ms + old_ms if started and head.watermark_ms > 0 else None
        for rb in batches:
            new_late[rb.batch_id] = previous  # Spark 3.4+: late by the watermark of the batch before
            top = maxima.get(rb.batch_id)
            if top is not None:
                seen = top if seen is None else max(seen, top)
            following = max(current, seen - new_ms) if seen is not None else current
            previous, current = current, following
    parts = []
    for rb in batches:
        data, old_late = with_lateness(rb.input, column, rb.plan.late_watermark_ms or 0, opts.window)
        _, now_late = with_lateness(rb.input, column, new_late[rb.batch_id], opts.window)
        parts.append(data.select(F.lit(rb.batch_id).alias("batch"), old_late.alias("old_late"), now_late.alias("new_late"),
                                 F.to_json(F.struct(*[F.col(f"`{c}`") for c in rb.input.columns])).alias("row")))
    if not parts:
        return LateRows((first, batch), 0, 0, 0, note="no recorded batch to replay")
    union_rows = parts[0]
    for df in parts[1:]:
        union_rows = union_rows.union(df)
    totals = union_rows.agg(F.count("*").alias("n"), F.sum(F.col("old_late").cast("int")).alias("o"),
                            F.sum(F.col("new_late").cast("int")).alias("w")).collect()[0]
    import json

    flipped = union_rows.filter(F.col("old_late") != F.col("new_late")).limit(2 * SAMPLES).collect()
    samples = tuple(RowSample("old" if r["old_late"] else "new", {"batch": r["batch"], **json.loads(r["row"])})
                    for r in flipped)
    size = f", by the end of its {format_duration(window[0])} window" if window and window[0] == window[1] else \
        f", by the end of its {format_duration(window[0])} window every {format_duration(window[1])}" if window else ""
    return LateRows((first, batch), totals["n"] or 0, totals["o"] or 0, totals["w"] or 0, samples,
                    note=f"the global watermark over the recorded input of source {source.source_id}{size}")


def with_late_rows(spark: "SparkSession", ckpt: Checkpoint, batch: int, query: NewQuery, change: WatermarkChange,
                   fs_options: dict[str, str] | None = None) -> WatermarkChange:
    """``change`` with its late rows, when one watermarked file source's delay changed; else a note why not."""
    moved = [d for d in change.delays if d.old_ms is not None and d.new_ms is not None and d.old_ms != d.new_ms]
    if not moved:
        return change
    files = [s for s in query.sources if s.format in ("json", "csv", "parquet", "orc", "text", "avro")]
    if len(moved) > 1 or len(files) != 1 or len(query.sources) != 1:
        return replace(change, notes=change.notes + ("late rows are compared for one watermarked file source only",))
    delay = moved[0]
    try:
        found = late_rows(spark, ckpt, batch, files[0], delay.column, int(delay.old_ms or 0), int(delay.new_ms or 0),
                          fs_options)
    except CheckpointError as exc:
        return replace(change, notes=change.notes + (f"late rows not compared: {exc.message}",))
    return replace(change, late=found)
