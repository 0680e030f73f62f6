"""``run`` (every repair), ``undo_repair`` and ``list_backups``: the repair API, returning frozen results."""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

from ..errors import CheckpointError, MissingFileError, RefusedError
from ..fs import FileSystem, open_fs
from ..model import Checkpoint, open_checkpoint
from ..validate import gc_paused
from ._hooks import current
from .backup import (APPLIED, APPLYING, UNDOING, UNDONE, Backup, list_manifests, manifest_plan, new_backup_id,
                     open_backup, read_journal, read_manifest)
from .execute import apply, step_done, undo
from .plan import OWN_DIR, Plan, dumps, load_plan
from .requests import REQUESTS, FsOptions, RepairRequest, RunOptions, inside
from .results import BackupRow, RepairResult, Restored, Resumed, UndoResult
from .targets import DEFAULT_IDLE_MS, now_ms, recent_activity

F = TypeVar("F", bound=Callable[..., Any])


def _without_gc(fn: F) -> F:
    """Repairs allocate many small acyclic objects (a step per file): pause the cyclic GC meanwhile."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with gc_paused():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


@_without_gc
def run(location: str, request: RepairRequest, options: RunOptions | None = None) -> RepairResult:
    """Plan (and with ``options.execute`` apply) one repair; see docs/repair.md.

    An interrupted repair is shown (or with ``execute`` finished) instead, when ``request`` is for the
    same command and does not ask for another target.
    """
    options = options or RunOptions()
    hooks = current()
    now = now_ms() if hooks.now is None else hooks.now
    ckpt = open_checkpoint(location, options.fs_options)
    journal = read_journal(ckpt.fs)
    if journal:
        return _resume(ckpt, journal, request, options, now, hooks.fail_after)
    if options.from_plan:
        plan = _load(options.from_plan, request.command, ckpt)
        _check_fresh(plan, lambda: type(request).from_plan(plan).plan(ckpt, now, options.fs_options))
    else:
        plan = request.plan(ckpt, now, options.fs_options)
    return _finish(ckpt, plan, options, now, hooks.fail_after)


@_without_gc
def undo_repair(location: str, *, backup_id: str | None = None, force: bool = False, idle_ms: int = DEFAULT_IDLE_MS,
                fs_options: FsOptions = None) -> UndoResult:
    """Restore the checkpoint (and file sink) from a backup: the interrupted repair, else the latest applied."""
    hooks = current()
    now = now_ms() if hooks.now is None else hooks.now
    ckpt = open_checkpoint(location, fs_options)
    journal = read_journal(ckpt.fs)
    docs = list_manifests(ckpt.fs)
    if journal and backup_id not in (None, journal["backup_id"]):
        raise RefusedError(f"repair {journal['backup_id']} was interrupted; undo or finish it before {backup_id}",
                           hint=f"wmcheck undo {location}")
    wanted = journal["backup_id"] if journal else backup_id
    if wanted is not None:
        doc = read_manifest(ckpt.fs, wanted, missing_ok=True)
        if doc is None:
            raise MissingFileError(f"no backup {wanted!r} in this checkpoint", hint=f"wmcheck backups {location}")
    else:
        live = [d for d in docs if d["status"] in (APPLIED, APPLYING, UNDOING)]
        if not live:
            raise RefusedError("there is no applied repair to undo", hint=f"wmcheck backups {location} lists them")
        doc = live[-1]
    if doc["status"] == UNDONE:
        raise RefusedError(f"repair {doc['id']} was already undone", hint=f"wmcheck backups {location}")
    later = [d["id"] for d in docs if d["status"] != UNDONE and (d.get("created_ms", 0), d["id"]) >
             (doc.get("created_ms", 0), doc["id"])]
    if later:
        raise RefusedError(f"repair {later[-1]} was made after {doc['id']}", hint=f"undo {later[-1]} first")
    plan = manifest_plan(ckpt.fs, doc)
    backup = open_backup(ckpt.fs, doc, _roots(ckpt, plan.file_sink, fs_options), fs_options)
    _check_idle(ckpt, plan, idle_ms, force, now)
    restored = undo(plan, backup, doc["status"], now, force, hooks.fail_after)
    return UndoResult(doc["id"], plan.command, ckpt.location, plan.file_sink, UNDONE, doc["status"],
                      tuple(Restored(**r) for r in restored), plan.before.get("last_batch"),
                      plan.before.get("last_committed_batch"), plan.before.get("watermark_ms"))


def list_backups(location: str, *, fs_options: FsOptions = None) -> list[BackupRow]:
    """One row per backup of the checkpoint, oldest first."""
    ckpt = open_checkpoint(location, fs_options)
    journal = read_journal(ckpt.fs)
    rows = []
    for doc in list_manifests(ckpt.fs):
        status = doc["status"]
        if journal and journal["backup_id"] == doc["id"] and status in (APPLYING, UNDOING):
            status = f"interrupted ({'undo' if status == UNDOING else 'apply'})"
        request = REQUESTS.get(doc["command"])
        rows.append(BackupRow(
            backup_id=doc["id"], command=doc["command"], status=status, created_ms=doc.get("created_ms"),
            target=request.label(doc.get("request", {})) if request else "",
            last_committed_before=doc.get("before", {}).get("last_committed_batch"),
            watermark_before_ms=doc.get("before", {}).get("watermark_ms"),
            steps=doc.get("steps"),
            files=doc.get("files") or ckpt.fs.uri(f"{OWN_DIR}/backups/{doc['id']}/files"),
        ))
    return rows


# -- shared steps ----------------------------------------------------------------------------


def _roots(ckpt: Checkpoint, file_sink: str | None, fs_options: FsOptions) -> dict[str, FileSystem]:
    roots = {"checkpoint": ckpt.fs}
    if file_sink:
        roots["sink"] = open_fs(file_sink, fs_options)
    return roots


def _load(path: str, command: str, ckpt: Checkpoint) -> Plan:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MissingFileError("plan file not found", path=path, hint="write one with --plan-out FILE") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"cannot read the plan: {exc}", path=path) from None
    plan = load_plan(text, path)
    if plan.command != command:
        raise RefusedError(f"the plan is for {plan.command}, not {command}", path=path,
                           hint=f"run 'wmcheck {plan.command} ... --from-plan {path}'")
    if plan.checkpoint != ckpt.location:
        raise RefusedError(f"the plan was made for {plan.checkpoint}, not {ckpt.location}", path=path,
                           hint="plan again for this checkpoint")
    return plan


def _check_fresh(plan: Plan, replan: Callable[[], Plan]) -> None:
    """Refuse a saved plan unless planning the same request now gives exactly the same changes."""
    try:
        fresh = replan()
    except RefusedError as exc:
        raise RefusedError(f"the checkpoint changed since the plan was made: {exc.message}", hint=exc.hint) from None
    if plan.same_changes(fresh):
        return
    old, new = plan.steps, fresh.steps
    index = next((i for i, (a, b) in enumerate(zip(old, new)) if a.key() != b.key()), min(len(old), len(new)))
    if index < min(len(old), len(new)) and old[index].path != new[index].path:
        what = f"step {index} was {old[index].action} {old[index].path}, now {new[index].action} {new[index].path}"
    elif index < max(len(old), len(new)):
        what = f"{(old if index < len(old) else new)[index].path} is not as it was"
    else:
        what = "the request differs"
    raise RefusedError(f"the checkpoint changed since the plan was made ({len(old)} steps then, {len(new)} now): {what}",
                       hint="plan again (without --from-plan) and review the new plan")


def _check_idle(ckpt: Checkpoint, plan: Plan, idle_ms: int, force: bool, now: int) -> str | None:
    ours = frozenset(p for s in plan.steps if s.action == "write" for p in (s.path, s.sidecar))
    activity = recent_activity(ckpt, idle_ms, now, ours)
    if activity and not force:
        raise RefusedError(activity, hint="stop the query first; on a stopped query or a copy use --idle 0 or --force")
    return activity


def _backup_fs(backup_dir: str | None, ckpt: Checkpoint, plan: Plan, fs_options: FsOptions) -> FileSystem | None:
    if backup_dir is None:
        return None
    fs = open_fs(backup_dir, fs_options)
    for other in (ckpt.location, plan.file_sink):
        if other and (inside(fs.uri(), other) and not inside(fs.uri(), f"{ckpt.location}/{OWN_DIR}")
                      or inside(other, fs.uri())):
            raise CheckpointError(f"--backup-dir {fs.uri()} overlaps {other}",
                                  hint="put backups outside the checkpoint and the sink (or leave --backup-dir out)")
    return fs


def _finish(ckpt: Checkpoint, plan: Plan, options: RunOptions, now: int, fail_after: int | None) -> RepairResult:
    if options.plan_out:
        Path(options.plan_out).write_text(dumps(plan), encoding="utf-8")
    if not options.execute:
        activity = recent_activity(ckpt, options.idle_ms, now)
        extra = (f"{activity}: --execute would refuse (stop the query, or --force)",) if activity else ()
        return RepairResult(plan, False, plan.warnings + extra)
    _check_idle(ckpt, plan, options.idle_ms, options.force, now)
    if not plan.steps:
        return RepairResult(plan, True, plan.warnings)
    files_fs = _backup_fs(options.backup_dir, ckpt, plan, options.fs_options)
    backup_id = new_backup_id(ckpt.fs, plan.command, now)
    backup = Backup(backup_id, ckpt.fs, _roots(ckpt, plan.file_sink, options.fs_options),
                    files_fs.sub(backup_id) if files_fs else None)
    backup.write_plan(plan.to_json())
    backup.write_manifest(plan, APPLYING)
    apply(plan, backup, now, fail_after)
    return RepairResult(plan, True, plan.warnings, backup_id, backup.files_location)


def _resume(ckpt: Checkpoint, journal: Mapping[str, Any], request: RepairRequest, options: RunOptions, now: int,
            fail_after: int | None) -> RepairResult:
    """Show or finish the repair a killed run left behind: the same command, no other target, no other plan."""
    doc = read_manifest(ckpt.fs, journal["backup_id"], missing_ok=True)
    if doc is None:
        raise MissingFileError(f"the journal names backup {journal['backup_id']}, which has no manifest",
                               path=f"{OWN_DIR}/journal.json", hint="wmcheck backups lists the backups there are")
    plan = manifest_plan(ckpt.fs, doc)
    hint = f"re-run 'wmcheck {plan.command} {ckpt.location} --execute' to finish it, or 'wmcheck undo {ckpt.location}'"
    if journal.get("action") == "undo":
        raise RefusedError(f"an undo of repair {doc['id']} was interrupted", hint=f"wmcheck undo {ckpt.location} finishes it")
    if plan.command != request.command or options.from_plan or request.conflicts_with(plan):
        raise RefusedError(f"an interrupted {plan.command} (backup {doc['id']}, {plan.notes[0] if plan.notes else ''}) "
                           "must be finished or undone first", hint=hint)
    backup = open_backup(ckpt.fs, doc, _roots(ckpt, plan.file_sink, options.fs_options), options.fs_options)
    done = sum(1 for s in plan.steps if step_done(s, backup))
    resumed = Resumed(doc["id"], done, len(plan.steps))
    if not options.execute:
        note = f"repair {doc['id']} was interrupted after {done} of {len(plan.steps)} steps: {hint}"
        return RepairResult(plan, False, (note, *plan.warnings), doc["id"], backup.files_location, resumed)
    _check_idle(ckpt, plan, options.idle_ms, options.force, now)
    apply(plan, backup, now, fail_after, resume=True)
    return RepairResult(plan, True, plan.warnings, doc["id"], backup.files_location, resumed)


__all__ = ["list_backups", "run", "undo_repair"]
