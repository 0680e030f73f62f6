"""A RocksDB provider snapshot of one store partition: ``V.zip`` with its SST files, opened and read in chunks.

``V.zip`` (``RocksDBFileManager``, read by :mod:`wmcheck.checkpoint.rocksdb_zip`) holds ``metadata``
(the ``SSTs/`` files it needs) and RocksDB's own ``CURRENT``, ``MANIFEST-*``, ``OPTIONS-*`` and
``*.log``. The directory is rebuilt in a temporary folder and opened read-only through rocksdict (a
maintained RocksDB binding; raw bytes, no merge operator needed for reading merged list values).
Changelogs are applied over it by :mod:`.store_files`.
"""
from __future__ import annotations

import contextlib
import itertools
import posixpath
import tempfile
from dataclasses import dataclass
from typing import Any, Iterator

from wmcheck.checkpoint.errors import MalformedFileError
from wmcheck.checkpoint.fs import FileSystem
from wmcheck.checkpoint.rocksdb_sst import sst_damage
from wmcheck.checkpoint.rocksdb_zip import HINT, ZipMetadata, read_snapshot_zip
from wmcheck.checkpoint.state_files import StateFile


@contextlib.contextmanager
def open_snapshot(fs: FileSystem, zip_file: StateFile, directory: str) -> Iterator["Snapshot"]:
    """A snapshot opened for reading (``directory`` holds the partition's ``SSTs/``): its files rebuilt in a
    temporary folder, the SST files fetched (several at once, streamed; linked when local)."""
    members, meta = read_snapshot_zip(fs.read(zip_file.path), zip_file.path)
    ssts = {posixpath.join(directory, zip_file.format.shared_dir or "", f.dfs_name): f.local_name for f in meta.sst_files}
    with tempfile.TemporaryDirectory(prefix="wmcheck-rocksdb-") as tmp:
        for name, data in members.items():
            with open(posixpath.join(tmp, posixpath.basename(name)), "wb") as fh:
                fh.write(data)
        fs.fetch({path: posixpath.join(tmp, local) for path, local in ssts.items()})
        for path, local in ssts.items():  # RocksDB's iterators end at a damaged block without an error
            with open(posixpath.join(tmp, local), "rb") as fh:
                damaged = sst_damage(fh.read())
            if damaged is not None:
                raise MalformedFileError(damaged.problem, path=path, byte=damaged.byte, hint=HINT)
        db = _open_db(tmp, zip_file.path)
        try:
            yield Snapshot(meta, db)
        finally:
            db.close()


@dataclass(frozen=True)
class Snapshot:
    """An opened snapshot: its metadata and its keys and values, read in chunks."""

    meta: ZipMetadata
    db: Any

    def chunks(self, rows: int) -> Iterator[tuple[list[bytes], list[bytes]]]:
        """``(keys, values)`` of up to ``rows`` entries at a time, in RocksDB's key order (keys and values
        read by two iterators over the read-only database: no tuple per entry)."""
        keys, values = iter(self.db.keys()), iter(self.db.values())
        while chunk := list(itertools.islice(keys, rows)):
            yield chunk, list(itertools.islice(values, len(chunk)))


def _open_db(directory: str, path: str) -> Any:
    from rocksdict import AccessType, Options, Rdict

    options = Options(raw_mode=True)
    options.set_max_file_opening_threads(1)  # RocksDB's 16 threads to open the tables cost more than the few tables
    try:
        return Rdict(directory, options, access_type=AccessType.read_only())
    except Exception as exc:  # rocksdict raises plain Exceptions carrying RocksDB's status
        raise MalformedFileError(f"RocksDB cannot open the snapshot: {str(exc)[:200]}", path=path, hint=HINT) from None
