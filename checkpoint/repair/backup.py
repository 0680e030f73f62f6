"""Backups and the journal under ``CKPT/_wmcheck/``: nothing a repair changes is ever lost.

::

    _wmcheck/journal.json                          while a repair (or an undo) runs or after it was killed
    _wmcheck/backups/<id>/manifest.json            the repair, its status, where the saved files are, checksums
    _wmcheck/backups/<id>/plan.json                the full plan (its hash in the manifest)
    _wmcheck/backups/<id>/entries.json             every saved file's kind, size and SHA-256 (its hash in the manifest)
    _wmcheck/backups/<id>/files/<root>/<path>      removed files (moved there), originals of rewritten ones
    _wmcheck/backups/<id>/displaced/<root>/<path>  files found in the way by ``undo --force``

``<root>`` is ``checkpoint`` or ``sink``. With ``--backup-dir DIR`` the ``files/`` and ``displaced/``
trees live under ``DIR/<id>/`` instead; the manifest always stays in the checkpoint.
"""
from __future__ import annotations

import dataclasses
import errno
import json
import os
import time
from dataclasses import field
from typing import Any, Mapping

from wmcheck.checkpoint.records import dataclass

from ..errors import CheckpointError, MalformedFileError, MissingFileError
from ..fs import TEMP_SUFFIX, FileSystem, clean_relative, open_fs
from ..layout import BACKUPS, OWN_DIR
from ..layout import REPAIR_JOURNAL as JOURNAL
from ..repair_records import MANIFEST, PLAN, BackupHead, Status, parse_json, read_own
from .entries import ENTRIES, Entry, EntryRecord, read_entry, record_from_json
from .manifest import Manifest, Resolved, manifest_path, write_manifest
from .plan import Plan, Root, plan_from_json, sha256


def transfer(src_fs: FileSystem, src: str, dst_fs: FileSystem, dst: str, made: set[str] | None = None) -> None:
    """Move a file or a symbolic link (the link itself, never what it points to): a rename on one store, else
    copy, read back and compare, then delete the source.

    ``made`` remembers local directories already created (a rewind can move many thousand files).
    """
    source, target = src_fs.os_path(src), dst_fs.os_path(dst)
    if source is not None and target is not None:
        parent = os.path.dirname(target)
        try:
            if made is None or parent not in made:
                os.makedirs(parent, exist_ok=True)
                if made is not None:
                    made.add(parent)
            os.replace(source, target)
            return
        except FileNotFoundError:
            raise MissingFileError("file not found", path=src) from None
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise CheckpointError(f"cannot move {src} to {dst_fs.uri(dst)}: {exc.strerror}", path=src) from None
    elif src_fs is dst_fs:
        if src_fs.entry(src) is None:
            raise MissingFileError("file not found", path=src)
        src_fs.rename(src, dst)
        return
    info = src_fs.entry(src)
    if info is None:
        raise MissingFileError("file not found", path=src)
    if info.is_link:
        link = src_fs.read_link(src)
        dst_fs.make_link(dst, link)
        if dst_fs.read_link(dst) != link:
            raise CheckpointError(f"the copy of the link {src} at {dst_fs.uri(dst)} does not point where it did",
                                  path=src, hint="check the backup location; nothing was removed")
    else:
        data = src_fs.read_regular(src)
        dst_fs.write(dst, data)
        if sha256(dst_fs.read_regular(dst)) != sha256(data):
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
    manifest: Manifest | None = None
    """As last written or read."""
    record: EntryRecord | None = None
    """Every entry saved, as recorded before the first change (None: a backup of an earlier wmcheck)."""

    @property
    def directory(self) -> str:
        return f"{BACKUPS}/{self.backup_id}"

    def where(self, area: str, root: str, path: str) -> tuple[FileSystem, str]:
        """The file system and path of ``path`` of ``root`` in the backup's ``files`` or ``displaced`` area."""
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
        fs, rel = self.where("files", root, path)
        return fs.entry(rel) is not None

    def saved(self, root: Root, path: str) -> Entry | None:
        """The entry the backup holds for ``path`` of ``root``, as it is now (None when it holds none)."""
        fs, rel = self.where("files", root, path)
        got = read_entry(fs, root, rel)
        return None if got is None else dataclasses.replace(got, path=path)

    def read(self, root: str, path: str) -> bytes:
        fs, rel = self.where("files", root, path)
        return fs.read_regular(rel)

    def save_copy(self, root: str, path: str, data: bytes) -> None:
        fs, rel = self.where("files", root, path)
        fs.write(rel, data)
        if sha256(fs.read_regular(rel)) != sha256(data):
            raise CheckpointError(f"the backup copy of {path} does not read back the same bytes", path=path,
                                  hint="check the backup location; nothing was changed yet")

    def move_in(self, root: str, path: str) -> None:
        fs, rel = self.where("files", root, path)
        transfer(self.roots[root], path, fs, rel, self.made)

    def move_out(self, root: str, path: str) -> None:
        fs, rel = self.where("files", root, path)
        transfer(fs, rel, self.roots[root], path, self.made)

    def displace(self, root: str, path: str) -> str:
        """Move a file that is in the way of a restore aside (into ``displaced/``); returns where."""
        fs, rel = self.where("displaced", root, path)
        transfer(self.roots[root], path, fs, rel)
        return fs.uri(rel)

    # -- records -------------------------------------------------------------------------------

    def write_plan(self, plan_json: Mapping[str, Any]) -> str:
        """The full plan (its JSON form), written once before anything changes (compact: it can be large);
        returns its hash."""
        return self._write_once(PLAN, plan_json)

    def write_record(self, record: EntryRecord) -> str:
        """The record of every entry the backup will hold, written once before anything changes; returns its hash."""
        self.record = record
        return self._write_once(ENTRIES, record.to_json())

    def _write_once(self, name: str, doc: Mapping[str, Any]) -> str:
        data = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        self.ckpt_fs.write(f"{self.directory}/{name}", data)
        return sha256(data)

    def start(self, plan: Plan, status: Status, plan_sha256: str, entries_sha256: str, resolved: Resolved) -> None:
        """The first manifest of a new backup."""
        head = BackupHead(self.backup_id, plan.command, status, plan.created_ms)
        table = next((s for s in plan.sinks if s.restore is not None), None)
        self.manifest = Manifest(head, plan.checkpoint, plan.file_sink, None if self.files_fs is None else
                                 self.files_fs.uri(), plan.request, plan.before, plan.after, len(plan.steps),
                                 plan_sha256, entries_sha256, resolved,
                                 delta_table=table.location if table else None,
                                 delta_version_before=table.restore.from_version if table and table.restore else None)
        write_manifest(self.ckpt_fs, self.manifest)

    def set_status(self, status: Status, applied_ms: int | None = None, undone_ms: int | None = None) -> None:
        """The backup's status (the manifest is small: rewritten on every change)."""
        assert self.manifest is not None
        self.manifest = self.manifest.with_status(status, applied_ms, undone_ms)
        write_manifest(self.ckpt_fs, self.manifest)


def new_backup_id(ckpt_fs: FileSystem, command: str, now_ms: int) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now_ms / 1000)) + f"{now_ms % 1000:03d}Z"
    base = f"{stamp}-{command}"
    taken = {i.name for i in ckpt_fs.list_dir(BACKUPS)}
    suffix = 2
    backup_id = base
    while backup_id in taken:
        backup_id, suffix = f"{base}-{suffix}", suffix + 1
    return backup_id


def manifest_plan(ckpt_fs: FileSystem, manifest: Manifest) -> Plan:
    """The plan a backup was made for, refused when it was edited since (its hash is in the manifest)."""
    path = f"{BACKUPS}/{clean_relative(manifest.backup_id)}/{PLAN}"
    data = read_own(ckpt_fs, path)
    if manifest.plan_sha256 is not None and sha256(data) != manifest.plan_sha256:
        raise MalformedFileError("the repair's plan was changed after the repair was made", path=path,
                                 hint="restore the original plan.json; wmcheck does not undo or finish an edited plan")
    plan = plan_from_json(parse_json(data, path, "a wmcheck plan"), path)
    if plan.command != manifest.command or plan.file_sink != manifest.file_sink:
        raise MalformedFileError("the plan does not match the backup's manifest (command or file sink)", path=path,
                                 hint="restore the original plan.json and manifest.json")
    return plan


def manifest_record(ckpt_fs: FileSystem, manifest: Manifest) -> EntryRecord | None:
    """The record of the backup's entries (None for a manifest of an earlier wmcheck), refused when edited."""
    if manifest.entries_sha256 is None:
        return None
    path = f"{BACKUPS}/{clean_relative(manifest.backup_id)}/{ENTRIES}"
    data = read_own(ckpt_fs, path)
    if sha256(data) != manifest.entries_sha256:
        raise MalformedFileError("the record of the backup's files was changed after the repair was made", path=path,
                                 hint="restore the original entries.json; wmcheck does not restore files it cannot vouch for")
    return record_from_json(parse_json(data, path, "the record of a wmcheck backup's files"), path)


def open_backup(ckpt_fs: FileSystem, manifest: Manifest, roots: Mapping[str, FileSystem],
                fs_options: Mapping[str, str] | None = None) -> Backup:
    files = manifest.files
    if files is not None and files.rstrip("/").rsplit("/", 1)[-1] != manifest.backup_id:
        raise MalformedFileError(f"the backup's files are said to be at {files}, which is not a directory named "
                                 f"after the backup ({manifest.backup_id})", path=manifest_path(manifest.backup_id),
                                 hint="restore the manifest.json wmcheck wrote")
    files_fs = open_fs(files, fs_options).pinned() if files else None
    return Backup(manifest.backup_id, ckpt_fs, roots, files_fs, manifest=manifest,
                  record=manifest_record(ckpt_fs, manifest))


def write_journal(ckpt_fs: FileSystem, backup_id: str, command: str, action: str, now_ms: int) -> None:
    doc = {"backup_id": backup_id, "command": command, "action": action, "started_ms": now_ms}
    ckpt_fs.write(JOURNAL, json.dumps(doc).encode("utf-8"))


def clear_journal(ckpt_fs: FileSystem) -> None:
    ckpt_fs.delete(JOURNAL)


def tidy(ckpt_fs: FileSystem) -> None:
    """Remove what a run killed before its first change left in ``_wmcheck/`` (held lock only): backups
    without a manifest (a plan only) and temp files. Symbolic links there are left alone, never followed."""
    for info in ckpt_fs.list_dir(OWN_DIR):
        if info.name.endswith(TEMP_SUFFIX) and not info.name.startswith(".lock.") and not info.is_dir:
            ckpt_fs.delete(info.path)
    for info in ckpt_fs.list_dir(BACKUPS):
        if not info.is_dir or info.is_link:
            continue
        names = ckpt_fs.names(info.path)
        if MANIFEST not in names:
            ckpt_fs.delete(info.path)
        for name in names:
            if name.endswith(TEMP_SUFFIX):
                ckpt_fs.delete(f"{info.path}/{name}")
