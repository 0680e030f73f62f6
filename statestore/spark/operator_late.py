"""Late rows per stateful operator of a replay: each operator judged by its own late-events watermark.

Replay reads a query's raw input, which only the operators reading that input see (the *entry* operators: no
stateful operator upstream of them). An entry operator's late rows are the replay's (late groups for an
aggregation, which Spark counts after its partial aggregation; input rows otherwise). Every operator after one
that passes its watermark on (aggregation, deduplication, event-time transformWithState, a stream-stream join)
drops none: Spark gives it the watermark its input was emitted under (Spark 3.5+), so nothing it receives is
behind it. After (flat)MapGroupsWithState or applyInPandasWithState, whose function may emit any event time, the
replay cannot tell. An entry (flat)MapGroupsWithState or applyInPandasWithState drops late rows only with
EventTimeTimeout, a transformWithState only in event time (:mod:`wmcheck.checkpoint.watermarks.late_filters`); where the timeout
is unknown, so is the count. Spark's own counts (``numRowsDroppedByWatermark`` of its progress reports) come alongside.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

from wmcheck.checkpoint.errors import arg
from wmcheck.checkpoint.records import dataclass
from wmcheck.checkpoint.watermarks.late_filters import operator_filter
from wmcheck.checkpoint.watermarks.operators import NONE, OperatorLink, OperatorWatermarks, operator_watermarks

if TYPE_CHECKING:
    from wmcheck.checkpoint.model import Checkpoint
    from wmcheck.checkpoint.watermarks.progress import QueryProgress
    from wmcheck.statestore.spark.replay import ReplaySummary

SPARK_COUNTS = f"Spark's own count is in its progress reports: pass them or its event log ({arg('progress', 'PATH')})"
"""Where the count the replay cannot tell is."""
GROUPED = ("stateStoreSave", "sessionWindowStateStoreSaveExec")
"""Operators Spark judges late after a partial aggregation: one late row per group."""


@dataclass(frozen=True)
class OperatorLate:
    """One operator's late rows in one replayed batch."""

    operator_id: int
    name: str | None
    late_watermark_ms: int | None
    """Its own late-events watermark in the batch (None when unknown)."""
    late_rows: int | None
    """What the replay says it dropped (None when the replay cannot tell)."""
    how: str
    spark_late_rows: int | None = None
    """Spark's ``numRowsDroppedByWatermark`` for it (from ``progress``), None without a report."""


def entry_operators(model: OperatorWatermarks) -> tuple[OperatorLink, ...]:
    """The operators that read the raw input: no stateful operator upstream of them."""
    return tuple(link for link in model.operators if not link.upstream)


def _spark_counts(progress: "QueryProgress | None", batch: int) -> Mapping[int, int]:
    """Spark's per-operator late rows of ``batch``; its report lists the stateful operators in plan order, as Spark
    numbers them (operator id = position)."""
    report = progress.get(batch) if progress is not None else None
    return {i: op.num_rows_dropped_by_watermark for i, op in enumerate(report.operators)} if report else {}


def _sources(ckpt: "Checkpoint", batch: int) -> int:
    seq = ckpt.readable_offsets(batch) if batch in ckpt.offset_id_set else None
    return len(seq.sources) if seq else 0


def operator_late_rows(ckpt: "Checkpoint", rows: Sequence["ReplaySummary"],
                       progress: "QueryProgress | None" = None) -> list[tuple[OperatorLate, ...]]:
    """For each replayed batch, every operator's late rows."""
    model = operator_watermarks(ckpt, progress, [r.batch for r in rows])
    entries = entry_operators(model)
    plans = sorted(progress.plans.values(), key=lambda p: p.batch_id) if progress is not None else []
    filters = {link.operator_id: operator_filter(ckpt, link.operator_id, plans) for link in entries}
    out = []
    for row in rows:
        batch = model.batch(row.batch)
        spark = _spark_counts(progress, row.batch)
        ops = []
        for link in model.operators:
            own = batch.of(link.operator_id) if batch else None
            late_ms = own.late_ms if own else None
            upstream = model.upstream(link.operator_id, rows=True)
            blocked = next((u for u in upstream if u.output == NONE), None)
            if link in entries:
                rule = filters.get(link.operator_id)
                if len(entries) > 1:
                    late, how = None, ("several operators read the raw input: the replay cannot tell which rows each "
                                       "got" + ("" if link.operator_id in spark else f"; {SPARK_COUNTS}"))
                elif rule is not None and not rule.drops:
                    late, how = (0 if rule.drops is False else None), rule.reason
                elif link.name in GROUPED:
                    late, how = row.late_groups, "late groups of the replayed input (Spark counts one per group)"
                else:
                    late, how = row.late_rows, "late rows of the replayed input"
                if rule is not None and not rule.drops:
                    pass
                elif late is None and len(entries) == 1:
                    how += ": pass the event-time column" + (" and the window" if link.name in GROUPED else "")
                elif _sources(ckpt, row.batch) > 1:
                    how += f" of source {row.source_id} (Spark's count covers every input)"
            elif late_ms == 0:
                late, how = 0, "0: its late-events watermark is 0, so nothing it receives is behind it"
            elif blocked is not None:
                late, how = None, (f"its input comes from {blocked.label}'s function, which may emit any event time: "
                                   "the replay cannot tell" + ("" if link.operator_id in spark else f"; {SPARK_COUNTS}"))
            else:
                late, how = 0, (f"0: {', '.join(j.label for j in upstream) or 'the operators upstream'} emit nothing at or "
                                "before the watermark they pass on")
            ops.append(OperatorLate(link.operator_id, link.name, late_ms, late, how, spark.get(link.operator_id)))
        out.append(tuple(ops))
    return out
