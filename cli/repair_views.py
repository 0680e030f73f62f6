"""What a repair's result shows people: its fields and tables (``rewind``, ``set-watermark``, ``relocate``,
``repartition``, ``reset-offsets``, ``undo``, ``backups``); :mod:`.output` writes them in each format."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wmcheck.checkpoint.timeutil import format_ms

from .views import Fields, RowView, Table

if TYPE_CHECKING:
    from datetime import tzinfo

    from wmcheck.checkpoint.repair.plan import Plan
    from wmcheck.checkpoint.repair.results import RepairResult, UndoResult


STEP_COLUMNS = ["step", "action", "phase", "path", "reason"]
COUNT_COLUMNS = ["operator_id", "store", "before", "after"]
RESTORED_COLUMNS = ["step", "action", "path", "restored"]


def _watermark(ms: int | None, tz: tzinfo) -> str:
    return "" if ms is None else f"{ms} ({format_ms(ms, tz)})"


SOURCE_COLUMNS = ["source_id", "kind", "position", "before", "after"]
SINK_COLUMNS = ["batch", "action", "version", "files", "rows"]
RESET_COLUMNS = ["TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET", "DIFFERENCE"]


def reset_rows(plan: Plan) -> list[dict[str, Any]]:
    """``reset-offsets``' partitions as ``kafka-consumer-groups --reset-offsets --dry-run`` lists them, with where the
    next batch would have started (CURRENT-OFFSET) and how far the reset moves it."""
    out = []
    for s in plan.sources:
        topic, _, partition = s.position.rpartition("/")
        before, after = int(s.before or 0), int(s.after or 0)
        out.append({"TOPIC": topic, "PARTITION": int(partition), "CURRENT-OFFSET": before, "NEW-OFFSET": after,
                    "DIFFERENCE": f"{after - before:+d}"})
    return out


def repair_result(result: RepairResult, tz: tzinfo) -> tuple[Fields, list[Table]]:
    """A repair's plan, dry run or applied (``rewind``, ``set-watermark``, ``relocate``, ``repartition``)."""
    plan, check = result.plan, result.verification
    before, after = plan.before, plan.after
    if result.executed:
        mode = f"applied; backup {result.backup_id}" if result.backup_id else "applied; nothing needed changing"
    else:
        mode = "dry run: nothing was changed (add --execute to apply)"
    fields: Fields = [
        ("command", plan.command),
        ("checkpoint", plan.checkpoint),
        *([("file sink", plan.file_sink)] if plan.file_sink else []),
        ("mode", mode),
        *[("note", n) for n in plan.notes],
        ("last batch", f"{before.last_batch} -> {after.last_batch}"),
        ("last committed", f"{before.last_committed_batch} -> {after.last_committed_batch}"),
        ("watermark", f"{_watermark(before.watermark_ms, tz)} -> {_watermark(after.watermark_ms, tz)}"),
        ("changes", f"{plan.count('remove')} file(s) removed (moved into the backup), {plan.count('write')} written"
                    + (f"; Spark writes {len(plan.spark_writes)} more (steps marked Spark)" if plan.spark_writes else "")),
        *([("backup", result.backup)] if result.backup else []),
        *[("warning", w) for w in result.warnings],
    ]
    steps = [*({"step": "Spark", "action": "write", "phase": w.phase, "path": w.path + ((" (and their .crc)" if w.optional else " (and its .crc)") if w.crc else ""),
                "reason": w.reason} for w in plan.spark_writes),
             *({"step": i, "action": s.action, "phase": s.phase, "path": s.path, "reason": s.reason}
               for i, s in enumerate(plan.steps))]
    if plan.command == "reset-offsets":
        tables: list[Table] = [("Offsets (where the next batch starts)", reset_rows(plan), RESET_COLUMNS)]
    else:
        tables = [("Sources (where each continues from)", plan.sources, SOURCE_COLUMNS)] if plan.sources else []
    which = "the batches read from the new offsets" if plan.command == "reset-offsets" else "the re-run batches"
    tables += [(f"What the {e.kind} sink does with {which}: {e.summary}", [b.to_json() for b in e.batches],
                SINK_COLUMNS) for e in plan.sinks]
    tables.append(("Steps", steps, STEP_COLUMNS))
    if check is not None:
        fields += [
            ("verified", "yes: check finds no error and every store has as many rows as before" if check.ok else "NO"),
            ("partitions now", check.partitions),
            *([("state unreadable", check.unreadable)] if check.unreadable else []),
            *[("check error", f) for f in check.errors],
            *[("check warning", f) for f in check.warnings],
        ]
        tables.append(("State rows (Spark's state reader)", check.counts, COUNT_COLUMNS))
    return fields, tables


def undo_result(result: UndoResult, tz: tzinfo) -> tuple[Fields, list[Table]]:
    """``wmcheck undo``."""
    fields: Fields = [
        ("backup", result.backup_id),
        ("command", result.command),
        ("checkpoint", result.checkpoint),
        *([("file sink", result.file_sink)] if result.file_sink else []),
        ("status", f"{result.was} -> {result.status}"),
        ("restored", f"{len(result.restored)} file(s)"),
        ("last committed", result.last_committed_batch),
        ("watermark", _watermark(result.watermark_ms, tz)),
        *[("warning", w) for w in result.warnings],
    ]
    return fields, [("Restored", result.restored, RESTORED_COLUMNS)]


BACKUPS = RowView(["backup_id", "command", "status", "created", "target", "last_committed_before", "steps", "files"],
                  lambda row: row)
