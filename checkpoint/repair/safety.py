"""What a repair checks before (and while) it changes anything: an idle query, no symbolic links on the
way, backups apart from the data, a file sink that is one."""
from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping

from ..activity import recent_activity
from ..errors import CheckpointError, RefusedError, arg
from ..fs import FileSystem, open_fs
from ..layout import OWN_DIR
from ..model import Checkpoint, open_checkpoint
from .backup import BACKUPS
from .plan import Plan
from .requests import FsOptions, inside

IDLE_HINT = f"stop the query first; on a stopped query or a copy use {arg('idle_ms', 0)} or {arg('force')}"


def written_paths(plan: Plan) -> frozenset[str]:
    """The checkpoint files a plan writes (and their sidecars): recent because of the repair, not the query."""
    return frozenset(p for s in plan.steps if s.action == "write" and s.root == "checkpoint" for p in (s.path, s.sidecar))


def check_idle(ckpt: Checkpoint, idle_ms: int, force: bool, now: int, ignore: frozenset[str] = frozenset()) -> None:
    """Refuse when the query looks active (a file in offsets/, commits/ or state/ changed within ``idle_ms``)."""
    activity = recent_activity(ckpt, idle_ms, now, ignore)
    if activity and not force:
        raise RefusedError(activity, hint=IDLE_HINT)


def idle_guard(location: str, fs_options: FsOptions, plan: Plan, idle_ms: int, force: bool,
               clock: Callable[[], int], also: Callable[[], None]) -> Callable[[], None]:
    """The check a run repeats right before its first change and after its last one (``also`` too):
    a query that came alive meanwhile stops the run, journaled, so that ``undo`` can revert it."""
    ours = written_paths(plan)

    def guard() -> None:
        also()
        if idle_ms > 0 and not force:
            activity = recent_activity(open_checkpoint(location, fs_options), idle_ms, clock(), ours)
            if activity:
                raise RefusedError(f"stopped: {activity} (it changed while the repair ran)",
                                   hint="stop the query, then run 'wmcheck undo CKPT' (or re-run the repair)")

    return guard


def link_problems(roots: Mapping[str, FileSystem], plan: Plan) -> list[str]:
    """Symbolic links a repair would change files through: wmcheck refuses them (they lead outside what
    was checked: another checkpoint's files, backups written elsewhere). Every directory on the way
    counts, and every file to rewrite; a file to remove may be a link (the link itself is moved)."""
    wanted = {("checkpoint", BACKUPS)} | {(s.root, posixpath.dirname(s.path)) for s in plan.steps}
    wanted |= {(s.root, s.path) for s in plan.steps if s.action == "write"}
    found: list[str] = []
    checked: set[tuple[str, str]] = set()
    for root, path in sorted(wanted):
        parts = path.split("/") if path else []
        for i in range(1, len(parts) + 1):
            rel = "/".join(parts[:i])
            if (root, rel) in checked:
                continue
            checked.add((root, rel))
            if roots[root].is_link(rel):
                found.append(f"{rel} (in the {'file sink' if root == 'sink' else 'checkpoint'}) is a symbolic link")
                if len(found) >= 3:
                    return found
    return found


def refuse_links(roots: Mapping[str, FileSystem], plan: Plan) -> None:
    found = link_problems(roots, plan)
    if found:
        raise RefusedError(f"{'; '.join(found)}: wmcheck does not change files through symbolic links",
                           hint="replace each link by the directory or file it points to (or repair where it points)")


def backup_fs(backup_dir: str | None, ckpt: Checkpoint, file_sink: str | None, fs_options: FsOptions) -> FileSystem | None:
    """``--backup-dir``, refused when it lies inside (or holds) the checkpoint or the sink, links resolved."""
    if backup_dir is None:
        return None
    fs = open_fs(backup_dir, fs_options)
    where = fs.resolved()
    own = open_fs(ckpt.location, fs_options).resolved(OWN_DIR)
    for other in (ckpt.location, file_sink):
        if not other:
            continue
        real = open_fs(other, fs_options).resolved()
        if inside(where, real) and not inside(where, own) or inside(real, where):
            raise CheckpointError(f"{arg('backup_dir', fs.uri())} overlaps {other}", param="backup_dir",
                                  hint=f"put backups outside the checkpoint and the sink (or leave {arg('backup_dir')} out)")
    return fs.pinned()
