"""RocksDB provider state of one store partition: the snapshot ``V.zip`` with its SST files, then changelogs.

``V.zip`` (``RocksDBFileManager``, read by :mod:`wmcheck.checkpoint.rocksdb_zip`) holds ``metadata``
(the ``SSTs/`` files it needs) and RocksDB's own ``CURRENT``, ``MANIFEST-*``, ``OPTIONS-*`` and ``*.log``. The directory is rebuilt in a temporary folder and opened read-only
through rocksdict (a maintained RocksDB binding; raw bytes, no merge operator needed for reading
merged list values). Changelogs (:mod:`.state_records`) then apply puts, deletes and merges (a
merge appends ``,`` and the value, RocksDB's ``StringAppendOperator`` as Spark configures it).
"""
from __future__ import annotations

import posixpath
import tempfile

from wmcheck.checkpoint.errors import MalformedFileError
from wmcheck.checkpoint.fs import FileSystem
from wmcheck.checkpoint.rocksdb_zip import HINT, ZipMetadata, read_snapshot_zip
from wmcheck.checkpoint.state_codecs import decompress
from wmcheck.checkpoint.state_files import StateFile
from wmcheck.checkpoint.state_records import DELETE, MERGE, changelog_records

MERGE_DELIMITER = b","
_HINT = "the RocksDB snapshot is damaged or incomplete: wmcheck check CKPT"


def read_zip(fs: FileSystem, zip_file: StateFile, directory: str) -> tuple[dict[bytes, bytes], ZipMetadata]:
    """Every key and value of a snapshot (``directory`` holds the partition's ``SSTs/``)."""
    members, meta = read_snapshot_zip(fs.read(zip_file.path), zip_file.path)
    ssts = {f.local_name: posixpath.join(directory, zip_file.format.shared_dir or "", f.dfs_name) for f in meta.sst_files}
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
        raise MalformedFileError(f"RocksDB cannot open the snapshot: {str(exc)[:200]}", path=path, hint=HINT) from None
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
