"""Backups and the journal under ``CKPT/_wmcheck/``: nothing a repair changes is ever lost.

::

    _wmcheck/journal.json                          while a repair (or an undo) runs or after it was killed
    _wmcheck/backups/<id>/manifest.json            the plan, its status, where the saved files are
    _wmcheck/backups/<id>/files/<root>/<path>      removed files (moved there), originals of rewritten ones
    _wmcheck/backups/<id>/displaced/<root>/<path>  files found in the way by ``undo --force``

``<root>`` is ``checkpoint`` or ``sink``. With ``--backup-dir DIR`` the ``files/`` and ``displaced/``
trees live under ``DIR/<id>/`` instead; the manifest always stays in the checkpoint.
"""
from __future__ import annotations

import errno
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..errors import CheckpointError, MalformedFileError, MissingFileError
from ..fs import TEMP_SUFFIX, FileSystem, LocalFileSystem, clean_relative, open_fs
from ..layout import BACKUPS, OWN_DIR
from ..layout import REPAIR_JOURNAL as JOURNAL
from ..repair_records import MANIFEST, PLAN, parse_json, read_manifest
from .plan import Plan, plan_from_json, sha256


def transfer(src_fs: FileSystem, src: str, dst_fs: FileSystem, dst: str, made: set[str] | None = None) -> None:
    """Move a file: a rename on one store, else copy, read back and compare, then delete the source.

    ``made`` remembers local directories already created (a rewind can move many thousand files).
    """
    if isinstance(src_fs, LocalFileSystem) and isinstance(dst_fs, LocalFileSystem):
        target = dst_fs.os_path(dst)
        parent = os.path.dirname(target)
        try:
            if made is None or parent not in made:
                os.makedirs(parent, exist_ok=True)
                if made is not None:
                    made.add(parent)
            os.replace(src_fs.os_path(src), target)
            return
        except FileNotFoundError:
            raise MissingFileError("file not found", path=src) from None
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise CheckpointError(f"cannot move {src} to {target}: {exc.strerror}", path=src) from None
    elif src_fs is dst_fs:
        if not src_fs.exists(src):
            raise MissingFileError("file not found", path=src)
        src_fs.rename(src, dst)
        return
    data = src_fs.read(src)
    dst_fs.write(dst, data)
    if sha256(dst_fs.read(dst)) != sha256(data):
        raise CheckpointError(f"the copy of {src} at {dst_fs.uri(dst)} does not read back the same bytes", path=src,
                              hint="check the backup location; nothing was removed")
    src_fs.delete(src)


@dataclass
class Backup:
    """One backup: where its files go, and the roots (checkpoint, sink) its plan's paths are relative to."""

    backup_id: str
    ckpt_fs: FileSystem
    roots: Mapping[str, FileSystem]
    files_fs: FileSystem | None = None
    """None: inside the checkpoint (removals are renames there); else ``--backup-dir DIR/<id>``."""
    made: set[str] = field(default_factory=set)
    plan_sha256: str | None = None
    """The hash of ``plan.json`` (kept in the manifest: an edited plan is refused)."""

    @property
    def directory(self) -> str:
        return f"{BACKUPS}/{self.backup_id}"

    def _where(self, area: str, root: str, path: str) -> tuple[FileSystem, str]:
        rel = f"{area}/{root}/{clean_relative(path)}"
        if self.files_fs is None:
            return self.ckpt_fs, f"{self.directory}/{rel}"
        return self.files_fs, rel

    def area(self) -> tuple[FileSystem, str]:
        """Where the backup's saved and displaced files are: (file system, directory)."""
        return (self.ckpt_fs, self.directory) if self.files_fs is None else (self.files_fs, "")

    @property
    def files_location(self) -> str:
        return self.ckpt_fs.uri(f"{self.directory}/files") if self.files_fs is None else self.files_fs.uri("files")

    def has(self, root: str, path: str) -> bool:
        fs, rel = self._where("files", root, path)
        return fs.exists(rel)

    def read(self, root: str, path: str) -> bytes:
        fs, rel = self._where("files", root, path)
        return fs.read(rel)

    def save_copy(self, root: str, path: str, data: bytes) -> None:
        fs, rel = self._where("files", root, path)
        fs.write(rel, data)
        if sha256(fs.read(rel)) != sha256(data):
            raise CheckpointError(f"the backup copy of {path} does not read back the same bytes", path=path,
                                  hint="check the backup location; nothing was changed yet")

    def move_in(self, root: str, path: str) -> None:
        fs, rel = self._where("files", root, path)
        transfer(self.roots[root], path, fs, rel, self.made)

    def move_out(self, root: str, path: str) -> None:
        fs, rel = self._where("files", root, path)
        transfer(fs, rel, self.roots[root], path, self.made)

    def displace(self, root: str, path: str) -> str:
        """Move a file that is in the way of a restore aside (into ``displaced/``); returns where."""
        fs, rel = self._where("displaced", root, path)
        transfer(self.roots[root], path, fs, rel)
        return fs.uri(rel)

    # -- manifest ------------------------------------------------------------------------------

    def write_plan(self, plan_json: Mapping[str, Any]) -> None:
        """The full plan (its JSON form), written once before anything changes (compact: it can be large)."""
        data = json.dumps(plan_json, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        self.ckpt_fs.write(f"{self.directory}/{PLAN}", data)
        self.plan_sha256 = sha256(data)

    def write_manifest(self, plan: Plan, status: str, **times: int) -> None:
        """The backup's status and what it is about (small: rewritten on every status change)."""
        old: dict[str, Any] = read_manifest(self.ckpt_fs, self.backup_id, missing_ok=True) or {}
        doc: dict[str, Any] = {
            "id": self.backup_id,
            "command": plan.command,
            "status": status,
            "created_ms": old.get("created_ms", plan.created_ms),
            **{k: old[k] for k in ("applied_ms", "undone_ms") if k in old},
            **times,
            "checkpoint": plan.checkpoint,
            "file_sink": plan.file_sink,
            "files": None if self.files_fs is None else self.files_fs.uri(),
            "plan_sha256": old.get("plan_sha256", self.plan_sha256),
            "request": dict(plan.request),
            "before": dict(plan.before),
            "after": dict(plan.after),
            "steps": len(plan.steps),
        }
        self.ckpt_fs.write(f"{self.directory}/{MANIFEST}", json.dumps(doc, indent=1).encode("utf-8"))


def new_backup_id(ckpt_fs: FileSystem, command: str, now_ms: int) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now_ms / 1000)) + f"{now_ms % 1000:03d}Z"
    base = f"{stamp}-{command}"
    taken = {i.name for i in ckpt_fs.list_dir(BACKUPS)}
    suffix = 2
    backup_id = base
    while backup_id in taken:
        backup_id, suffix = f"{base}-{suffix}", suffix + 1
    return backup_id


def manifest_plan(ckpt_fs: FileSystem, doc: Mapping[str, Any]) -> Plan:
    """The plan a backup was made for, refused when it was edited since (its hash is in the manifest)."""
    path = f"{BACKUPS}/{clean_relative(str(doc['id']))}/{PLAN}"
    data = ckpt_fs.read(path)
    expected = doc.get("plan_sha256")
    if expected is not None and sha256(data) != expected:
        raise MalformedFileError("the repair's plan was changed after the repair was made", path=path,
                                 hint="restore the original plan.json; wmcheck does not undo or finish an edited plan")
    plan = plan_from_json(parse_json(data, path, "a wmcheck plan"), path)
    if plan.command != doc.get("command") or plan.file_sink != doc.get("file_sink"):
        raise MalformedFileError("the plan does not match the backup's manifest (command or file sink)", path=path,
                                 hint="restore the original plan.json and manifest.json")
    return plan


def open_backup(ckpt_fs: FileSystem, doc: Mapping[str, Any], roots: Mapping[str, FileSystem],
                fs_options: Mapping[str, str] | None = None) -> Backup:
    files = doc.get("files")
    return Backup(doc["id"], ckpt_fs, roots, open_fs(files, fs_options) if files else None)


def write_journal(ckpt_fs: FileSystem, backup_id: str, command: str, action: str, now_ms: int) -> None:
    doc = {"backup_id": backup_id, "command": command, "action": action, "started_ms": now_ms}
    ckpt_fs.write(JOURNAL, json.dumps(doc).encode("utf-8"))


def clear_journal(ckpt_fs: FileSystem) -> None:
    ckpt_fs.delete(JOURNAL)


def tidy(ckpt_fs: FileSystem) -> None:
    """Remove what a run killed before its first change left in ``_wmcheck/`` (held lock only): backups
    without a manifest (a plan only) and temp files."""
    for info in ckpt_fs.list_dir(OWN_DIR):
        if info.name.endswith(TEMP_SUFFIX) and not info.name.startswith(".lock."):
            ckpt_fs.delete(info.path)
    for info in ckpt_fs.list_dir(BACKUPS):
        if not info.is_dir:
            continue
        names = ckpt_fs.names(info.path)
        if MANIFEST not in names:
            ckpt_fs.delete(info.path)
        for name in names:
            if name.endswith(TEMP_SUFFIX):
                ckpt_fs.delete(f"{info.path}/{name}")
