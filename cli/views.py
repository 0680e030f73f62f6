"""The human (table) form of each result: labelled fields, titled tables and display columns."""
from __future__ import annotations

from datetime import timezone, tzinfo
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from wmcheck.checkpoint.logs.source_offsets import SourceOffset
from wmcheck.checkpoint.records import dataclass
from wmcheck.checkpoint.source_labels import SourceLabel
from wmcheck.checkpoint.sources.registry import kind_named
from wmcheck.checkpoint.timeutil import format_duration, format_ms
from wmcheck.statestore.formats.registry import FORMATS

from .fixes import fix_doc, fix_text

if TYPE_CHECKING:

    from wmcheck.checkpoint.batch_inputs import BatchInput, ReplayPlan, SourceInput
    from wmcheck.checkpoint.checks.definition import Finding
    from wmcheck.checkpoint.summary import BatchRow, CheckpointSummary, OperatorSummary
    from wmcheck.checkpoint.watermarks.stall import SourceActivity
    from wmcheck.statestore.spark.operator_late import OperatorLate
    from wmcheck.statestore.spark.replay import ReplaySummary
    from wmcheck.statestore.summary import StateSummary
    from wmcheck.statestore.targets import Target

Fields = list[tuple[str, Any]]
Table = tuple[str, Sequence[Any], Sequence[str]]
"""(title, rows, columns)"""


@dataclass(frozen=True)
class RowView:
    """How a table shows a list of results: its columns and one display row per result."""

    columns: Sequence[str]
    row: Callable[[Any], Mapping[str, Any]]


OPERATOR_COLUMNS = ["operator_id", "name", "stores", "num_partitions", "min_version", "max_version", "bytes",
                    *(f.plural for f in FORMATS), "next_version", "next_version_loadable"]


def checkpoint_summary(s: CheckpointSummary, tz: tzinfo | None = None) -> tuple[Fields, list[Table]]:
    """``wmcheck show``."""
    worst = s.verdict.worst
    fields: Fields = [
        ("restarts", s.verdict.text),
        ("worst finding", f"{worst.severity} {worst.line}" if worst else "none"),
        *[("warning", w) for w in s.warnings],
        ("query id", s.query_id),
        ("location", s.location),
        ("batches", _batches(s)),
        ("last committed", s.last_committed_batch if s.last_committed_batch is not None else "none"),
        ("pending batch", s.pending_batch if s.pending_batch is not None else "none"),
        ("next batch", s.next_batch),
        ("watermark", f"{s.watermark_ms} ({s.watermark})"),
        ("watermark lag", format_duration(s.watermark_lag_ms)),
        *[(key.replace("_", " "), value) for key, value in s.conf.items() if value is not None],
        ("next batch partitions", s.next_batch_partitions),
        *[("repartition", f"batch {r.batch}: {r.from_} -> {r.to} partitions") for r in s.repartitions],
        *[("note", f"operator {op.operator_id}: {op.metadata_lag}") for op in s.operators if op.metadata_lag],
        *[(f.severity, f.line) for f in s.findings[1:]],
        ("watermark stall", s.watermark_stall.explanation if s.watermark_stall else "none"),
        *[("operator stall", stall.explanation) for stall in s.operator_stalls],
    ]
    operators = [{**op.files, "name": op.label, **{c: getattr(op, c) for c in OPERATOR_COLUMNS if c not in op.files and c != "name"}}
                 for op in s.operators]
    tables: list[Table] = [("Sources", s.sources, ["source_id", "kind", "location", "summary"]),
                           ("Stateful operators", operators, OPERATOR_COLUMNS)]
    if s.operators:
        own = [{"operator_id": op.operator_id, "name": op.label,
                "late watermark": _late(op, tz),
                "eviction watermark": _own(op.eviction_watermark_ms, s.watermark_ms, tz),
                "from": op.watermark_source,
                "how": "; ".join(n for n in (op.watermark_note, op.late_input_note) if n) or None} for op in s.operators]
        tables.append((f"Operator watermarks (batch {s.next_batch})", own, OPERATOR_WATERMARK_COLUMNS))
    return fields, tables


def _batches(s: CheckpointSummary) -> str:
    """``0..12``, and where the last offsets files are broken, which batch the rest describes."""
    if s.last_batch is None:
        return "none"
    span = f"{s.first_batch}..{s.last_batch}"
    if s.shown_batch == s.last_batch:
        return span
    broken = "offsets/" + (f"{s.last_batch}" if s.shown_batch == s.last_batch - 1 else
                           f"{(s.shown_batch + 1) if s.shown_batch is not None else s.first_batch}..{s.last_batch}")
    rest = f"the rest describes batch {s.shown_batch}" if s.shown_batch is not None else "no batch can be described"
    return f"{span} ({broken} broken, see the warning: {rest})"


OPERATOR_WATERMARK_COLUMNS = ["operator_id", "name", "late watermark", "eviction watermark", "from", "how"]


def _own(value: int | None, global_ms: int | None, tz: tzinfo | None = None) -> str:
    """An operator's own watermark as a time (epoch ms in JSON and CSV), and how far it is from the global one when
    it differs."""
    if value is None:
        return "unknown"
    shown = format_ms(value, tz or timezone.utc)
    if global_ms is None or value == global_ms:
        return str(shown)
    return f"{shown} ({(value - global_ms) / 1000:+.3f}s)"


def _late(op: "OperatorSummary", tz: tzinfo | None = None) -> str:
    return _late_of(op.drops_late_input, op.late_watermark_ms, tz)


def _late_of(drops: bool | None, late_ms: int | None, tz: tzinfo | None = None) -> str:
    """An operator's late-events watermark, or that it drops no late input (a group-state operator without an
    event-time timeout), or that whether it drops any is unknown."""
    if drops is False:
        return "drops none"
    shown = _own(late_ms, None, tz)
    return shown if drops else f"{shown} (if it drops any)"


def _batch_row(r: BatchRow, tz: tzinfo | None = None) -> dict[str, Any]:
    return {
        "batch": r.batch,
        "committed": r.committed,
        "kind": r.kind,
        "watermark": f"{r.batch_watermark_ms} ({r.batch_watermark})" if r.batch_watermark_ms is not None else None,
        "next watermark": format_ms(r.next_batch_watermark_ms, tz or timezone.utc),
        "advanced": format_duration(r.watermark_advance_ms),
        "timestamp": r.batch_timestamp,
        "lag": format_duration(r.lag_ms),
        "sources": [_source_cell(a) for a in r.source_activity],
        "rows": r.progress.num_input_rows if r.progress else None,
        "max event time": format_ms(r.progress.event_time_max_ms) if r.progress else None,
        "late rows": r.progress.rows_dropped_by_watermark if r.progress else None,
    }


def _source_cell(a: SourceActivity) -> str:
    """``1 file …/input/right: log batch 3`` and whether the batch brought new data from it."""
    label = SourceLabel(a.source_id, a.kind, a.location).short
    brought = "new data" if a.new_data else "no rows" if a.new_offsets else "no new data"
    return f"{label}: {SourceOffset(a.source_id, a.offset).summary()} ({brought})"


BATCH_COLUMNS = ["batch", "committed", "kind", "watermark", "next watermark", "advanced", "timestamp", "lag", "sources"]
PROGRESS_COLUMNS = ["rows", "max event time", "late rows"]
"""Spark's progress report of each batch (``--progress``): no column without one."""


def batches(rows: Sequence[BatchRow], tz: tzinfo | None = None) -> RowView:
    """``wmcheck batches``: times in ``tz``; Spark's progress when a batch has one; with operator watermarks, one
    column per operator (late / eviction watermark)."""
    ids = sorted({o.operator_id for r in rows for o in r.operators or ()})
    progress = PROGRESS_COLUMNS if any(r.progress for r in rows) else []

    def row(r: BatchRow) -> dict[str, Any]:
        out = _batch_row(r, tz)
        for o in r.operators or ():
            out[f"operator {o.operator_id} late / evict"] = (f"{_late_of(o.drops_late_input, o.late_ms, tz)} / "
                                                            f"{_own(o.evict_ms, r.batch_watermark_ms, tz)}")
        return out

    return RowView([*BATCH_COLUMNS, *progress, *(f"operator {i} late / evict" for i in ids)], row)

def behind_watermark(ms: int | None) -> str | None:
    """How far the watermark is past an event time; one the watermark has not reached yet is ``ahead by 5s``
    (JSON and CSV: the signed milliseconds)."""
    if ms is None or ms >= 0:
        return format_duration(ms)
    return f"ahead by {format_duration(-ms)}"


STORE_COLUMNS = ["operator_id", "operator", "store", "rows", "per partition", "event-time column",
                 "older than watermark", "oldest event time", "behind watermark"]
BAR = 40


def state_summary(s: StateSummary, tz: tzinfo | None = None) -> tuple[Fields, list[Table]]:
    """``wmcheck state``: times in ``tz`` (epoch ms in JSON and CSV)."""
    fields: Fields = [
        ("checkpoint", s.checkpoint),
        ("batch", f"{s.batch} (state written by batch {s.state_batch_id})"),
        ("watermark", f"{s.watermark_ms} ({s.watermark}, {s.watermark_from})"),
        ("engine", s.engine),
    ]
    rows = [{
        "operator_id": st.operator_id,
        "operator": st.operator_label,
        "store": st.store,
        "rows": st.rows,
        "per partition": " ".join(f"{p}:{n}" for p, n in st.rows_per_partition.items()),
        "event-time column": st.event_time_column or "none: never evicted",
        "older than watermark": st.older_than_watermark if st.evictable else "never evicted",
        "oldest event time": st.oldest_event_time if st.event_time_column else "none",
        "behind watermark": behind_watermark(st.oldest_behind_watermark_ms) if st.event_time_column else "none",
    } for st in s.stores]
    tables: list[Table] = [
        ("Stores", rows, STORE_COLUMNS),
        ("Eviction", [{"operator_id": st.operator_id, "store": st.store, "rule": st.eviction,
                       "watermark": format_ms(st.watermark_ms, tz or timezone.utc) or "unknown",
                       "watermark from": st.watermark_from or "unknown"} for st in s.stores],
         ["operator_id", "store", "watermark", "watermark from", "rule"]),
    ]
    for st in s.stores:
        if st.histogram and st.rows:
            top = max(b.rows for b in st.histogram) or 1
            bars = [{"bucket": b.bucket, "rows": b.rows, "histogram": "#" * max(1, round(BAR * b.rows / top))}
                    for b in st.histogram if b.rows]
            tables.append((f"Operator {st.operator_id} {st.store}: event time minus watermark (rows)", bars,
                           ["bucket", "rows", "histogram"]))
    return fields, tables


STATE_ROW_COLUMNS = ["operator_id", "store", "partition_id", "key", "value", "event_time_ms"]


def state_rows(targets: Mapping[tuple[int, str], Target], notes: Sequence[str], tz: tzinfo) -> tuple[str, RowView]:
    """``wmcheck state --older-than-watermark``: a title (each operator's watermark, stores never evicted) and the row
    view; ``targets`` by (operator id, store): each store is judged by its operator's own watermark."""
    shown: dict[str, None] = {}
    for (operator_id, _), t in targets.items():
        whose = f"operator {operator_id}: " if t.operator_id is not None and len({o for o, _ in targets}) > 1 else ""
        shown[f"{whose}watermark {t.watermark_ms} ({format_ms(t.watermark_ms, tz)}, {t.watermark_from})"] = None
    title = "\n".join([*shown, *notes])

    def row(r: Mapping[str, Any]) -> dict[str, Any]:
        ms = r["event_time_ms"]
        wm = targets[(r["operator_id"], r["store"])].watermark_ms
        return {**r, "event time": format_ms(ms, tz), "behind watermark": behind_watermark(None if ms is None else wm - ms)}

    return title, RowView(["operator_id", "store", "partition_id", "key", "value", "event time", "behind watermark"], row)


FINDING_FIELDS = ["code", "severity", "checkpoint", "path", "message", "fix"]
FINDINGS = RowView(["severity", "code", "path", "message", "fix"], lambda f: {
    "severity": f.severity, "code": f.code, "path": f.path, "message": f.message, "fix": fix_text(f.fix, f.checkpoint)})


def finding_doc(finding: Finding) -> dict[str, Any]:
    """A finding in JSON: its fields, the fix as :func:`~.fixes.fix_doc` gives it."""
    return {"code": finding.code, "severity": finding.severity, "checkpoint": finding.checkpoint, "path": finding.path,
            "message": finding.message, "fix": fix_doc(finding.fix, finding.checkpoint)}


PLAN_COLUMNS = ["batch", "committed", "watermark", "late watermark", "source", "kind", "input", "files", "bytes",
                "missing", "note"]
PLAN_CSV_COLUMNS = ["batch_id", "committed", "watermark_ms", "late_watermark_ms", "source_id", "kind", "start", "end",
                    "num_files", "bytes", "missing_files", "starting_offsets_json", "ending_offsets_json", "records",
                    "replayable", "note", "files"]
FILE_COLUMNS = ["batch", "source", "log batch", "location", "size", "exists"]
KAFKA_COLUMNS = ["batch", "source", "topic", "partition", "from", "to", "records"]
RETAINED_COLUMNS = [*KAFKA_COLUMNS, "earliest now", "retained"]
REPLAY_COLUMNS = ["batch", "committed", "watermark_ms", "late_watermark_ms", "source_id", "files", "missing_files",
                  "rows", "late_rows", "on_time_rows", "late_groups", "kept_rows", "operators"]


def plan_sources(plan: ReplayPlan) -> list[tuple[BatchInput, SourceInput]]:
    """(batch, source) pairs of a replay plan."""
    return [(b, s) for b in plan.batches for s in b.sources]


def replay_plan(plan: ReplayPlan, tz: tzinfo) -> tuple[Fields, list[Table]]:
    """``wmcheck replay --plan``."""
    rows = plan_sources(plan)
    table = [{
        "batch": b.batch_id, "committed": b.committed, "watermark": f"{b.watermark_ms} ({format_ms(b.watermark_ms, tz)})",
        "late watermark": f"{b.late_watermark_ms} ({format_ms(b.late_watermark_ms, tz)})", "source": s.source_id,
        "kind": s.kind, "input": kind_named(s.kind).input_text(s),
        **dict(zip(("files", "bytes", "missing"), kind_named(s.kind).input_counts(s))), "note": s.note,
    } for b, s in rows]
    files = [{"batch": b.batch_id, "source": s.source_id, "log batch": f.log_batch, "location": f.location,
              "size": f.size, "exists": f.exists} for b, s in rows for f in s.files]
    from wmcheck.checkpoint.kafka_retention import partition_ranges  # replay's alone (start-up of the others)

    retention = plan.kafka_retention
    kafka = []
    for b, s in rows:
        for r in partition_ranges(s):
            row = {"batch": b.batch_id, "source": s.source_id, "topic": r.topic, "partition": r.partition,
                   "from": "earliest" if r.records is None else r.start, "to": r.end, "records": r.records}
            if retention is not None:
                now = retention.earliest_of(r.topic, r.partition)
                row.update({"earliest now": "gone" if now is None else now,
                            "retained": r.records is None or r.start >= r.end or (now is not None and r.start >= now)})
            kafka.append(row)
    first, last = (plan.batches[0].batch_id, plan.batches[-1].batch_id) if plan.batches else (None, None)
    fields: Fields = [("checkpoint", plan.checkpoint), ("batches", f"{first}..{last}"),
                      ("oldest replayable", plan.oldest_replayable_batch)]
    if retention is not None:
        fields.append(("kafka retention", retention.line))
    missing = sum(not f.exists for _, s in rows for f in s.files)
    if missing:
        fields.append(("missing files", f"{missing} of the {len(files)} logged input files are not where the logs say: if the "
                       "input moved, pass --path-map OLD=NEW (what wmcheck check's relocate fix names), or --skip-missing"))
    tables: list[Table] = [("Batches", table, PLAN_COLUMNS), ("Files", files, FILE_COLUMNS)]
    if kafka:
        tables.append(("Kafka offsets", kafka, KAFKA_COLUMNS if retention is None else RETAINED_COLUMNS))
    return fields, tables


REPLAY_HEADERS = {"watermark_ms": "watermark", "late_watermark_ms": "late watermark", "source_id": "source",
                  "missing_files": "missing files", "late_rows": "late rows", "on_time_rows": "on-time rows",
                  "late_groups": "late groups", "kept_rows": "kept rows"}
"""The table's headers in words (as ``batches`` has them); JSON and CSV keep the keys."""


def _operator_late(o: OperatorLate) -> str:
    """``operator 0: 0 late (Spark: 0)``: the replay's late rows of one operator beside Spark's."""
    late = "?" if o.late_rows is None else str(o.late_rows)
    return f"operator {o.operator_id}: {late} late" + (f" (Spark: {o.spark_late_rows})" if o.spark_late_rows is not None else "")


def replay_rows(tz: tzinfo) -> RowView:
    """``wmcheck replay``: one row per batch and source, watermarks with their time, headers in words."""
    def row(r: ReplaySummary) -> dict[str, Any]:
        shown = {c: getattr(r, c) for c in REPLAY_COLUMNS}
        shown.update(watermark_ms=f"{r.watermark_ms} ({format_ms(r.watermark_ms, tz)})",
                     late_watermark_ms=f"{r.late_watermark_ms} ({format_ms(r.late_watermark_ms, tz)})",
                     operators="; ".join(_operator_late(o) for o in r.operators) or None)
        return {REPLAY_HEADERS.get(key, key): value for key, value in shown.items()}

    return RowView([REPLAY_HEADERS.get(c, c) for c in REPLAY_COLUMNS], row)
