"""What people see of ``wmcheck compat``: the report's fields and tables, and its one-line summary."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from wmcheck.checkpoint.timeutil import format_duration, format_ms

from .views import Fields, Table

if TYPE_CHECKING:
    from wmcheck.statestore.spark.compat import CompatReport


def _delay_label(delay: Any, delays: Sequence[Any]) -> str:
    """``delay of ts``; with several watermarked inputs, the sources under it too: ``delay of ts (source 1)``."""
    label = f"delay of {delay.column}"
    return label + f" (source {', '.join(delay.sources)})" if len(delays) > 1 and delay.sources else label


def _batches(batches: Sequence[int]) -> str:
    return f"batch {batches[0]}" if len(batches) == 1 else f"batches {batches[0]}..{batches[-1]}" if batches else "none"


def _changes_text(report: "CompatReport") -> list[str]:
    """What the new code changes, one phrase per kind of change."""
    out = []
    output = report.output
    if output is not None and output.differs:
        out.append(f"output of batch {report.batch}: {output.only_old} row(s) only before, {output.only_new} only after"
                   + (f" ({output.note})" if output.note else ""))
    for st in report.state:
        if st.differs:
            out.append(f"state of operator {st.operator_id} {st.store}: {st.added} added, {st.removed} removed, "
                       f"{st.changed} changed")
    for sc in report.schemas:
        out.append(f"state schema of operator {sc.operator_id} {sc.store} {sc.part}: ({sc.old}) -> ({sc.new})")
    following = report.next
    if following is not None and following.differs and following.output is not None:
        out.append(f"output of the next batches ({_batches(following.batches)}) against the old code's: "
                   f"{following.output.only_old} row(s) only with the old code, {following.output.only_new} only with the new"
                   + (f" ({following.output.note})" if following.output.note else ""))
    wm = report.watermark
    if wm is not None and wm.differs:
        moved = [f"{_delay_label(d, wm.delays)} {format_duration(d.old_ms)} -> {format_duration(d.new_ms)}"
                 for d in wm.delays if d.old_ms is not None and d.old_ms != d.new_ms]
        if wm.old_next_ms != wm.new_next_ms:
            moved.append(f"watermark after batch {report.batch} {wm.old_next_ms} -> {wm.new_next_ms}")
        out.append("; ".join(moved))
    return out


def compat_summary(report: "CompatReport", allow_output_change: bool) -> str:
    """One line: the verdict, what changes, and the exit code."""
    code = report.exit_code(allow_output_change)
    if report.refusal is not None:
        return f"refused: {report.refusal.error_class}: {report.refusal.explanation} (exit {code})"
    changes = _changes_text(report)
    unfed = report.next.not_run if report.next is not None else ()
    skipped = ("; the next batches were not run: " + "; ".join(f"source {u.source_id} ({u.kind}): {u.reason}" for u in unfed)
               if unfed else "")
    if not changes:
        return f"restarts: batch {report.batch} gives the same output and state{skipped} (exit {code})"
    allowed = ", allowed by --allow-output-change" if allow_output_change else ""
    return f"restarts, with changes{allowed}: {'; '.join(changes)}{skipped} (exit {code})"


def _samples(samples: Sequence[Any]) -> list[dict[str, Any]]:
    import json

    return [{"side": {"old": "before", "new": "after"}.get(s.side, s.side),
             "row": json.dumps(s.row, sort_keys=True, ensure_ascii=False)} for s in samples]


def _schema_fields(sc: Any) -> list[dict[str, Any]]:
    """A state schema field by field; a side without the field says ``none``."""
    return [{"field": f.name, "checkpoint": f.old or "none", "new query": f.new or "none", "change": f.change}
            for f in sc.fields]


def compat_report(report: "CompatReport") -> tuple[Fields, list[Table]]:
    """``wmcheck compat``."""
    how = {"rerun": "a committed batch, re-run", "pending": "the planned batch a restart re-runs",
           "next": "the batch a restart plans next"}.get(report.how, report.how)
    fields: Fields = [("checkpoint", report.checkpoint), ("query", report.query), ("batch", f"{report.batch} ({how})"),
                      ("verdict", report.verdict)]
    tables: list[Table] = []
    refusal = report.refusal
    if refusal is not None:
        fields += [("spark error", refusal.error_class), ("explanation", refusal.explanation)]
        if refusal.rule is not None:
            fields += [("rule", refusal.rule.text), ("guide", refusal.rule.url)]
        fields.append(("spark message", refusal.message.splitlines()[0] if refusal.message else ""))
        if refusal.schema is not None:
            sc = refusal.schema
            tables.append((f"Operator {sc.operator_id} {sc.store} {sc.part} schema: checkpoint -> new query",
                           _schema_fields(sc),
                           ["field", "checkpoint", "new query", "change"]))
        if refusal.operators:
            tables.append(("Stateful operators: checkpoint -> new query",
                           [{"operator_id": o.operator_id, "checkpoint": o.old, "new query": o.new} for o in refusal.operators],
                           ["operator_id", "checkpoint", "new query"]))
    output = report.output
    if output is not None:
        before = "unknown" if output.old_rows is None else f"{output.old_rows} row(s)"
        fields.append(("output", f"{output.sink} sink: {before} before, {output.new_rows} after"
                       + (f"; {output.only_old} only before, {output.only_new} only after" if output.old_rows is not None else "")
                       + (f" ({output.note})" if output.note else "")))
        if output.samples:
            tables.append((f"Output rows of batch {report.batch} only one side has", _samples(output.samples), ["side", "row"]))
    if report.state:
        tables.append(("State after the batch: old code -> new code", [{
            "operator_id": s.operator_id, "store": s.store, "rows before": s.old_rows, "rows after": s.new_rows,
            "added": s.added, "removed": s.removed, "changed": s.changed, "note": s.note} for s in report.state],
            ["operator_id", "store", "rows before", "rows after", "added", "removed", "changed", "note"]))
        changed = [{"operator_id": s.operator_id, "store": s.store, **r} for s in report.state for r in _samples(s.samples)]
        if changed:
            tables.append(("State rows that differ", changed, ["operator_id", "store", "side", "row"]))
    for sc in report.schemas:
        tables.append((f"State schema evolved: operator {sc.operator_id} {sc.store} {sc.part}",
                       _schema_fields(sc),
                       ["field", "checkpoint", "new query", "change"]))
    following = report.next
    if following is not None:
        out = following.output
        text = f"{_batches(following.batches)}, new code against the old ({following.baseline})"
        if out is not None:
            text += (f": {out.old_rows} row(s) with the old code, {out.new_rows} with the new; {out.only_old} only with "
                     f"the old, {out.only_new} only with the new" + (f" ({out.note})" if out.note else ""))
        fields.append(("next batches", text + (f"; {following.note}" if following.note else "")))
        if out is not None and out.samples:
            tables.append(("Output rows of the next batches only one code writes (before: the old code; after: the new)",
                           _samples(out.samples), ["side", "row"]))
    wm = report.watermark
    if wm is not None:
        fields.append(("watermark of the batch", f"{wm.batch_watermark_ms} ({format_ms(wm.batch_watermark_ms)})"))
        fields.append(("watermark after it", f"old code {wm.old_next_ms} ({format_ms(wm.old_next_ms)}), "
                                             f"new code {wm.new_next_ms} ({format_ms(wm.new_next_ms)})"))
        for d in wm.delays:
            origin = f" (old: {d.old_from})" if d.old_from and d.old_from.startswith("the plan") else ""
            fields.append((_delay_label(d, wm.delays), f"{format_duration(d.old_ms) if d.old_ms is not None else 'unknown'}"
                                                       f" -> {format_duration(d.new_ms)}{origin}"))
        if wm.policy:
            fields.append(("watermark policy", f"{wm.policy} (pinned)"))
        if wm.late is not None:
            late = wm.late
            fields.append(("late rows", f"{late.old_late} of {late.rows} recorded rows (batches {late.batches[0]}..{late.batches[1]}) "
                                        f"were late; with the new delay {late.new_late} ({late.note})"))
            if late.samples:
                tables.append(("Rows the new delay judges otherwise (before: late only with the old delay; after: only "
                               "with the new)", _samples(late.samples), ["side", "row"]))
        fields += [("note", n) for n in wm.notes]
    fields += [(f"source {s.source_id}", f"{s.kind}: {s.note}" if s.note else s.kind) for s in report.sources]
    fields += [("note", n) for n in report.notes]
    fields.append(("took", f"{report.seconds:.1f} s"))
    return fields, tables
