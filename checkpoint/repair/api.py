"""``rewind``, ``set-watermark``, ``undo`` and ``backups`` as Python functions returning plain data."""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

from ..errors import CheckpointError, MissingFileError, RefusedError
from ..fs import FileSystem, open_fs, require_dir
from ..model import Checkpoint, open_checkpoint
from ..timeutil import parse_duration_ms, parse_time_ms
from ..validate import gc_paused
from .backup import (APPLIED, APPLYING, UNDOING, UNDONE, Backup, list_manifests, manifest_plan, new_backup_id,
                     open_backup, read_journal, read_manifest)
from .execute import apply, step_done, undo
from .logs import SINK_LOG
from .plan import OWN_DIR, Plan, dumps, load_plan
from .relocate import plan_relocate
from .rewind import FileSink, plan_rewind
from .targets import DEFAULT_IDLE_MS, now_ms, recent_activity, resolve_target
from .watermark import plan_set_watermark

Options = Mapping[str, str] | None
F = TypeVar("F", bound=Callable[..., Any])


def _without_gc(fn: F) -> F:
    """Repairs allocate many small acyclic objects (a step per file): pause the cyclic GC meanwhile."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with gc_paused():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


@_without_gc
def rewind(
    location: str,
    *,
    to_batch: int | None = None,
    to_watermark: str | None = None,
    to_time: str | None = None,
    shift: int | None = None,
    file_sink: str | None = None,
    keep_next_offsets: bool = False,
    keep_source_log: bool = False,
    execute: bool = False,
    from_plan: str | None = None,
    plan_out: str | None = None,
    idle_ms: int = DEFAULT_IDLE_MS,
    force: bool = False,
    backup_dir: str | None = None,
    fs_options: Options = None,
    now: int | None = None,
    fail_after: int | None = None,
) -> dict[str, Any]:
    """Plan (and with ``execute`` apply) a rewind; see docs/repair.md. ``fail_after`` is a test hook."""

    def make(ckpt: Checkpoint, now: int, batch: int | None, sink: FileSink | None, keep_next: bool, keep_log: bool,
             how: str | None) -> Plan:
        return plan_rewind(ckpt, batch, sink=sink, keep_next_offsets=keep_next, keep_source_log=keep_log, how=how,
                           created_ms=now)

    def fresh(ckpt: Checkpoint, now: int) -> Plan:
        target = resolve_target(ckpt, to_batch=to_batch, to_watermark=to_watermark, to_time=to_time, shift=shift, now=now)
        sink = _sink(file_sink, ckpt, fs_options) if file_sink else None
        return make(ckpt, now, target.batch, sink, keep_next_offsets, keep_source_log, target.how)

    def again(ckpt: Checkpoint, plan: Plan, now: int) -> Plan:
        req = plan.request
        return make(ckpt, now, req["batch"], _sink(plan.file_sink, ckpt, fs_options), req["keep_next_offsets"],
                    req["keep_source_log"], None)

    return _repair("rewind", location, {"batch": to_batch} if to_batch is not None else {}, fresh, again,
                   execute=execute, from_plan=from_plan, plan_out=plan_out, idle_ms=idle_ms, force=force,
                   backup_dir=backup_dir, fs_options=fs_options, now=now, fail_after=fail_after)


@_without_gc
def set_watermark(
    location: str,
    *,
    watermark: str | None = None,
    allow_raise: bool = False,
    window: str | None = None,
    execute: bool = False,
    from_plan: str | None = None,
    plan_out: str | None = None,
    idle_ms: int = DEFAULT_IDLE_MS,
    force: bool = False,
    backup_dir: str | None = None,
    fs_options: Options = None,
    now: int | None = None,
    fail_after: int | None = None,
) -> dict[str, Any]:
    """Plan (and with ``execute`` apply) setting the watermark the next batch starts from."""

    def fresh(ckpt: Checkpoint, now: int) -> Plan:
        if watermark is None:
            raise CheckpointError("set-watermark needs --watermark TIME (or --from-plan FILE)",
                                  hint='e.g. --watermark "-2 hours" (relative to the current watermark)')
        watermark_ms = parse_time_ms(watermark, now_ms=now, watermark_ms=ckpt.watermark_ms, default_anchor="watermark")
        window_ms = parse_duration_ms(window) if window else None
        return plan_set_watermark(ckpt, watermark_ms, allow_raise=allow_raise, window_ms=window_ms, created_ms=now)

    def again(ckpt: Checkpoint, plan: Plan, now: int) -> Plan:
        req = plan.request
        return plan_set_watermark(ckpt, req["watermark_ms"], allow_raise=req["allow_raise"], window_ms=req["window_ms"],
                                  created_ms=now)

    return _repair("set-watermark", location, {}, fresh, again, execute=execute, from_plan=from_plan,
                   plan_out=plan_out, idle_ms=idle_ms, force=force, backup_dir=backup_dir, fs_options=fs_options,
                   now=now, fail_after=fail_after)


@_without_gc
def relocate(
    location: str,
    *,
    path_map: Mapping[str, str] | None = None,
    file_sink: str | None = None,
    execute: bool = False,
    from_plan: str | None = None,
    plan_out: str | None = None,
    idle_ms: int = DEFAULT_IDLE_MS,
    force: bool = False,
    backup_dir: str | None = None,
    fs_options: Options = None,
    now: int | None = None,
    fail_after: int | None = None,
) -> dict[str, Any]:
    """Plan (and with ``execute`` apply) making a copied or moved checkpoint name its own schema files and,
    with ``path_map`` (FROM prefix -> TO), its logged input files (and ``file_sink``'s output files) where they are now."""

    def fresh(ckpt: Checkpoint, now: int) -> Plan:
        sink = _sink(file_sink, ckpt, fs_options) if file_sink else None
        return plan_relocate(ckpt, path_map=path_map, sink=sink, created_ms=now)

    def again(ckpt: Checkpoint, plan: Plan, now: int) -> Plan:
        return plan_relocate(ckpt, path_map=plan.request.get("path_map"), sink=_sink(plan.file_sink, ckpt, fs_options),
                             created_ms=now)

    return _repair("relocate", location, {}, fresh, again, execute=execute, from_plan=from_plan, plan_out=plan_out,
                   idle_ms=idle_ms, force=force, backup_dir=backup_dir, fs_options=fs_options, now=now,
                   fail_after=fail_after)


@_without_gc
def undo_repair(
    location: str,
    *,
    backup_id: str | None = None,
    force: bool = False,
    idle_ms: int = DEFAULT_IDLE_MS,
    fs_options: Options = None,
    now: int | None = None,
    fail_after: int | None = None,
) -> dict[str, Any]:
    """Restore the checkpoint (and file sink) from a backup: the interrupted repair, else the latest applied."""
    now = now_ms() if now is None else now
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
    restored = undo(plan, backup, doc["status"], now, force, fail_after)
    return {"backup_id": doc["id"], "command": plan.command, "checkpoint": ckpt.location, "file_sink": plan.file_sink,
            "status": UNDONE, "was": doc["status"], "restored": restored,
            "last_batch": plan.before.get("last_batch"), "last_committed_batch": plan.before.get("last_committed_batch"),
            "watermark_ms": plan.before.get("watermark_ms")}


def list_backups(location: str, *, fs_options: Options = None) -> list[dict[str, Any]]:
    """One row per backup of the checkpoint, oldest first."""
    ckpt = open_checkpoint(location, fs_options)
    journal = read_journal(ckpt.fs)
    rows = []
    for doc in list_manifests(ckpt.fs):
        req = doc.get("request", {})
        status = doc["status"]
        if journal and journal["backup_id"] == doc["id"] and status in (APPLYING, UNDOING):
            status = f"interrupted ({'undo' if status == UNDOING else 'apply'})"
        rows.append({
            "backup_id": doc["id"], "command": doc["command"], "status": status, "created_ms": doc.get("created_ms"),
            "target": _target_label(doc["command"], req),
            "last_committed_before": doc.get("before", {}).get("last_committed_batch"),
            "watermark_before_ms": doc.get("before", {}).get("watermark_ms"),
            "steps": doc.get("steps"),
            "files": doc.get("files") or ckpt.fs.uri(f"{OWN_DIR}/backups/{doc['id']}/files"),
        })
    return rows


# -- shared steps ----------------------------------------------------------------------------


def _repair(command: str, location: str, resume_request: Mapping[str, Any], fresh: Callable[[Checkpoint, int], Plan],
            again: Callable[[Checkpoint, Plan, int], Plan], *, execute: bool, from_plan: str | None,
            plan_out: str | None, idle_ms: int, force: bool, backup_dir: str | None, fs_options: Options,
            now: int | None, fail_after: int | None) -> dict[str, Any]:
    """One repair: finish or show an interrupted one, else plan it (``fresh``, or a saved plan checked against
    ``again``, the same request planned now) and apply it when asked."""
    now = now_ms() if now is None else now
    ckpt = open_checkpoint(location, fs_options)
    journal = read_journal(ckpt.fs)
    if journal:
        return _resume(ckpt, journal, command, resume_request, from_plan, execute, idle_ms, force, fs_options, now,
                       fail_after)
    if from_plan:
        plan = _load(from_plan, command, ckpt)
        _check_fresh(plan, lambda: again(ckpt, plan, now))
    else:
        plan = fresh(ckpt, now)
    return _finish(ckpt, plan, execute, plan_out, idle_ms, force, backup_dir, fs_options, now, fail_after)


def _target_label(command: str, request: Mapping[str, Any]) -> str:
    if "batch" in request:
        return f"batch {request['batch']}"
    if command == "relocate":
        return "this location"
    return f"watermark {request.get('watermark_ms')}"


def _sink(location: str | None, ckpt: Checkpoint, fs_options: Options) -> FileSink | None:
    if location is None:
        return None
    fs = open_fs(location, fs_options)
    require_dir(fs, "file sink")
    if fs.info(SINK_LOG) is None:
        raise MissingFileError(f"{fs.uri()} has no {SINK_LOG}/: it is not a file sink directory",
                               hint="pass the path the query writes to (its 'path' option)")
    if _inside(fs.uri(), ckpt.location) or _inside(ckpt.location, fs.uri()):
        raise CheckpointError(f"the file sink {fs.uri()} and the checkpoint {ckpt.location} overlap",
                              hint="pass the sink directory, not the checkpoint")
    return FileSink(fs, fs.uri())


def _inside(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _roots(ckpt: Checkpoint, file_sink: str | None, fs_options: Options) -> dict[str, FileSystem]:
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


def _backup_fs(backup_dir: str | None, ckpt: Checkpoint, plan: Plan, fs_options: Options) -> FileSystem | None:
    if backup_dir is None:
        return None
    fs = open_fs(backup_dir, fs_options)
    for other in (ckpt.location, plan.file_sink):
        if other and (_inside(fs.uri(), other) and not _inside(fs.uri(), f"{ckpt.location}/{OWN_DIR}")
                      or _inside(other, fs.uri())):
            raise CheckpointError(f"--backup-dir {fs.uri()} overlaps {other}",
                                  hint="put backups outside the checkpoint and the sink (or leave --backup-dir out)")
    return fs


def _finish(ckpt: Checkpoint, plan: Plan, execute: bool, plan_out: str | None, idle_ms: int, force: bool,
            backup_dir: str | None, fs_options: Options, now: int, fail_after: int | None) -> dict[str, Any]:
    plan_json = plan.to_json()
    if plan_out:
        Path(plan_out).write_text(dumps(plan), encoding="utf-8")
    doc = {**plan_json, "executed": False, "backup_id": None, "backup": None}
    if not execute:
        activity = recent_activity(ckpt, idle_ms, now)
        if activity:
            doc["warnings"].append(f"{activity}: --execute would refuse (stop the query, or --force)")
        return doc
    _check_idle(ckpt, plan, idle_ms, force, now)
    if plan.steps:
        files_fs = _backup_fs(backup_dir, ckpt, plan, fs_options)
        backup_id = new_backup_id(ckpt.fs, plan.command, now)
        backup = Backup(backup_id, ckpt.fs, _roots(ckpt, plan.file_sink, fs_options),
                        files_fs.sub(backup_id) if files_fs else None)
        backup.write_plan(plan_json)
        backup.write_manifest(plan, APPLYING)
        apply(plan, backup, now, fail_after)
        doc.update(backup_id=backup_id, backup=backup.files_location)
    doc["executed"] = True
    return doc


def _resume(ckpt: Checkpoint, journal: Mapping[str, Any], command: str, request: Mapping[str, Any],
            from_plan: str | None, execute: bool, idle_ms: int, force: bool, fs_options: Options, now: int,
            fail_after: int | None) -> dict[str, Any]:
    """Show or finish the repair a killed run left behind: the same command, no other target, no other plan."""
    doc = read_manifest(ckpt.fs, journal["backup_id"], missing_ok=True)
    if doc is None:
        raise MissingFileError(f"the journal names backup {journal['backup_id']}, which has no manifest",
                               path=f"{OWN_DIR}/journal.json", hint="wmcheck backups lists the backups there are")
    plan = manifest_plan(ckpt.fs, doc)
    hint = f"re-run 'wmcheck {plan.command} {ckpt.location} --execute' to finish it, or 'wmcheck undo {ckpt.location}'"
    if journal.get("action") == "undo":
        raise RefusedError(f"an undo of repair {doc['id']} was interrupted", hint=f"wmcheck undo {ckpt.location} finishes it")
    if plan.command != command or from_plan or any(plan.request.get(k) != v for k, v in request.items()):
        raise RefusedError(f"an interrupted {plan.command} (backup {doc['id']}, {plan.notes[0] if plan.notes else ''}) "
                           "must be finished or undone first", hint=hint)
    backup = open_backup(ckpt.fs, doc, _roots(ckpt, plan.file_sink, fs_options), fs_options)
    out = plan.to_json()
    done = sum(1 for s in plan.steps if step_done(s, backup))
    out.update(executed=False, backup_id=doc["id"], backup=backup.files_location,
               resumed={"backup_id": doc["id"], "steps_done_before": done, "steps": len(plan.steps)})
    if not execute:
        out["warnings"].insert(0, f"repair {doc['id']} was interrupted after {done} of {len(plan.steps)} steps: "
                                  f"{hint}")
        return out
    _check_idle(ckpt, plan, idle_ms, force, now)
    apply(plan, backup, now, fail_after, resume=True)
    out["executed"] = True
    return out


__all__ = ["rewind", "set_watermark", "relocate", "undo_repair", "list_backups"]
