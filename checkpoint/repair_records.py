"""What a wmcheck repair leaves in a checkpoint, read back: the journal of a running (or killed) repair and the
head of each backup's manifest (``_wmcheck/journal.json``, ``_wmcheck/backups/<id>/manifest.json``); checks
and repairs read them. Files under ``_wmcheck/`` are read as they are (a symbolic link in their place is
refused, never followed), and a manifest whose checksum does not match its content is refused.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final, Literal, get_args

from wmcheck.checkpoint.records import dataclass

from .errors import CheckpointError, MalformedFileError, MissingFileError
from .fs import FileSystem, clean_relative
from .layout import BACKUPS
from .layout import REPAIR_JOURNAL as JOURNAL

MANIFEST = "manifest.json"
PLAN = "plan.json"
Status = Literal["applying", "applied", "undoing", "undone"]
APPLYING: Final = "applying"
APPLIED: Final = "applied"
UNDOING: Final = "undoing"
UNDONE: Final = "undone"
STATUSES: tuple[Status, ...] = get_args(Status)
Action = Literal["apply", "undo"]
CHECKSUM = "checksum"
"""The manifest's own key holding ``sha256:<hex>`` of the rest of it (:func:`checksum`)."""
EDITED_HINT = "it was edited or truncated; the backup's files are still there"


def checksum(doc: Mapping[str, Any]) -> str:
    """The checksum a manifest carries: SHA-256 of its other keys as canonical JSON."""
    body = {k: v for k, v in doc.items() if k != CHECKSUM}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class BackupHead:
    """What every reader of a backup needs: its id, command and status (the rest: ``repair.manifest``)."""

    backup_id: str
    command: str
    status: Status
    created_ms: int


def read_own(ckpt_fs: FileSystem, path: str) -> bytes:
    """A file of ``_wmcheck/`` as it is: every directory on the way a directory, the file a regular file."""
    parts = path.split("/")
    for i in range(1, len(parts)):
        got = ckpt_fs.entry("/".join(parts[:i]))
        if got is not None and (got.is_link or not got.is_dir):
            raise MalformedFileError(f"{'a symbolic link' if got.is_link else 'not a directory'} in wmcheck's own "
                                     "directory: wmcheck reads its records only as it wrote them",
                                     path="/".join(parts[:i]), hint=f"restore {parts[i - 1]} as the directory it was")
    try:
        return ckpt_fs.read_regular(path)
    except MissingFileError:
        raise
    except CheckpointError as exc:
        raise MalformedFileError(f"{exc.message}: wmcheck reads its records only as it wrote them", path=path,
                                 hint="restore the file wmcheck wrote there") from None


def manifest_json(ckpt_fs: FileSystem, backup_id: str, missing_ok: bool = False) -> tuple[BackupHead, dict[str, Any]] | None:
    """A manifest's head and its JSON (checksum verified when it has one: a manifest of an earlier wmcheck has
    none); None when absent and ``missing_ok``."""
    path = f"{BACKUPS}/{clean_relative(backup_id)}/{MANIFEST}"
    if missing_ok and ckpt_fs.entry(path) is None:
        return None
    doc = parse_json(read_own(ckpt_fs, path), path, "a wmcheck backup manifest")
    if not isinstance(doc, dict) or doc.get("id") != backup_id or not isinstance(doc.get("command"), str) or \
            doc.get("status") not in STATUSES or not isinstance(doc.get("created_ms", 0), int):
        raise MalformedFileError("expected a wmcheck backup manifest with an id, a command and a status", path=path,
                                 hint=EDITED_HINT)
    if CHECKSUM in doc and doc[CHECKSUM] != checksum(doc):
        raise MalformedFileError("the manifest does not match its checksum: it was changed after wmcheck wrote it",
                                 path=path, hint="restore the manifest.json wmcheck wrote; wmcheck does not undo or "
                                                 "finish a repair from an edited manifest")
    return BackupHead(backup_id, doc["command"], doc["status"], doc.get("created_ms", 0)), doc


def read_head(ckpt_fs: FileSystem, backup_id: str, missing_ok: bool = False) -> BackupHead | None:
    got = manifest_json(ckpt_fs, backup_id, missing_ok)
    return got[0] if got else None


def parse_json(data: bytes, path: str, what: str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise MalformedFileError(f"expected {what} as JSON ({exc})", path=path, hint=EDITED_HINT) from None


def list_heads(ckpt_fs: FileSystem) -> list[BackupHead]:
    """Every backup, oldest first."""
    heads = [read_head(ckpt_fs, i.name, missing_ok=True) for i in ckpt_fs.list_dir(BACKUPS) if i.is_dir]
    return sorted((h for h in heads if h), key=lambda h: (h.created_ms, h.backup_id))


@dataclass(frozen=True)
class Journal:
    """``_wmcheck/journal.json``: a repair (``apply``) or an undo is running, or was killed."""

    backup_id: str
    command: str
    action: Action
    started_ms: int | None


def read_journal(ckpt_fs: FileSystem) -> Journal | None:
    if ckpt_fs.entry(JOURNAL) is None:
        return None
    try:
        doc = json.loads(read_own(ckpt_fs, JOURNAL))
    except (ValueError, RecursionError, MalformedFileError):
        doc = None
    if not isinstance(doc, dict) or not isinstance(doc.get("backup_id"), str):
        raise MalformedFileError("expected the wmcheck repair journal (JSON with a backup_id)", path=JOURNAL,
                                 hint="see 'wmcheck backups' for the repair it belongs to; remove it by hand "
                                      "only after checking that repair")
    action: Action = "undo" if doc.get("action") == "undo" else "apply"
    started = doc.get("started_ms")
    return Journal(doc["backup_id"], str(doc.get("command", "repair")), action, started if isinstance(started, int) else None)


@dataclass(frozen=True)
class Interrupted:
    """A repair or undo a killed run left behind: its backup and what it was doing."""

    head: BackupHead
    action: Action


def find_interrupted(ckpt_fs: FileSystem, heads: list[BackupHead] | None = None) -> Interrupted | None:
    """The interrupted repair, from the journal or else from a manifest still ``applying``/``undoing``
    (a run killed before writing its journal, or after dropping it)."""
    journal = read_journal(ckpt_fs)
    if journal:
        head = read_head(ckpt_fs, journal.backup_id, missing_ok=True)
        if head is None:
            raise MissingFileError(f"the journal names backup {journal.backup_id}, which has no manifest",
                                   path=JOURNAL, hint="wmcheck backups lists the backups there are")
        return Interrupted(head, "undo" if journal.action == "undo" or head.status == UNDOING else "apply")
    pending = [h for h in (list_heads(ckpt_fs) if heads is None else heads) if h.status in (APPLYING, UNDOING)]
    if not pending:
        return None
    return Interrupted(pending[-1], "undo" if pending[-1].status == UNDOING else "apply")
