"""Spark's progress reports (``StreamingQueryProgress``): parsed from event logs or JSON lines, matched to a checkpoint.

Parsing is pure (bytes in, frozen dataclasses out). Two inputs give the same records: the
``QueryProgressEvent`` lines of a Spark event log (``spark.eventLog.dir``) and a JSON-lines file of
progress objects (``query.lastProgress`` / ``StreamingQueryProgress.json`` / listener output).
Reading files, compressed or rolled as Spark writes them, is :mod:`wmcheck.checkpoint.watermarks.progress_files`.
"""
from __future__ import annotations

import json
from dataclasses import field
from datetime import datetime
from typing import Any, Iterable, Mapping

from wmcheck.checkpoint.errors import MalformedFileError
from wmcheck.checkpoint.records import dataclass
from wmcheck.checkpoint.watermarks.plans import (
    ENVIRONMENT,
    SQL_START,
    BatchPlan,
    batch_plan,
    environment_allow_multiple,
)

PROGRESS_EVENT = "org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent"


@dataclass(frozen=True)
class SourceProgress:
    """One source of a batch: its description (``FileStreamSource[file:/in]``, ``KafkaV2[Subscribe[t]]``),
    offsets as JSON text, and rows read."""

    description: str
    start_offset: str | None
    end_offset: str | None
    num_input_rows: int


@dataclass(frozen=True)
class OperatorProgress:
    """One stateful operator of a batch."""

    name: str
    num_rows_total: int
    num_rows_updated: int
    num_rows_dropped_by_watermark: int


@dataclass(frozen=True)
class BatchProgress:
    """One progress report: a batch of one run of a query."""

    query_id: str
    run_id: str
    batch_id: int
    timestamp_ms: int | None
    num_input_rows: int
    event_time_min_ms: int | None
    event_time_max_ms: int | None
    event_time_avg_ms: int | None
    watermark_ms: int | None
    sources: tuple[SourceProgress, ...]
    operators: tuple[OperatorProgress, ...]
    durations_ms: tuple[tuple[str, int], ...]

    @property
    def rows_dropped_by_watermark(self) -> int:
        return sum(op.num_rows_dropped_by_watermark for op in self.operators)

    @property
    def state_rows(self) -> int:
        return sum(op.num_rows_total for op in self.operators)


@dataclass(frozen=True)
class QueryProgress:
    """The reports of one query, by batch id (a batch reported twice, e.g. re-run after a restart, keeps the later),
    and, from an event log, the physical plans of its batches."""

    query_id: str
    run_ids: tuple[str, ...]
    batches: Mapping[int, BatchProgress]
    plans: Mapping[int, BatchPlan] = field(default_factory=dict)

    def get(self, batch: int) -> BatchProgress | None:
        return self.batches.get(batch)


@dataclass(frozen=True)
class EventRecords:
    """What a progress file or event log holds, of any query: progress reports and batch plans."""

    reports: tuple[BatchProgress, ...]
    plans: tuple[BatchPlan, ...] = ()

    def __add__(self, other: "EventRecords") -> "EventRecords":
        return EventRecords(self.reports + other.reports, self.plans + other.plans)


def iso_ms(text: Any) -> int | None:
    """``2024-01-01T00:00:05.000Z`` (as Spark formats progress times) -> epoch ms."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def _offset_text(value: Any) -> str | None:
    """Offsets are JSON objects in ``progress.json`` and JSON strings in event logs: one text form."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def batch_progress(obj: Mapping[str, Any]) -> BatchProgress:
    """One ``StreamingQueryProgress`` object (already decoded JSON)."""
    sources = tuple(
        SourceProgress(str(s.get("description", "")), _offset_text(s.get("startOffset")), _offset_text(s.get("endOffset")),
                       _int(s.get("numInputRows")))
        for s in obj.get("sources") or () if isinstance(s, Mapping)
    )
    operators = tuple(
        OperatorProgress(str(o.get("operatorName", "")), _int(o.get("numRowsTotal")), _int(o.get("numRowsUpdated")),
                         _int(o.get("numRowsDroppedByWatermark")))
        for o in obj.get("stateOperators") or () if isinstance(o, Mapping)
    )
    event_time = obj.get("eventTime") or {}
    durations = obj.get("durationMs") or {}
    rows = obj.get("numInputRows")
    return BatchProgress(
        query_id=str(obj["id"]),
        run_id=str(obj.get("runId", "")),
        batch_id=int(obj["batchId"]),
        timestamp_ms=iso_ms(obj.get("timestamp")),
        num_input_rows=_int(rows) if rows is not None else sum(s.num_input_rows for s in sources),
        event_time_min_ms=iso_ms(event_time.get("min")),
        event_time_max_ms=iso_ms(event_time.get("max")),
        event_time_avg_ms=iso_ms(event_time.get("avg")),
        watermark_ms=iso_ms(event_time.get("watermark")),
        sources=sources,
        operators=operators,
        durations_ms=tuple(sorted((str(k), _int(v)) for k, v in durations.items())),
    )


def _is_progress(obj: Mapping[str, Any]) -> bool:
    return isinstance(obj.get("batchId"), int) and isinstance(obj.get("id"), str)


def parse_event_lines(data: bytes, path: str) -> EventRecords:
    """The progress reports and batch plans in an event log or a JSON-lines file (other events are skipped).

    A line that is not JSON fails with its line number, except a cut-off last line (a log still
    being written, ``.inprogress``).
    """
    reports, plans = [], []
    allow_multiple = None
    lines = data.decode("utf-8", errors="replace").splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            if number == len(lines):
                break
            raise MalformedFileError("expected one JSON object per line (a Spark event log or StreamingQueryProgress "
                                     "JSON lines)", path=path, line=number,
                                     hint="pass the file Spark wrote under spark.eventLog.dir, or query.lastProgress "
                                          "objects one per line") from None
        if not isinstance(obj, dict):
            continue
        event = obj.get("Event")
        if event == SQL_START:
            plan = batch_plan(obj, allow_multiple)
            if plan is not None:
                plans.append(plan)
            continue
        if event == ENVIRONMENT:
            allow_multiple = environment_allow_multiple(obj)
            continue
        if event == PROGRESS_EVENT and isinstance(obj.get("progress"), dict):
            obj = obj["progress"]
        if _is_progress(obj):
            reports.append(batch_progress(obj))
    return EventRecords(tuple(reports), tuple(plans))


def parse_progress_lines(data: bytes, path: str) -> list[BatchProgress]:
    """The progress reports in an event log or a JSON-lines file (see :func:`parse_event_lines`)."""
    return list(parse_event_lines(data, path).reports)


def query_progress(query_id: str, reports: Iterable[BatchProgress], plans: Iterable[BatchPlan] = ()) -> QueryProgress:
    """The reports (and plans) of ``query_id``, by batch id; a batch reported by several runs keeps the latest one."""
    batches: dict[int, BatchProgress] = {}
    runs: dict[str, None] = {}
    for report in sorted((r for r in reports if r.query_id == query_id), key=lambda r: (r.timestamp_ms or 0, r.batch_id)):
        batches[report.batch_id] = report
        runs[report.run_id] = None
    by_batch: dict[int, BatchPlan] = {}
    for plan in sorted((p for p in plans if p.query_id == query_id), key=lambda p: (p.time_ms or 0, p.batch_id)):
        by_batch[plan.batch_id] = plan
    return QueryProgress(query_id, tuple(runs), dict(sorted(batches.items())), dict(sorted(by_batch.items())))
