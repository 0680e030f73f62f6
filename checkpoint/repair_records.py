"""What a wmcheck repair leaves in a checkpoint, read back: the journal of a running (or killed) repair and the
backups' manifests (``_wmcheck/journal.json``, ``_wmcheck/backups/<id>/manifest.json``); checks and repairs read them."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

from .errors import MalformedFileError, MissingFileError
from .fs import FileSystem, clean_relative
from .layout import BACKUPS
from .layout import REPAIR_JOURNAL as JOURNAL

MANIFEST = "manifest.json"
PLAN = "plan.json"
APPLYING, APPLIED, UNDOING, UNDONE = "applying", "applied", "undoing", "undone"


def read_manifest(ckpt_fs: FileSystem, backup_id: str, missing_ok: bool = False) -> dict[str, Any] | None:
    path = f"{BACKUPS}/{clean_relative(backup_id)}/{MANIFEST}"
    if missing_ok and not ckpt_fs.exists(path):
        return None
    doc = read_json(ckpt_fs, path, "a wmcheck backup manifest")
    if not isinstance(doc, dict) or doc.get("id") != backup_id or not isinstance(doc.get("command"), str) or \
            doc.get("status") not in (APPLYING, APPLIED, UNDOING, UNDONE):
        raise MalformedFileError("expected a wmcheck backup manifest with an id, a command and a status", path=path,
                                 hint="the manifest was edited or truncated; the backup's files are still there")
    return doc


def read_json(ckpt_fs: FileSystem, path: str, what: str) -> Any:
    return parse_json(ckpt_fs.read(path), path, what)


def parse_json(data: bytes, path: str, what: str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise MalformedFileError(f"expected {what} as JSON ({exc})", path=path,
                                 hint="it was edited or truncated; the backup's files are still there") from None


def list_manifests(ckpt_fs: FileSystem) -> list[dict[str, Any]]:
    """Every backup's manifest, oldest first."""
    docs = [read_manifest(ckpt_fs, i.name, missing_ok=True) for i in ckpt_fs.list_dir(BACKUPS) if i.is_dir]
    return sorted((d for d in docs if d), key=lambda d: (d.get("created_ms", 0), d["id"]))


def read_journal(ckpt_fs: FileSystem) -> dict[str, Any] | None:
    if not ckpt_fs.exists(JOURNAL):
        return None
    try:
        doc = json.loads(ckpt_fs.read(JOURNAL))
    except (ValueError, RecursionError):
        doc = None
    if not isinstance(doc, dict) or not isinstance(doc.get("backup_id"), str):
        raise MalformedFileError("expected the wmcheck repair journal (JSON with a backup_id)", path=JOURNAL,
                                 hint="see 'wmcheck backups' for the repair it belongs to; remove it by hand "
                                      "only after checking that repair")
    return doc


@dataclass(frozen=True)
class Interrupted:
    """A repair or undo a killed run left behind: its manifest and what it was doing."""

    doc: Mapping[str, Any]
    action: str
    """``apply`` or ``undo``."""


def find_interrupted(ckpt_fs: FileSystem, docs: list[dict[str, Any]] | None = None) -> Interrupted | None:
    """The interrupted repair, from the journal or else from a manifest still ``applying``/``undoing``
    (a run killed before writing its journal, or after dropping it)."""
    journal = read_journal(ckpt_fs)
    if journal:
        doc = read_manifest(ckpt_fs, journal["backup_id"], missing_ok=True)
        if doc is None:
            raise MissingFileError(f"the journal names backup {journal['backup_id']}, which has no manifest",
                                   path=JOURNAL, hint="wmcheck backups lists the backups there are")
        return Interrupted(doc, "undo" if journal.get("action") == "undo" or doc["status"] == UNDOING else "apply")
    pending = [d for d in (list_manifests(ckpt_fs) if docs is None else docs) if d["status"] in (APPLYING, UNDOING)]
    if not pending:
        return None
    return Interrupted(pending[-1], "undo" if pending[-1]["status"] == UNDOING else "apply")
