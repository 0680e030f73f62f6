"""A backup's manifest (``_wmcheck/backups/<id>/manifest.json``), typed: what the repair was, its status, where
its files are, and what makes the backup trustworthy: the hashes of its plan and of the record of its
entries, the checkpoint, sink and backup locations as resolved when it was made, and its own checksum.

A manifest written by an earlier wmcheck (version 1: no checksum, no record of entries, no resolved
locations) is still read; ``undo`` then checks what it restores against the plan alone (:mod:`.trust`).
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any

from wmcheck.checkpoint.records import dataclass

from ..errors import MalformedFileError
from ..fs import FileSystem
from ..layout import BACKUPS
from ..repair_records import CHECKSUM, EDITED_HINT, MANIFEST, BackupHead, Status, checksum, manifest_json
from .plan_params import Document, Params, Position, params_from_json

MANIFEST_VERSION = 2


@dataclass(frozen=True)
class Resolved(Document):
    """The locations a repair changed, with symbolic links resolved when it began (None: not local, or none)."""

    checkpoint: str | None
    file_sink: str | None = None
    files: str | None = None
    """``--backup-dir DIR/<id>``."""


@dataclass(frozen=True)
class Manifest:
    """One backup: its head (id, command, status), the repair it belongs to and how to check its files."""

    head: BackupHead
    checkpoint: str | None
    file_sink: str | None
    files: str | None
    """``--backup-dir DIR/<id>`` when the files are kept there, else None (inside the checkpoint)."""
    request: Params
    before: Position
    after: Position
    steps: int | None
    plan_sha256: str | None
    entries_sha256: str | None = None
    """The hash of the record of every saved entry (:mod:`.entries`); None in a version 1 manifest."""
    resolved: Resolved | None = None
    applied_ms: int | None = None
    undone_ms: int | None = None
    version: int = MANIFEST_VERSION
    delta_table: str | None = None
    """The Delta sink table the repair restores (None: none)."""
    delta_version_before: int | None = None
    """Its version before the repair: what ``undo`` restores it to."""

    @property
    def backup_id(self) -> str:
        return self.head.backup_id

    @property
    def command(self) -> str:
        return self.head.command

    @property
    def status(self) -> Status:
        return self.head.status

    @property
    def created_ms(self) -> int:
        return self.head.created_ms

    def with_status(self, status: Status, applied_ms: int | None = None, undone_ms: int | None = None) -> Manifest:
        return dataclasses.replace(self, head=dataclasses.replace(self.head, status=status),
                                   applied_ms=applied_ms or self.applied_ms, undone_ms=undone_ms or self.undone_ms)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "id": self.backup_id, "version": self.version, "command": self.command, "status": self.status,
            "created_ms": self.created_ms,
            **{k: v for k, v in (("applied_ms", self.applied_ms), ("undone_ms", self.undone_ms)) if v is not None},
            "checkpoint": self.checkpoint, "file_sink": self.file_sink, "files": self.files,
            "plan_sha256": self.plan_sha256, "entries_sha256": self.entries_sha256,
            "resolved": None if self.resolved is None else self.resolved.to_json(),
            "request": self.request.to_json(), "before": self.before.to_json(), "after": self.after.to_json(),
            "steps": self.steps,
            **({"delta_table": self.delta_table, "delta_version_before": self.delta_version_before}
               if self.delta_table is not None else {}),
        }
        doc[CHECKSUM] = checksum(doc)
        return doc


def manifest_path(backup_id: str) -> str:
    return f"{BACKUPS}/{backup_id}/{MANIFEST}"


def read_manifest(ckpt_fs: FileSystem, backup_id: str, missing_ok: bool = False) -> Manifest | None:
    """The manifest of backup ``backup_id`` (refused when edited since wmcheck wrote it)."""
    got = manifest_json(ckpt_fs, backup_id, missing_ok)
    if got is None:
        return None
    head, doc = got
    path = manifest_path(backup_id)
    if CHECKSUM not in doc and doc.get("version") is not None:
        raise MalformedFileError("the manifest lacks its checksum", path=path, hint=EDITED_HINT)
    try:
        resolved = doc.get("resolved")
        return Manifest(
            head=head, checkpoint=_text(doc.get("checkpoint")), file_sink=_text(doc.get("file_sink")),
            files=_text(doc.get("files")), request=params_from_json(head.command, doc.get("request")),
            before=Position.from_json(doc.get("before")), after=Position.from_json(doc.get("after")),
            steps=_count(doc.get("steps")), plan_sha256=_text(doc.get("plan_sha256")),
            entries_sha256=_text(doc.get("entries_sha256")),
            resolved=None if resolved is None else Resolved.from_json(resolved),
            applied_ms=_count(doc.get("applied_ms")), undone_ms=_count(doc.get("undone_ms")),
            version=int(doc.get("version", 1)), delta_table=_text(doc.get("delta_table")),
            delta_version_before=_count(doc.get("delta_version_before")),
        )
    except (AttributeError, TypeError, ValueError) as exc:
        raise MalformedFileError(f"expected a wmcheck backup manifest ({exc})", path=path, hint=EDITED_HINT) from None


def write_manifest(ckpt_fs: FileSystem, manifest: Manifest) -> None:
    ckpt_fs.write(manifest_path(manifest.backup_id), json.dumps(manifest.to_json(), indent=1).encode("utf-8"))


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"expected a string, found {type(value).__name__}")


def _count(value: Any) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise TypeError(f"expected an integer, found {type(value).__name__}")
