"""One output layer: commands hand typed results to an ``Output``; nothing else prints.

An ``Output`` has one method per kind of result; each hands the machine form (the result itself,
turned into JSON values here and only here, by :func:`plain`) and its human form (:mod:`.views`)
to the format's ``document`` or ``rows``.
"""
from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import json
from abc import ABC, abstractmethod
from datetime import timezone, tzinfo
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence, TextIO

import click

from wmcheck.checkpoint.sources.registry import kind_named
from wmcheck.checkpoint.timeutil import format_ms

from . import repair_views, views
from .fixes import fix_text
from .flags import for_cli
from .table_fit import cell, fitted_widths, table_cell, terminal_width, wide_requested
from .text import printable
from .views import RowView

if TYPE_CHECKING:
    from wmcheck.checkpoint.batch_inputs import BatchInput, ReplayPlan, SourceInput
    from wmcheck.checkpoint.repair.results import BackupRow, RepairResult, UndoResult
    from wmcheck.checkpoint.summary import BatchRow, CheckpointSummary
    from wmcheck.statestore.engines import StoreReadLike
    from wmcheck.statestore.spark.compat import CompatReport
    from wmcheck.statestore.spark.replay import ReplaySummary
    from wmcheck.statestore.summary import StateSummary
    from wmcheck.statestore.targets import Target

    from .reports import Result

FORMATS = ("table", "json", "csv")
_FIELD_NAMES: dict[type, tuple[tuple[str, str], ...]] = {}
_SCALARS = frozenset((int, float, bool, type(None)))


def plain(value: Any) -> Any:
    """A result as JSON values: dataclasses as objects keyed by their field names (in field order; a field's
    ``metadata["json"]`` renames its key, e.g. ``from_`` -> ``from``), tuples as lists."""
    kind = type(value)
    if kind is str:
        return printable(value)
    if kind in _SCALARS:
        return value
    names = _FIELD_NAMES.get(kind)
    if names is None and dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = _FIELD_NAMES[kind] = tuple((f.metadata.get("json", f.name), f.name) for f in dataclasses.fields(value))
    if names is not None:
        return {key: plain(getattr(value, name)) for key, name in names}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (dict, Mapping)):
        return {printable(k) if isinstance(k, str) else k: plain(v) for k, v in value.items()}
    return value


def repair_doc(result: "RepairResult") -> dict[str, Any]:
    """A repair's result in its JSON form: the plan's keys, the run's warnings, ``executed``, the backup, ``resumed``."""
    doc = {**result.plan.to_json(), "warnings": list(result.warnings), "executed": result.executed,
           "backup_id": result.backup_id, "backup": result.backup}
    if result.resumed is not None:
        doc["resumed"] = plain(result.resumed)
    if result.verification is not None:
        doc["verification"] = plain(result.verification)
    return doc


def replay_plan_doc(plan: ReplayPlan, tz: tzinfo) -> dict[str, Any]:
    """``wmcheck replay --plan --format json``: the checkpoint and every batch's input."""
    retention = plan.kafka_retention
    return {"checkpoint": plan.checkpoint, "oldest_replayable_batch": plan.oldest_replayable_batch,
            "batches": [{**batch_doc(b, tz), "sources": [source_doc(s) for s in b.sources]} for b in plan.batches],
            "kafka_retention": None if retention is None else {
                "bootstrap": retention.bootstrap, "line": retention.line, "gone": plain(retention.gone),
                "lost_batches": list(retention.lost_batches), "replayable_batches": list(retention.replayable_batches)}}


def batch_doc(b: BatchInput, tz: tzinfo) -> dict[str, Any]:
    return {"batch_id": b.batch_id, "committed": b.committed, "watermark_ms": b.watermark_ms,
            "watermark": format_ms(b.watermark_ms, tz), "late_watermark_ms": b.late_watermark_ms,
            "late_watermark": format_ms(b.late_watermark_ms, tz), "timestamp_ms": b.timestamp_ms,
            "timestamp": format_ms(b.timestamp_ms, tz)}


def source_doc(s: SourceInput) -> dict[str, Any]:
    """One source's input in one batch; the keys of its kind."""
    return {"source_id": s.source_id, "kind": s.kind, "start": s.start.raw if s.start else None, "end": s.end.raw,
            "replayable": s.replayable, "note": s.note, **kind_named(s.kind).input_fields(s, plain)}


def flatten(doc: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Nested objects as ``a.b.c`` keys (lists of objects as ``a.0.b``)."""
    out: list[tuple[str, Any]] = []
    for key, value in doc.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out += flatten(value, name + ".")
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            for i, item in enumerate(value):
                out += flatten(item, f"{name}.{i}.")
        else:
            out.append((name, value))
    return out


class Output(ABC):
    """Renders results in one format: each format implements ``rows`` and ``document``; the methods per kind of
    result hand them their machine and human forms."""

    def __init__(self, stream: TextIO | None = None, tz: tzinfo = timezone.utc) -> None:
        self.stream = stream
        self.tz = tz

    def write(self, text: str) -> None:
        click.echo("\n".join(printable(line) for line in for_cli(text).split("\n")), file=self.stream)

    @abstractmethod
    def rows(self, rows: Sequence[Any], columns: Sequence[str] | None = None, title: str | None = None,
             view: RowView | None = None) -> None:
        """A list of records of one kind; a table shows them through ``view`` when given."""

    @abstractmethod
    def document(self, doc: Any, fields: Sequence[tuple[str, Any]], tables: Sequence[views.Table]) -> None:
        """One object: ``doc`` is the machine form; ``fields`` (label, text) and ``tables`` (title, rows, columns) the human form."""

    # one method per kind of result

    def checkpoint_summary(self, summary: CheckpointSummary) -> None:
        self.document(summary, *views.checkpoint_summary(summary, self.tz))

    def batches(self, rows: Sequence[BatchRow]) -> None:
        self.rows(rows, view=views.batches(rows, self.tz))

    def state_summary(self, summary: StateSummary) -> None:
        self.document(summary, *views.state_summary(summary, self.tz))

    def findings(self, results: Sequence[Result], strict: bool) -> None:
        """``wmcheck check``: every finding of every checkpoint, its fix as an object (kind, text, request)."""
        self.rows([views.finding_doc(f) for r in results for f in r.findings], views.FINDING_FIELDS)

    def repair_result(self, result: RepairResult) -> None:
        """A repair's plan, dry run or applied (its JSON form: :func:`repair_doc`)."""
        self.document(repair_doc(result), *repair_views.repair_result(result, self.tz))

    def undo_result(self, result: UndoResult) -> None:
        self.document(result, *repair_views.undo_result(result, self.tz))

    def backups(self, rows: Sequence[BackupRow]) -> None:
        self.rows([{**plain(row), "created": format_ms(row.created_ms, self.tz)} for row in rows], view=repair_views.BACKUPS)

    def replay_plan(self, plan: ReplayPlan) -> None:
        """``wmcheck replay --plan`` (its JSON form: :func:`replay_plan_doc`)."""
        self.document(replay_plan_doc(plan, self.tz), *views.replay_plan(plan, self.tz))

    def replay_rows(self, rows: Sequence[ReplaySummary]) -> None:
        self.rows(rows, views.REPLAY_COLUMNS, view=views.replay_rows(self.tz))

    def note(self, text: str) -> None:  # noqa: B027 (machine formats leave it out; the table writes it)
        """A line for people only (machine formats leave it out)."""

    def warning(self, text: str | None) -> None:
        """A warning for people in every format, on stderr (stdout stays one valid document); None: nothing."""
        if text:
            click.echo(f"warning: {printable(for_cli(text))}", err=True)

    def compat(self, report: CompatReport, allow_output_change: bool) -> None:
        """``wmcheck compat``: the verdict, what changes, and (machine forms) ``changes`` and ``exit_code``."""
        from . import compat_views  # compat alone shows it

        doc = {**plain(report), "changes": report.changes, "exit_code": report.exit_code(allow_output_change)}
        self.document(doc, *compat_views.compat_report(report))
        self.note("")
        self.note(compat_views.compat_summary(report, allow_output_change))

    def state_rows(self, rows: Sequence[Mapping[str, Any]], targets: Mapping[tuple[int, str], Target],
                   notes: Sequence[str]) -> None:
        """State rows older than their operator's watermark (``targets`` by operator id and store); ``notes`` name the
        stores that never evict."""
        title, view = views.state_rows(targets, notes, self.tz)
        self.rows(rows, views.STATE_ROW_COLUMNS, title=title, view=view)

    def older_state(self, reads: Sequence[StoreReadLike], tables: list, limit: int | None) -> None:
        """The state rows older than the watermark: one Arrow table per store of ``reads`` (either engine's)."""
        from wmcheck.statestore.output.rows import table_rows

        notes = [f"operator {r.store.operator_id} {r.store.name}: {r.rule.rule}" for r in reads if not r.rule.evictable]
        self.state_rows(table_rows(tables, limit), {(r.store.operator_id, r.store.name): r.target for r in reads}, notes)

    row_parts = False
    """:meth:`older_rows` takes the rows encoded as Parquet parts (the engine's ``older_parts``), else as Arrow tables
    (its ``older_batches``)."""

    def older_rows(self, reads: Sequence[StoreReadLike], batches: Iterable[tuple[int, Any]]) -> None:
        """The state rows older than the watermark, as an engine (either) read them: ``(index in reads, Arrow
        table)`` batches here."""
        import pyarrow as pa

        parts: list[list[Any]] = [[] for _ in reads]
        for index, table in batches:
            parts[index].append(table)
        self.older_state(reads, [pa.concat_tables(p) for p in parts], None)


class JsonOutput(Output):
    def rows(self, rows, columns=None, title=None, view=None):
        # One compact object per line: valid JSON, readable, and fast (indent disables the C encoder).
        body = ",\n".join(json.dumps(plain(row), ensure_ascii=False) for row in rows)
        self.write(f"[\n{body}\n]" if rows else "[]")

    def document(self, doc, fields, tables):
        self.write(json.dumps(plain(doc), indent=2, ensure_ascii=False))


class CsvOutput(Output):
    def _csv(self, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(header)
        writer.writerows([[cell(v) for v in row] for row in rows])
        self.write(buf.getvalue().rstrip("\n"))

    def rows(self, rows, columns=None, title=None, view=None):
        records = [plain(row) for row in rows]
        columns = list(columns or (records[0].keys() if records else []))
        self._csv(columns, [[row.get(c) for c in columns] for row in records])

    def document(self, doc, fields, tables):
        self._csv(["field", "value"], [list(item) for item in flatten(plain(doc))])

    def findings(self, results, strict):
        self.rows([views.FINDINGS.row(f) | {"checkpoint": f.checkpoint} for r in results for f in r.findings],
                  views.FINDING_FIELDS)

    def replay_plan(self, plan):
        self.rows([{**batch_doc(b, self.tz), **source_doc(s), "files": [f.location for f in s.files]}
                   for b, s in views.plan_sources(plan)], views.PLAN_CSV_COLUMNS)


class TableOutput(Output):
    def __init__(self, stream: TextIO | None = None, tz: tzinfo = timezone.utc) -> None:
        super().__init__(stream, tz)
        self.width = None if wide_requested() else terminal_width(stream)

    def _table(self, rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
        """A table; wider than the terminal (and without ``--wide``), its widest columns (messages, fixes) wrap to
        fit. A column no row has a value in is left out; a cell without one says ``unknown``."""
        from tabulate import tabulate

        columns = [c for c in columns if any(r.get(c) not in (None, "") for r in rows)]
        cells = [[table_cell(r.get(c)) for c in columns] for r in rows]
        caps = None if self.width is None else fitted_widths(cells, columns, self.width)
        return tabulate(cells, headers=list(columns), tablefmt="simple", disable_numparse=True,
                        **({"maxcolwidths": caps} if caps else {}))

    def rows(self, rows, columns=None, title=None, view=None):
        if view is not None:
            rows, columns = [view.row(r) for r in rows], view.columns
        else:
            rows = [plain(r) for r in rows]
        columns = list(columns or (rows[0].keys() if rows else []))
        if title:
            self.write(title)
        self.write(self._table(rows, columns) if rows else "(none)")

    def document(self, doc, fields, tables):
        width = max((len(label) for label, _ in fields), default=0)
        for label, text in fields:
            self.write(f"{label + ':':<{width + 1}} {table_cell(text)}")
        for title, rows, columns in tables:
            self.write("")
            self.rows(rows, columns, title=title)

    def note(self, text):
        self.write(text)

    def findings(self, results, strict):
        from wmcheck.checkpoint.checks.recommend import recommended_repair

        for result in results:
            if result.findings:
                self.rows(result.findings, view=views.FINDINGS)
            repair = recommended_repair(result.findings)
            if repair:
                self.write(f"recommended repair: {fix_text(repair, result.location)}")
            self.write(result.summary(strict))


class OneKindOutput(Output):
    """A format for one kind of result (Parquet: state rows; GitHub and JUnit: check's findings and compat's report):
    the commands offer it for nothing else, so any other result is a usage error naming the format."""

    format_name = ""

    def _refuse(self) -> None:
        raise click.UsageError(f"--format {self.format_name} does not write this command's result")

    def rows(self, rows, columns=None, title=None, view=None):
        self._refuse()

    def document(self, doc, fields, tables):
        self._refuse()


class ParquetOutput(OneKindOutput):
    """``wmcheck state --older-than-watermark --format parquet``: the rows as one Parquet file at ``path``."""

    format_name = "parquet"

    def __init__(self, path: str, tz: tzinfo = timezone.utc) -> None:
        super().__init__(None, tz)
        self.path = path

    def older_state(self, reads, tables, limit):
        import pyarrow.parquet as pq

        from wmcheck.statestore.output.rows import one_table

        table = one_table(list(reads), tables, limit)
        pq.write_table(table, self.path)
        self.write(f"wrote {table.num_rows} rows to {self.path}")

    row_parts = True

    def older_rows(self, reads: Sequence[StoreReadLike], batches: Iterable[tuple[int, Any]]) -> None:
        """The state rows older than the watermark as ``(index in reads, Parquet part)`` batches, encoded where
        the engine read them, copied into one file."""
        from wmcheck.statestore.output.rows import write_parts

        self.write(f"wrote {write_parts(self.path, reads, iter(batches))} rows to {self.path}")


@contextlib.contextmanager
def output_to(fmt: str, path: str | None, tz: tzinfo = timezone.utc) -> Iterator[Output]:
    """The ``Output`` for ``--format`` writing to ``--output`` ``path`` (stdout when None); ``parquet`` writes
    the file itself (and says so on stdout)."""
    if fmt == "parquet":
        assert path is not None  # the command requires --output with --format parquet
        yield ParquetOutput(path, tz)
    elif path is None:
        yield make_output(fmt, None, tz)
    else:
        with open(path, "w", encoding="utf-8") as stream:
            yield make_output(fmt, stream, tz)


class GithubOutput(OneKindOutput):
    """``--format github`` (``wmcheck check``, ``wmcheck compat``): annotations for GitHub Actions."""

    format_name = "github"

    def findings(self, results, strict):
        from .reports import github  # the checks' registry, only for check

        self.write(github(results, strict))

    def compat(self, report, allow_output_change):
        from .compat_reports import compat_github

        self.write(compat_github(report, allow_output_change))


class JunitOutput(OneKindOutput):
    """``--format junit`` (``wmcheck check``, ``wmcheck compat``): JUnit XML."""

    format_name = "junit"

    def findings(self, results, strict):
        from .reports import junit

        self.write(junit(results, strict))

    def compat(self, report, allow_output_change):
        from .compat_reports import compat_junit

        self.write(compat_junit(report, allow_output_change))


REPORT_OUTPUTS: dict[str, type[Output]] = {"github": GithubOutput, "junit": JunitOutput}
"""The formats for CI systems that ``wmcheck check`` and ``wmcheck compat`` have besides :data:`FORMATS`."""


def make_output(fmt: str, stream: TextIO | None = None, tz: tzinfo = timezone.utc) -> Output:
    """The ``Output`` for ``--format``."""
    outputs: dict[str, type[Output]] = {"table": TableOutput, "json": JsonOutput, "csv": CsvOutput, **REPORT_OUTPUTS}
    return outputs[fmt](stream, tz)
