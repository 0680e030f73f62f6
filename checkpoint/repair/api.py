"""``run`` (every repair), ``undo_repair`` and ``list_backups``: the repair API, returning frozen results."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from ..activity import DEFAULT_IDLE_MS, now_ms, recent_activity
from ..errors import CheckpointError, MissingFileError, RefusedError, arg
from ..fs import FileSystem, open_fs
from ..layout import BACKUPS, OWN_DIR
from ..model import Checkpoint, open_checkpoint
from ..repair_records import APPLIED, APPLYING, UNDOING, UNDONE, BackupHead, Interrupted, find_interrupted, list_heads
from . import preflight, safety, trust
from ._hooks import current
from .backup import Backup, clear_journal, manifest_plan, new_backup_id, open_backup, tidy
from .execute import step_done, undo
from .lock import Lock, acquire
from .manifest import Manifest, read_manifest
from .plan import Plan, dumps, load_plan
from .registry import REQUESTS
from .requests import FsOptions, RepairRequest, RunOptions, UndoRequest, repair_sink
from .results import BackupRow, RepairResult, Restored, Resumed, UndoResult
from .strategy import Execution, Run


def run(location: str, request: RepairRequest, options: RunOptions | None = None) -> RepairResult:
    """Plan (and with ``options.execute`` apply) one repair; see docs/repair.md.

    An interrupted repair is shown (or with ``execute`` finished) instead, when ``request`` is for the
    same command and does not ask for another target (a repair whose strategy restarts, Spark's repartition, is
    undone and run anew). With ``execute`` the checkpoint's lock is held throughout: a second repair or undo
    meanwhile is refused. The request's execution strategy makes the changes (:mod:`.strategy`).
    """
    options = options or RunOptions()
    hooks = current()
    now = now_ms() if hooks.now is None else hooks.now
    execution = request.execution()
    ckpt = _pinned(open_checkpoint(location, options.fs_options))
    with _held(ckpt, request.command, now, options.execute) as lock:
        pending = find_interrupted(ckpt.fs)
        if pending:
            result = _resume(ckpt, pending, request, execution, options, now, hooks.fail_after, lock)
        else:
            if options.from_plan:
                plan = _load(options.from_plan, request.command, ckpt)
                _same_sink(plan, request, ckpt, options.fs_options)
                _check_fresh(plan, lambda: type(request).from_plan(plan).plan(ckpt, now, options.fs_options))
            else:
                plan = request.plan(ckpt, now, options.fs_options)
            result = _finish(ckpt, plan, execution, options, now, hooks.fail_after, lock)
        if lock and lock.took_over:
            result = dataclasses.replace(result, warnings=(lock.took_over, *result.warnings))
        return result


def _pinned(ckpt: Checkpoint) -> Checkpoint:
    """The checkpoint with the links on the way to it resolved once, now: a link switched while a repair or undo
    runs does not move what it changes."""
    fs = ckpt.fs.pinned()
    return ckpt if fs is ckpt.fs else Checkpoint(fs)


@contextmanager
def _held(ckpt: Checkpoint, command: str, now: int, execute: bool = True) -> Iterator[Lock | None]:
    """The checkpoint's lock while a repair or undo changes it (none for a dry run); left-overs of runs
    killed before their first change are tidied once it is held."""
    if not execute:
        yield None
        return
    for own in (OWN_DIR, BACKUPS):
        if ckpt.fs.is_link(own):
            raise RefusedError(f"{own} is a symbolic link: wmcheck keeps its journal and backups inside the checkpoint",
                               path=own, hint=f"replace the link by a directory (use {arg('backup_dir')} for backups "
                                              "elsewhere)")
    fresh = not ckpt.fs.exists(OWN_DIR)
    lock = acquire(ckpt.fs, command, now)
    try:
        tidy(ckpt.fs)
        yield lock
    finally:
        lock.release()
        if fresh:
            ckpt.fs.remove_empty_dir(OWN_DIR)  # a refused first repair leaves nothing behind


def undo_repair(location: str, *, backup_id: str | None = None, force: bool = False, idle_ms: int = DEFAULT_IDLE_MS,
                file_sink: str | None = None, fs_options: FsOptions = None) -> UndoResult:
    """Restore the checkpoint (and file sink) from a backup: the interrupted repair, else the latest applied.

    ``file_sink`` names the sink to restore when the checkpoint was copied or moved since the repair
    (the plan names the sink of the original location).
    """
    hooks = current()
    now = now_ms() if hooks.now is None else hooks.now
    ckpt = _pinned(open_checkpoint(location, fs_options))
    with _held(ckpt, "undo", now) as lock:
        assert lock is not None
        heads = list_heads(ckpt.fs)
        pending = find_interrupted(ckpt.fs, heads)
        if pending and backup_id not in (None, pending.head.backup_id):
            raise RefusedError(f"repair {pending.head.backup_id} was interrupted; undo or finish it before {backup_id}",
                               hint=f"wmcheck undo {location}")
        manifest = _undo_target(ckpt, heads, pending, backup_id, location)
        return _undo(ckpt, manifest, lock, force, idle_ms, file_sink, fs_options, now, hooks.fail_after)


def _undo(ckpt: Checkpoint, manifest: Manifest, lock: Lock, force: bool, idle_ms: int, file_sink: str | None,
          fs_options: FsOptions, now: int, fail_after: int | None) -> UndoResult:
    """Undo the repair of ``manifest`` while the lock is held; nothing changes until its backup checks out."""
    plan = manifest_plan(ckpt.fs, manifest)
    roots = _roots(ckpt, _undo_sink(ckpt, plan, file_sink, fs_options), fs_options)
    backup = _trusted_backup(ckpt, manifest, roots, file_sink or plan.file_sink, fs_options)
    if manifest.status == UNDONE:  # killed after the undo was recorded, before its journal was dropped
        clear_journal(ckpt.fs)
        restored: list[Restored] = []
    else:
        safety.refuse_links(roots, plan)
        preflight.survey_undo(plan, backup, trust.check_saved(plan, backup))
        safety.check_idle(ckpt, idle_ms, force, now, safety.written_paths(plan))
        request = REQUESTS.get(plan.command)
        unplanned = request.undo_unplanned(ckpt, plan, backup, now) if request else []
        restored = unplanned + undo(plan, backup, manifest.status, now, force, fail_after)
    return UndoResult(manifest.backup_id, plan.command, ckpt.location, plan.file_sink, UNDONE, manifest.status,
                      tuple(restored), plan.before.last_batch, plan.before.last_committed_batch, plan.before.watermark_ms,
                      (lock.took_over,) if lock.took_over else ())


def _undo_target(ckpt: Checkpoint, heads: list[BackupHead], pending: Interrupted | None, backup_id: str | None,
                 location: str) -> Manifest:
    """The backup ``undo`` restores: the interrupted one, else ``backup_id``, else the latest applied."""
    if pending:
        head = pending.head
    elif backup_id is not None:
        found = read_manifest(ckpt.fs, backup_id, missing_ok=True)
        if found is None:
            raise MissingFileError(f"no backup {backup_id!r} in this checkpoint", hint=f"wmcheck backups {location}")
        head = found.head
    else:
        live = [h for h in heads if h.status == APPLIED]
        if not live:
            raise RefusedError("there is no applied repair to undo", hint=f"wmcheck backups {location} lists them")
        head = live[-1]
    if head.status == UNDONE:
        raise RefusedError(f"repair {head.backup_id} was already undone", hint=f"wmcheck backups {location}")
    later = [h.backup_id for h in heads if h.status != UNDONE and (h.created_ms, h.backup_id) >
             (head.created_ms, head.backup_id)]
    if later:
        raise RefusedError(f"repair {later[-1]} was made after {head.backup_id}", hint=f"undo {later[-1]} first")
    manifest = read_manifest(ckpt.fs, head.backup_id)
    assert manifest is not None
    return manifest


def _trusted_backup(ckpt: Checkpoint, manifest: Manifest, roots: Mapping[str, FileSystem], sink: str | None,
                    fs_options: FsOptions) -> Backup:
    """The backup of ``manifest`` once its places and layout check out (:mod:`.trust`): the checkpoint, sink and
    backup directory where they were, no link in it that the repair did not save."""
    backup = open_backup(ckpt.fs, manifest, roots, fs_options)
    trust.same_places(manifest, ckpt.location, sink, roots.get("sink"), ckpt.fs, backup.files_fs)
    safety.backup_fs(manifest.files, ckpt, roots["sink"].uri() if "sink" in roots else None, fs_options)
    trust.check_area(backup)
    return backup


def _undo_sink(ckpt: Checkpoint, plan: Plan, file_sink: str | None, fs_options: FsOptions) -> str | None:
    """The file sink an undo restores, checked like a repair's: the plan's, or ``file_sink`` for a copy."""
    if plan.file_sink is None:
        if file_sink:
            raise RefusedError(f"repair made no change to a file sink; leave out the file sink {file_sink}")
        return None
    if file_sink is None and plan.checkpoint != ckpt.location:
        raise RefusedError(f"the repair was made at {plan.checkpoint}, this checkpoint is at {ckpt.location}: undo "
                           f"would restore the file sink of the original location, {plan.file_sink}",
                           hint=f"pass {arg('file_sink', 'PATH')} naming this copy's sink", param="file_sink")
    sink = repair_sink(file_sink or plan.file_sink, ckpt, fs_options)
    assert sink is not None
    return sink.location


def list_backups(location: str, *, fs_options: FsOptions = None) -> list[BackupRow]:
    """One row per backup of the checkpoint, oldest first."""
    ckpt = open_checkpoint(location, fs_options)
    heads = list_heads(ckpt.fs)
    pending = find_interrupted(ckpt.fs, heads)
    rows = []
    for head in heads:
        status: str = head.status
        if pending and pending.head.backup_id == head.backup_id and status in (APPLYING, UNDOING, APPLIED):
            status = f"interrupted ({pending.action})"
        manifest = read_manifest(ckpt.fs, head.backup_id)
        assert manifest is not None
        rows.append(BackupRow(
            backup_id=head.backup_id, command=head.command, status=status, created_ms=head.created_ms,
            target=manifest.request.label(),
            last_committed_before=manifest.before.last_committed_batch,
            watermark_before_ms=manifest.before.watermark_ms,
            steps=manifest.steps,
            files=manifest.files or ckpt.fs.uri(f"{BACKUPS}/{head.backup_id}/files"),
        ))
    return rows


# -- shared steps ----------------------------------------------------------------------------


def _roots(ckpt: Checkpoint, file_sink: str | None, fs_options: FsOptions) -> dict[str, FileSystem]:
    roots = {"checkpoint": ckpt.fs}
    if file_sink:
        roots["sink"] = open_fs(file_sink, fs_options).pinned()
    return roots


def _same_sink(plan: Plan, request: RepairRequest, ckpt: Checkpoint, fs_options: FsOptions) -> None:
    """A saved plan carries its file sink (the result names it); a command that names one must name the plan's."""
    given = getattr(request, "file_sink", None)
    if not given:
        return
    sink = repair_sink(given, ckpt, fs_options)
    if plan.file_sink == (sink.location if sink else None):
        return
    if plan.file_sink is None:
        raise RefusedError(f"the plan changes no file sink, the command names {given}", param="file_sink",
                           hint=f"leave out {arg('file_sink')}, or plan again with it")
    raise RefusedError(f"the plan changes the file sink {plan.file_sink}, the command names "
                       f"{sink.location if sink else given}: a saved plan changes only what it lists", param="file_sink",
                       hint=f"leave out {arg('file_sink')} to apply the plan as saved, or plan again with the sink meant")


def _load(path: str, command: str, ckpt: Checkpoint) -> Plan:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MissingFileError("plan file not found", path=path, hint=f"write one with {arg('plan_out', 'FILE')}",
                               param="from_plan") from None
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
    if [s.key() for s in plan.steps] == [s.key() for s in fresh.steps] and plan.request == fresh.request:
        raise RefusedError(f"the Delta sink changed since the plan was made: {_restores(plan)} then, {_restores(fresh)} now",
                           hint=f"plan again (without {arg('from_plan')}) and review the new plan", param="from_plan")
    old, new = plan.steps, fresh.steps
    index = next((i for i, (a, b) in enumerate(zip(old, new)) if a.key() != b.key()), min(len(old), len(new)))
    if index < min(len(old), len(new)) and old[index].path != new[index].path:
        what = f"step {index} was {old[index].action} {old[index].path}, now {new[index].action} {new[index].path}"
    elif index < max(len(old), len(new)):
        what = f"{(old if index < len(old) else new)[index].path} is not as it was"
    else:
        what = "the request differs"
    raise RefusedError(f"the checkpoint changed since the plan was made ({len(old)} steps then, {len(new)} now): {what}",
                       hint=f"plan again (without {arg('from_plan')}) and review the new plan", param="from_plan")


def _restores(plan: Plan) -> str:
    """What a plan does to its sinks' tables, for a refusal."""
    done = [f"its version {s.restore.from_version} restored to {s.restore.to_version}"
            for s in plan.sinks if s.restore is not None]
    return "; ".join(done) or "nothing restored"


def _finish(ckpt: Checkpoint, plan: Plan, execution: Execution, options: RunOptions, now: int, fail_after: int | None,
            lock: Lock | None) -> RepairResult:
    if options.plan_out:
        try:
            Path(options.plan_out).write_text(dumps(plan), encoding="utf-8")
        except OSError as exc:
            raise CheckpointError(f"cannot write the plan: {exc.strerror or exc}", path=options.plan_out,
                                  hint=f"pass a {arg('plan_out', 'FILE')} in a writable directory",
                                  param="plan_out") from None
    roots = _roots(ckpt, plan.file_sink, options.fs_options)
    if lock is None:
        activity = recent_activity(ckpt, options.idle_ms, now)
        extra = [f"{activity}: {arg('execute')} would refuse (stop the query, or {arg('force')})"] if activity else []
        extra += [f"{arg('execute')} would refuse: {link}" for link in safety.link_problems(roots, plan)]
        try:
            execution.check(plan, options.force)
        except CheckpointError as exc:
            extra.append(f"{arg('execute')} would refuse: {exc.message}")
        return RepairResult(plan, False, plan.warnings + tuple(extra))
    execution.check(plan, options.force)
    safety.check_idle(ckpt, options.idle_ms, options.force, now)
    if not execution.needed(plan):
        return RepairResult(plan, True, plan.warnings)
    safety.refuse_links(roots, plan)
    files_fs = safety.backup_fs(options.backup_dir, ckpt, plan.file_sink, options.fs_options)
    execution.prepare(ckpt, plan, options.fs_options)
    backup_id = new_backup_id(ckpt.fs, plan.command, now)
    backup = Backup(backup_id, ckpt.fs, roots, files_fs.sub(backup_id) if files_fs else None)
    record = preflight.survey_repair(plan, backup)
    plan_hash, record_hash = backup.write_plan(plan.to_json()), backup.write_record(record)
    backup.start(plan, APPLYING, plan_hash, record_hash, trust.resolved(ckpt.fs, roots.get("sink"), backup.files_fs))
    verification = execution.carry_out(Run(ckpt, plan, backup, options.fs_options, now, fail_after,
                                           _guard(ckpt, plan, options, lock)))
    return RepairResult(plan, True, plan.warnings, backup_id, backup.files_location, verification=verification)


def _guard(ckpt: Checkpoint, plan: Plan, options: RunOptions, lock: Lock) -> Callable[[], None]:
    clock = current().now
    return safety.idle_guard(ckpt.location, options.fs_options, plan, options.idle_ms, options.force,
                             (lambda: clock) if clock is not None else now_ms, lock.check)


def _resume(ckpt: Checkpoint, pending: Interrupted, request: RepairRequest, execution: Execution, options: RunOptions,
            now: int, fail_after: int | None, lock: Lock | None) -> RepairResult:
    """Show or finish the repair a killed run left behind: the same command, no other target, no other plan (or,
    when its strategy restarts, undo it and run the request anew)."""
    manifest = read_manifest(ckpt.fs, pending.head.backup_id)
    assert manifest is not None
    backup_id = manifest.backup_id
    plan = manifest_plan(ckpt.fs, manifest)
    hint = f"re-run 'wmcheck {plan.command} {ckpt.location} --execute' to finish it, or 'wmcheck undo {ckpt.location}'"
    if pending.action == "undo":
        raise RefusedError(f"an undo of repair {backup_id} was interrupted", hint=f"wmcheck undo {ckpt.location} finishes it")
    if plan.command != request.command or options.from_plan or request.conflicts_with(plan):
        raise RefusedError(f"an interrupted {plan.command} (backup {backup_id}, {plan.notes[0] if plan.notes else ''}) "
                           "must be finished or undone first", hint=hint)
    if lock is not None and execution.restarts(plan):
        _undo(ckpt, manifest, lock, options.force, options.idle_ms, None, options.fs_options, now, None)
        fresh = _pinned(open_checkpoint(ckpt.location, options.fs_options))
        done = _finish(fresh, request.plan(fresh, now, options.fs_options), execution, options, now, fail_after, lock)
        note = (f"{plan.command} {backup_id} was interrupted: undone first (what it wrote is in that backup), "
                "then run again")
        return dataclasses.replace(done, warnings=(note, *done.warnings))
    if plan.file_sink and plan.checkpoint != ckpt.location:
        raise RefusedError(f"the interrupted repair was made at {plan.checkpoint}, this checkpoint is at {ckpt.location}",
                           hint=f"finish or undo it there, or 'wmcheck undo {ckpt.location} --file-sink PATH' here")
    sink = repair_sink(plan.file_sink, ckpt, options.fs_options)
    roots = _roots(ckpt, sink.location if sink else None, options.fs_options)
    backup = _trusted_backup(ckpt, manifest, roots, plan.file_sink, options.fs_options)
    done_steps = sum(1 for s in plan.steps if step_done(s, backup))
    resumed = Resumed(backup_id, done_steps, len(plan.steps))
    if lock is None:
        note = f"repair {backup_id} was interrupted after {done_steps} of {len(plan.steps)} steps: {hint}"
        return RepairResult(plan, False, (note, *plan.warnings), backup_id, backup.files_location, resumed)
    safety.refuse_links(roots, plan)
    safety.check_idle(ckpt, options.idle_ms, options.force, now, safety.written_paths(plan))
    execution.carry_out(Run(ckpt, plan, backup, options.fs_options, now, fail_after, _guard(ckpt, plan, options, lock),
                            resume=True))
    return RepairResult(plan, True, plan.warnings, backup_id, backup.files_location, resumed)


def run_fix(location: str, fix: RepairRequest | UndoRequest, options: RunOptions | None = None) -> RepairResult | UndoResult:
    """Run a finding's fix as ``wmcheck check`` prints it: a repair's request through :func:`run` (a dry run unless
    ``options.execute``), an :class:`UndoRequest` through :func:`undo_repair` (which has no dry run). An instruction
    is no request: it is done by hand."""
    options = options or RunOptions()
    if isinstance(fix, UndoRequest):
        return undo_repair(location, idle_ms=options.idle_ms, force=options.force, fs_options=options.fs_options)
    if not isinstance(fix, RepairRequest):
        raise CheckpointError(f"{fix!r} is no wmcheck repair", hint="an instruction is carried out by hand")
    return run(location, fix, options)


__all__ = ["list_backups", "run", "run_fix", "undo_repair"]
