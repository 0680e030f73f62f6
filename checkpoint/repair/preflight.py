"""Before the first change: can every entry a run moves or replaces go, and can every one it creates come?

A rename needs write access to both directories, a writable file system, and neither the file nor its
directory immutable or append-only (``chattr +i``/``+a``); a move onto another file system is a copy,
which needs the room. Each is checked on local disks before anything is written, so that a run refused
for one of them changed nothing; object stores are not checked (they fail on the call itself).
"""
from __future__ import annotations

import os
import posixpath
from dataclasses import field

from wmcheck.checkpoint.records import dataclass

from ..errors import RefusedError, arg
from ..fs import FileSystem
from .backup import Backup
from .entries import Entry, EntryRecord, locked_flags, read_entry
from .plan import Plan

MAX_SHOWN = 3


@dataclass
class Preflight:
    """Collects the entries a run will move, replace and create, then refuses with the first problems found."""

    problems: list[tuple[str, str]] = field(default_factory=list)
    """(location, why) in the order found."""
    _dirs: dict[str, str | None] = field(default_factory=dict)
    _copies: dict[int, tuple[str, int]] = field(default_factory=dict)
    """Bytes copied onto another file system, by its device: (a directory there, bytes)."""
    _near: dict[str, tuple[str, int] | None] = field(default_factory=dict)
    _devices: dict[str, int | None] = field(default_factory=dict)
    _paths: dict[tuple[int, str], str | None] = field(default_factory=dict)
    """The operating system's path of each directory seen, by (file system, directory): a run has thousands of
    files in few directories."""

    def leave(self, fs: FileSystem, path: str, entry: Entry | None) -> None:
        """The entry at ``path`` will be moved away or replaced."""
        if entry is not None and entry.locked:
            self._problem(fs.uri(path), f"the file is {entry.locked}")
        directory = posixpath.dirname(path)
        real = self._os_dir(fs, directory)
        if real is not None and real not in self._dirs:
            self._dir_real(real, fs, directory)

    def arrive(self, fs: FileSystem, path: str, size: int, source: tuple[FileSystem, str] | None = None) -> None:
        """An entry of ``size`` bytes will be created at ``path`` (moved there from ``source``, or written)."""
        directory = posixpath.dirname(path)
        real = self._os_dir(fs, directory)
        if real is None:
            return
        if real not in self._near:
            existing = _nearest(real)
            self._near[real] = None if existing is None else (existing, os.stat(existing).st_dev)
            if existing is not None and existing not in self._dirs:
                self._dir_real(existing, fs, directory)
        near = self._near[real]
        if near is None:
            return
        existing, device = near
        src = self._os_dir(source[0], posixpath.dirname(source[1])) if source else None
        if src is not None and src not in self._devices:
            self._devices[src] = _device(src)
        if src is None or self._devices[src] != device:
            where, total = self._copies.get(device, (existing, 0))
            self._copies[device] = (where, total + size)

    def check(self, doing: str) -> None:
        """Raise a RefusedError naming the first problems (``doing``: ``the repair``/``undo``)."""
        for where, needed in self._copies.values():
            st = os.statvfs(where)
            free = st.f_bavail * st.f_frsize
            if needed > free:
                self._problem(where, f"{needed} bytes are copied there and only {free} are free")
        if not self.problems:
            return
        shown = "; ".join(f"{where}: {why}" for where, why in self.problems[:MAX_SHOWN])
        more = f" (and {len(self.problems) - MAX_SHOWN} more)" if len(self.problems) > MAX_SHOWN else ""
        raise RefusedError(f"{doing} cannot make every change it needs: {shown}{more}; nothing was changed",
                           hint=_hint(self.problems[0][1]))

    def _os_dir(self, fs: FileSystem, directory: str) -> str | None:
        key = (id(fs), directory)
        if key not in self._paths:
            self._paths[key] = fs.os_path(directory)
        return self._paths[key]

    def _dir_real(self, real: str, fs: FileSystem, directory: str) -> None:
        why = self._dirs[real] = _dir_problem(real)
        if why:
            self._problem(fs.uri(directory) if real == fs.os_path(directory) else real, why)

    def _problem(self, where: str, why: str) -> None:
        self.problems.append((where, why))


def _dir_problem(real: str) -> str | None:
    """Why no entry can be added to or removed from the directory ``real`` (None: it can, or it is absent)."""
    try:
        if os.statvfs(real).f_flag & os.ST_RDONLY:
            return "the directory is on a read-only file system"
        fd = os.open(real, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return f"the directory cannot be read ({exc.strerror})"
    try:
        locked = locked_flags(fd)
    finally:
        os.close(fd)
    if locked:
        return f"the directory is {locked}"
    if not os.access(real, os.W_OK | os.X_OK, effective_ids=os.access in os.supports_effective_ids):
        return f"the directory is not writable by this user (uid {os.geteuid()})"
    return None


def _nearest(real: str) -> str | None:
    """``real`` or its nearest ancestor that exists (where a new directory would be made)."""
    while not os.path.lexists(real):
        parent = os.path.dirname(real)
        if parent == real:
            return None
        real = parent
    return real


def _device(real: str) -> int | None:
    try:
        return os.stat(real).st_dev
    except OSError:
        return None


def _hint(why: str) -> str:
    if "immutable" in why or "append-only" in why:
        return "remove the attribute (chattr -i / chattr -a as root) and run the command again"
    if "read-only" in why:
        return "remount the file system read-write, or work on a copy of the checkpoint"
    if "writable" in why:
        return "run as the user that owns the checkpoint, or give this user write access"
    if "free" in why:
        return f"free some space, or keep the backup on the same file system (leave out {arg('backup_dir')})"
    return "fix the access to the directory and run the command again"


def survey_repair(plan: Plan, backup: Backup) -> EntryRecord:
    """Before the first change of a repair: the record of every entry its backup will hold (read as it is, links
    not followed); refused, with nothing written, when one cannot be moved or replaced or the backup cannot take it."""
    check = Preflight()
    saved: list[Entry] = []
    for step in plan.steps:
        fs = backup.roots[step.root]
        if step.action == "remove":
            entry = read_entry(fs, step.root, step.path)
            if entry is None:
                raise RefusedError("the file vanished since the plan was made", path=step.path,
                                   hint="plan again (the checkpoint is changing: is the query stopped?)")
            saved.append(entry)
            check.leave(fs, step.path, entry)
            check.arrive(*backup.where("files", step.root, step.path), entry.size, (fs, step.path))
            continue
        check.leave(fs, step.path, read_entry(fs, step.root, step.path, content=False))
        for path, expected in ((step.path, step.sha256), (step.sidecar, step.crc_sha256)):
            original = read_entry(fs, step.root, path, content=False) if expected is not None else None
            if original is not None and expected is not None:
                saved.append(Entry(step.root, path, "file", original.size, expected))  # a copy: one name
                check.arrive(*backup.where("files", step.root, path), original.size)
    check.check("the repair")
    return EntryRecord.of(saved)


def survey_undo(plan: Plan, backup: Backup, saved: list[Entry]) -> None:
    """Before the first change of an undo: every entry it moves back (``saved``: as found in the backup), replaces
    or puts aside can be."""
    check = Preflight()
    for entry in saved:
        saved_fs, saved_at = backup.where("files", entry.root, entry.path)
        check.leave(saved_fs, saved_at, entry)
        check.arrive(backup.roots[entry.root], entry.path, entry.size, (saved_fs, saved_at))
    for step in plan.steps:
        live = read_entry(backup.roots[step.root], step.root, step.path, content=False)
        if live is not None:
            check.leave(backup.roots[step.root], step.path, live)
    check.check("undo")
