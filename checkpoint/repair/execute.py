"""Applying a plan step by step, resuming a killed run, and undoing a repair byte for byte.

Order of a run: the manifest (the plan) and the journal are written, the original of every file to
be rewritten is copied into the backup, then the steps run in plan order (for a rewind: commits and
offsets from the highest batch down, state from the highest version down, source logs, the sink
log, the sink's data files). Every step is idempotent and tells from the files whether it is done,
so running the same plan again after a crash finishes it, and undo reverts exactly the steps done.
"""
from __future__ import annotations

import posixpath
from typing import Callable

from ..checksums import hadoop_crc_for
from ..errors import CheckpointError, MissingFileError, RefusedError, arg
from ..fs import TEMP_SUFFIX, FileSystem
from ..layout import COMMITS, OFFSETS
from ..numbers import is_number
from ..repair_records import APPLIED, APPLYING, UNDOING, UNDONE
from .backup import Backup, clear_journal, write_journal
from .entries import read_entry
from .plan import Plan, Step, sha256
from .results import Restored

MAX_SHOWN = 5


class InjectedFailure(RuntimeError):
    """The simulated crash of the ``fail_after`` test hook."""


NOT_A_FILE = "not a regular file"
"""What :func:`_hash` says of a link, a directory or a special file: never any file's hash."""


def _hash(fs: FileSystem, path: str) -> str | None:
    """The hash of the regular file at ``path`` (None when nothing is there), links not followed."""
    info = fs.entry(path)
    if info is None:
        return None
    return NOT_A_FILE if info.is_link or info.is_dir or info.special else sha256(fs.read_regular(path))


def _there(fs: FileSystem, path: str) -> bool:
    """Whether anything is at ``path`` (a dangling link too)."""
    return fs.entry(path) is not None


def _changed(step: Step, what: str) -> CheckpointError:
    return CheckpointError(
        f"{what} since the plan was made", path=step.path,
        hint="something else changed the checkpoint: run 'wmcheck undo' to revert what was done, then plan again",
    )


def apply(plan: Plan, backup: Backup, now_ms: int, fail_after: int | None = None, resume: bool = False,
          guard: Callable[[], None] | None = None, then: Callable[[], None] | None = None) -> None:
    """Run (or finish) ``plan``: save originals, apply each step, mark the backup applied, drop the journal.

    A fresh plan was checked against the files moments ago; a resumed one is checked step by step
    (a file to remove must still have its planned size). ``guard`` runs before the first change and
    after the last one (the active-query check): if it raises, the run stops journaled, as if killed.
    ``fail_after=k`` raises :class:`InjectedFailure` once ``k`` steps are done (a test hook). ``then`` is a change
    that is no file step (a sink's table restored), made after the last step and before the backup is marked
    applied: it must tell by itself whether a killed run made it already.
    """
    write_journal(backup.ckpt_fs, backup.backup_id, plan.command, "apply", now_ms)
    _save_originals(plan, backup)
    if guard:
        guard()
    for index, step in enumerate(plan.steps):
        if fail_after == index:
            raise InjectedFailure(f"injected failure after {index} of {len(plan.steps)} steps")
        try:
            apply_step(step, backup, resume)
        except (CheckpointError, OSError) as exc:
            raise half_done(plan, index, exc, "apply") from None
    if fail_after == len(plan.steps):
        raise InjectedFailure(f"injected failure after all {len(plan.steps)} steps")
    if then:
        then()
    if guard:
        guard()
    if resume:
        remove_temps(plan, backup)
    backup.set_status(APPLIED, applied_ms=now_ms)
    clear_journal(backup.ckpt_fs)


def half_done(plan: Plan, index: int, exc: CheckpointError | OSError, action: str) -> CheckpointError:
    """The one line of a run that failed part way: what failed, that the checkpoint is half changed, and the two
    ways out (``action``: ``apply`` or ``undo``)."""
    if isinstance(exc, CheckpointError):
        what, path = exc.message, exc.path
    else:
        what, path = exc.strerror or str(exc), exc.filename
    where = plan.checkpoint
    if action == "undo":
        return CheckpointError(f"{what}; undo stopped at step {index} of {len(plan.steps)}: the checkpoint is half "
                               "restored", path=path,
                               hint=f"fix the cause, then 'wmcheck undo {where}' finishes restoring it")
    return CheckpointError(f"{what}; the repair stopped at step {index + 1} of {len(plan.steps)}: the checkpoint is half "
                           "repaired", path=path,
                           hint=f"'wmcheck undo {where}' restores it, or re-running 'wmcheck {plan.command} {where} "
                                "--execute' (the same options) finishes it once the cause is fixed")


def remove_temps(plan: Plan, backup: Backup) -> None:
    """Delete the temp files a killed write left next to the files of ``plan`` (and in the backup)."""
    dirs = {(s.root, posixpath.dirname(s.path)) for s in plan.steps}
    for root, directory in sorted(dirs):
        fs = backup.roots[root]
        for info in fs.list_dir(directory):
            if info.name.endswith(TEMP_SUFFIX) and (info.is_link or not info.is_dir):
                fs.delete(info.path)
    fs, top = backup.area()
    stack = [top]
    while stack:  # never into a linked directory
        for info in fs.list_dir(stack.pop()):
            if info.name.endswith(TEMP_SUFFIX) and (info.is_link or not info.is_dir):
                fs.delete(info.path)
            elif info.is_dir and not info.is_link:
                stack.append(info.path)


def _save_originals(plan: Plan, backup: Backup) -> None:
    """Copy every file a write step replaces (and its checksum sidecar) into the backup, once."""
    for step in plan.steps:
        if step.action != "write":
            continue
        fs = backup.roots[step.root]
        for path, expected in ((step.path, step.sha256), (step.sidecar, step.crc_sha256)):
            if expected is None or backup.has(step.root, path):
                continue
            data = fs.read_regular(path)
            if sha256(data) != expected:
                raise _changed(step, f"{path} changed")
            backup.save_copy(step.root, path, data)


def apply_step(step: Step, backup: Backup, verify: bool) -> None:
    """Apply one step (idempotent); with ``verify``, a file to remove must still have its planned size."""
    fs = backup.roots[step.root]
    if step.action == "remove":
        info = fs.entry(step.path) if verify else None
        if info is not None and not info.is_link and info.size != step.size:
            raise _changed(step, f"the file has {info.size} bytes, not {step.size},")
        try:
            backup.move_in(step.root, step.path)
        except MissingFileError:
            if not backup.has(step.root, step.path):
                raise _changed(step, "the file vanished") from None
        return
    current = _hash(fs, step.path)
    if current != step.new_sha256:
        if current != step.sha256:
            raise _changed(step, "the file changed")
        if _there(fs, step.sidecar):
            fs.delete(step.sidecar)  # its original is in the backup; no stale checksum while data changes
        fs.write(step.path, step.data or b"")
    if step.crc:
        crc = hadoop_crc_for(step.data or b"")
        if _hash(fs, step.sidecar) != sha256(crc):
            fs.write(step.sidecar, crc)


def step_done(step: Step, backup: Backup) -> bool:
    """Whether a step of an interrupted run was applied (for showing progress)."""
    fs = backup.roots[step.root]
    if step.action == "remove":
        return not _there(fs, step.path) and backup.has(step.root, step.path)
    return _hash(fs, step.path) == step.new_sha256


# -- undo --------------------------------------------------------------------------------------


def undo_conflicts(plan: Plan, backup: Backup, partial: bool) -> list[str]:
    """What changed since the repair (a restart of the query, a hand edit); ``partial``: an interrupted run."""
    out = []
    for step in plan.steps:
        fs = backup.roots[step.root]
        if step.action == "remove":
            if _there(fs, step.path) and backup.has(step.root, step.path):
                if not partial or not _same(fs, step, backup):
                    out.append(f"{step.path} exists again")
            elif _there(fs, step.path) and not partial:
                out.append(f"{step.path} exists again")
        else:
            allowed = {step.new_sha256} | ({step.sha256} if partial else set())
            current = _hash(fs, step.path)
            if current not in allowed:
                out.append(f"{step.path} {'is not a regular file' if current == NOT_A_FILE else 'changed'} since the repair")
    if not partial:
        ckpt = backup.ckpt_fs
        last = plan.after.last_batch
        for name in (OFFSETS, COMMITS):
            newer = sorted(int(i.name) for i in ckpt.list_dir(name) if is_number(i.name) and last is not None
                           and int(i.name) > last)
            if newer and not any(s.path == f"{name}/{newer[0]}" for s in plan.steps):
                out.append(f"{name}/{newer[0]} was written after the repair (the query ran since)")
    return out


def undo(plan: Plan, backup: Backup, status: str, now_ms: int, force: bool = False,
         fail_after: int | None = None) -> list[Restored]:
    """Revert every applied step of ``plan`` in reverse order; returns what was restored.

    ``fail_after=k`` raises :class:`InjectedFailure` once ``k`` steps are reverted (a test hook).
    """
    partial = status in (APPLYING, UNDOING)
    conflicts = undo_conflicts(plan, backup, partial)
    if conflicts and not force:
        raise RefusedError(
            f"the checkpoint changed since repair {backup.backup_id}: " + "; ".join(conflicts[:MAX_SHOWN])
            + (f" (and {len(conflicts) - MAX_SHOWN} more)" if len(conflicts) > MAX_SHOWN else ""),
            hint=f"stop the query; {arg('force')} restores anyway and moves the files in the way into the backup's displaced/",
        )
    backup.set_status(UNDOING)
    write_journal(backup.ckpt_fs, backup.backup_id, plan.command, "undo", now_ms)
    restored = []
    for done, index in enumerate(range(len(plan.steps) - 1, -1, -1)):
        if fail_after == done:
            raise InjectedFailure(f"injected failure after reverting {done} of {len(plan.steps)} steps")
        step = plan.steps[index]
        try:
            how = _revert(step, backup)
        except (CheckpointError, OSError) as exc:
            raise half_done(plan, done, exc, "undo") from None
        if how:
            restored.append(Restored(index, step.action, step.root, step.path, how))
    if fail_after == len(plan.steps):
        raise InjectedFailure(f"injected failure after reverting all {len(plan.steps)} steps")
    remove_temps(plan, backup)
    clear_journal(backup.ckpt_fs)  # first: a kill before the next line leaves an "undoing" manifest, finished by undo
    backup.set_status(UNDONE, undone_ms=now_ms)
    return restored[::-1]


def _same(fs: FileSystem, step: Step, backup: Backup) -> bool:
    """Whether the entry at the step's path holds what the backup holds for it (a file's bytes, a link's target)."""
    saved = backup.saved(step.root, step.path)
    return saved is not None and saved.same(read_entry(fs, step.root, step.path))


def _revert(step: Step, backup: Backup) -> str | None:
    fs = backup.roots[step.root]
    if step.action == "remove":
        if not backup.has(step.root, step.path):
            if _there(fs, step.path):
                return None  # never moved
            raise CheckpointError("the file is neither in place nor in the backup", path=step.path,
                                  hint=f"look for it under the backup's files/{step.root}/")
        if _there(fs, step.path):
            if _same(fs, step, backup):
                return None  # a copy was made but the original not yet removed
            backup.displace(step.root, step.path)
        backup.move_out(step.root, step.path)
        return "moved back"
    # The originals (file and sidecar) are saved before anything changes, so an original that is not
    # in the backup was never touched; a file the repair created is moved aside, never deleted.
    side_saved = backup.has(step.root, step.sidecar)
    side_touched = side_saved or step.crc_sha256 is None
    current = _hash(fs, step.path)
    how = None
    if step.sha256 is None:
        if current is not None:
            if side_touched and _there(fs, step.sidecar):
                fs.delete(step.sidecar)
            backup.displace(step.root, step.path)
            how = "removed"
    elif backup.has(step.root, step.path):
        original = backup.read(step.root, step.path)
        if current != sha256(original):
            if current not in (step.new_sha256, None):
                backup.displace(step.root, step.path)
            if side_touched and _there(fs, step.sidecar):
                fs.delete(step.sidecar)
            fs.write(step.path, original)
            how = "rewritten"
    elif current != step.sha256:
        raise _changed(step, "the file changed and its original is not in the backup")
    side_now = _hash(fs, step.sidecar)
    if side_saved:
        side_original = backup.read(step.root, step.sidecar)
        if side_now != sha256(side_original):
            fs.write(step.sidecar, side_original)
            how = how or "rewritten"
    elif step.crc_sha256 is None and side_now is not None:
        fs.delete(step.sidecar)
        how = how or "rewritten"
    return how
