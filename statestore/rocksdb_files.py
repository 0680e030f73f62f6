"""RocksDB provider state of one store partition: the snapshot ``V.zip`` with its SST files, then changelogs.

``V.zip`` (``RocksDBFileManager``) holds ``metadata`` (``v1`` then one JSON line: ``sstFiles``
mapping each ``localFileName`` to its ``dfsSstFileName`` in the shared ``SSTs/`` directory, and for
column families ``columnFamilyMapping`` name -> id) and RocksDB's own ``CURRENT``, ``MANIFEST-*``,
``OPTIONS-*`` and ``*.log``. The directory is rebuilt in a temporary folder and opened read-only
through rocksdict (a maintained RocksDB binding; raw bytes, no merge operator needed for reading
merged list values). Changelogs (:mod:`.state_records`) then apply puts, deletes and merges (a
merge appends ``,`` and the value, RocksDB's ``StringAppendOperator`` as Spark configures it).
"""
from __future__ import annotations

import io
import json
import posixpath
import tempfile
import zipfile
from dataclasses import dataclass, field
from typing import Mapping

from wmcheck.checkpoint.errors import MalformedFileError, arg
from wmcheck.checkpoint.fs import FileSystem
from wmcheck.checkpoint.state_files import StateFile

from .codecs import decompress
from .state_records import DELETE, MERGE, changelog_records

MERGE_DELIMITER = b","
_HINT = "the RocksDB snapshot is damaged or incomplete: wmcheck check CKPT"


@dataclass(frozen=True)
class ZipMetadata:
    """What ``V.zip``'s ``metadata`` says (only what reading needs)."""

    sst_files: Mapping[str, str]
    """local file name -> file name under ``SSTs/``."""
    column_families: Mapping[str, int] = field(default_factory=dict)


def parse_zip_metadata(data: bytes, path: str) -> ZipMetadata:
    text = data.decode("utf-8", "replace")
    first, _, rest = text.partition("\n")
    if first.strip() != "v1":
        raise MalformedFileError(f"expected the RocksDB checkpoint metadata version v1, found {first[:20]!r}", path=path,
                                 line=1, hint=f"upgrade wmcheck, or use {arg('engine', 'spark')}")
    try:
        doc = json.loads(rest)
        files = {f["localFileName"]: f["dfsSstFileName"] for f in doc.get("sstFiles", [])}
        families = {str(k): int(v) for k, v in (doc.get("columnFamilyMapping") or {}).items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        raise MalformedFileError("expected RocksDB checkpoint metadata JSON with sstFiles", path=path, line=2,
                                 hint=_HINT) from None
    return ZipMetadata(files, families)


def read_zip(fs: FileSystem, zip_file: StateFile, directory: str) -> tuple[dict[bytes, bytes], ZipMetadata]:
    """Every key and value of a snapshot (``directory`` holds the partition's ``SSTs/``)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(fs.read(zip_file.path)))
        members = {name: archive.read(name) for name in archive.namelist()}
    except zipfile.BadZipFile:
        raise MalformedFileError("expected a zip archive", path=zip_file.path, byte=0, hint=_HINT) from None
    if "metadata" not in members:
        raise MalformedFileError("expected a metadata entry in the zip archive", path=zip_file.path, hint=_HINT)
    meta = parse_zip_metadata(members.pop("metadata"), zip_file.path)
    ssts = {local: posixpath.join(directory, "SSTs", dfs) for local, dfs in meta.sst_files.items()}
    contents = fs.read_many(ssts.values())
    with tempfile.TemporaryDirectory(prefix="wmcheck-rocksdb-") as tmp:
        for name, data in members.items():
            with open(posixpath.join(tmp, posixpath.basename(name)), "wb") as fh:
                fh.write(data)
        for local, path in ssts.items():
            with open(posixpath.join(tmp, local), "wb") as fh:
                fh.write(contents[path])
        return _read_db(tmp, zip_file.path), meta


def _read_db(directory: str, path: str) -> dict[bytes, bytes]:
    from rocksdict import AccessType, Options, Rdict

    options = Options(raw_mode=True)
    try:
        db = Rdict(directory, options, access_type=AccessType.read_only())
    except Exception as exc:  # rocksdict raises plain Exceptions carrying RocksDB's status
        raise MalformedFileError(f"RocksDB cannot open the snapshot: {str(exc)[:200]}", path=path, hint=_HINT) from None
    try:
        return {bytes(k): bytes(v) for k, v in db.items()}  # type: ignore[arg-type]
    finally:
        db.close()


def apply_changelog(state: dict[bytes, bytes], data: bytes, codec: str, path: str) -> None:
    """Apply one changelog file's records to ``state``."""
    for kind, key, value in changelog_records(decompress(data, codec, path), path):
        if kind == DELETE:
            state.pop(key, None)
        elif kind == MERGE and key in state:
            state[key] = state[key] + MERGE_DELIMITER + value  # type: ignore[operator]
        else:
            state[key] = value  # type: ignore[assignment]
