"""A backup is untrusted input: what ``undo`` (and a resumed run) checks before its first change.

Anything that can write into ``_wmcheck/backups/`` (a sync tool, a restore from an archive, a colleague's
copy) could otherwise make undo act outside the checkpoint. So, before anything changes:

* the checkpoint, the file sink and the backup directory still resolve where they did when the repair
  began (a location given through a symbolic link that points elsewhere now is refused);
* nothing in the backup is a symbolic link, except a link the repair itself saved there: no directory
  on the way to a saved file leads elsewhere;
* every entry undo restores is what was recorded when it was saved: a regular file of the recorded size
  and SHA-256 and no more hard links than it had then, or the very link that was saved. A backup made by
  an earlier wmcheck records no entries: its files are checked against the plan (regular files of the
  planned size, rewritten originals by their hashes) and it may hold no link.

Each refusal is one line naming the path.
"""
from __future__ import annotations

import os
from collections.abc import Iterator

from ..errors import RefusedError
from ..fs import FileSystem
from .backup import Backup
from .entries import Entry
from .manifest import Manifest, Resolved
from .plan import Plan, Root

UNTRUSTED_HINT = ("restore the backup as wmcheck left it (from where it was copied), or leave it alone: undo changes "
                  "nothing until every file it restores is the one that was saved")


def resolved_root(fs: FileSystem) -> str | None:
    """Where a local root really is (links resolved), None elsewhere."""
    real = fs.os_path()
    return os.path.realpath(real) if real is not None else None


def resolved(ckpt_fs: FileSystem, sink_fs: FileSystem | None, files_fs: FileSystem | None) -> Resolved:
    return Resolved(resolved_root(ckpt_fs), resolved_root(sink_fs) if sink_fs else None,
                    resolved_root(files_fs) if files_fs else None)


def same_places(manifest: Manifest, location: str, sink: str | None, sink_fs: FileSystem | None, ckpt_fs: FileSystem,
                files_fs: FileSystem | None) -> None:
    """Refuse when a location the repair was given (the checkpoint, the sink as recorded, the backup directory)
    now resolves somewhere else than when the repair began."""
    then = manifest.resolved
    if then is None:
        return
    checks = [("the checkpoint", manifest.checkpoint, location, then.checkpoint, ckpt_fs),
              ("the file sink", manifest.file_sink, sink, then.file_sink, sink_fs),
              ("the backup directory", manifest.files, manifest.files, then.files, files_fs)]
    for what, recorded, given, real_then, fs in checks:
        if fs is None or real_then is None or recorded is None or given != recorded:
            continue
        real_now = resolved_root(fs)
        if real_now is not None and real_now != real_then:
            raise RefusedError(f"{what} {given} led to {real_then} when repair {manifest.backup_id} was made and leads "
                               f"to {real_now} now (a symbolic link was changed): undo changes nothing there",
                               path=given, hint=f"point the link back at {real_then}, or undo there")


def check_area(backup: Backup) -> None:
    """Refuse a symbolic link anywhere in the backup (its files and displaced areas, the directories on the way)
    but where the record says a link was saved."""
    fs, top = backup.area()
    parts = top.split("/") if top else []
    for i in range(1, len(parts) + 1):
        got = fs.entry("/".join(parts[:i]))
        if got is not None and (got.is_link or not got.is_dir):
            raise _untrusted("/".join(parts[:i]), "a symbolic link" if got.is_link else "not a directory")
    for path in _links(fs, top):
        if not _saved_link(backup, top, path):
            raise _untrusted(path, "a symbolic link where the repair saved none")


def _links(fs: FileSystem, top: str) -> Iterator[str]:
    """Every symbolic link below ``top`` (never entered), as a path of ``fs``; none on stores without links."""
    real = fs.os_path(top)
    if real is None:
        return
    stack = [(real, top)]
    while stack:
        here, rel = stack.pop()
        try:
            entries = list(os.scandir(here))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:  # the kinds come with the listing: no call per file
            path = f"{rel}/{entry.name}" if rel else entry.name
            if entry.is_symlink():
                yield path
            elif entry.is_dir(follow_symlinks=False):
                stack.append((entry.path, path))


def _saved_link(backup: Backup, top: str, path: str) -> bool:
    """Whether the link at ``path`` (in the backup's area ``top``) is one the repair saved, or one undo put aside."""
    area, _, rest = (path[len(top) + 1:] if top else path).partition("/")
    if area == "displaced":
        return True
    root, _, inner = rest.partition("/")
    saved = backup.record.get(root, inner) if backup.record is not None else None
    return area == "files" and saved is not None and saved.kind == "link"


def check_saved(plan: Plan, backup: Backup) -> list[Entry]:
    """Refuse unless every entry undo would restore from the backup is the one that was saved, and every file the
    repair removed is in the backup or still in place; returns the entries found in the backup."""
    found: list[Entry] = []
    for step in plan.steps:
        if step.action == "remove":
            if not _check(backup, step.root, step.path, step.size, None, found) and \
                    backup.roots[step.root].entry(step.path) is None:
                raise _untrusted(backup.where("files", step.root, step.path)[1], "nothing where the repair moved "
                                 f"{step.path} (and it is not in place either)")
        else:
            _check(backup, step.root, step.path, step.size, step.sha256, found)
            _check(backup, step.root, step.sidecar, None, step.crc_sha256, found)
    return found


def _check(backup: Backup, root: Root, path: str, size: int | None, sha256: str | None, found_so_far: list[Entry]) -> bool:
    """Whether the backup holds ``path`` of ``root`` (added to ``found_so_far``); refused when what it holds is not
    what was saved."""
    found = backup.saved(root, path)
    if found is None:
        return False
    found_so_far.append(found)
    where = backup.where("files", root, path)[1]
    record = backup.record
    if record is not None:
        expected = record.get(root, path)
        if expected is None:
            raise _untrusted(where, "a file the repair did not save")
        if not expected.same(found):
            raise _untrusted(where, f"{_describe(found)}, not the {_describe(expected)} that was saved")
        if found.kind == "file" and found.nlink > expected.nlink:
            raise _untrusted(where, f"a file with {found.nlink} names (hard links), {expected.nlink} when it was saved: "
                                    "another name, maybe outside the checkpoint, shares its bytes")
        return True
    if found.kind != "file":
        raise _untrusted(where, "a symbolic link (a backup of an earlier wmcheck holds files only)")
    if sha256 is not None and found.sha256 != sha256:
        raise _untrusted(where, "not the original the plan recorded (its SHA-256 differs)")
    if sha256 is None and size is not None and found.size != size:
        raise _untrusted(where, f"a file of {found.size} bytes, the plan removed one of {size}")
    return True


def _describe(entry: Entry) -> str:
    return "link" if entry.kind == "link" else f"file of {entry.size} bytes (SHA-256 {entry.sha256[:12]}…)"


def _untrusted(path: str, what: str) -> RefusedError:
    return RefusedError(f"the backup holds {what}: undo changes nothing", path=path, hint=UNTRUSTED_HINT)
