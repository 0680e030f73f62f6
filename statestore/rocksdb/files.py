"""A RocksDB provider snapshot of one store partition: ``V.zip`` with its SST files, opened and read in chunks.

``V.zip`` (``RocksDBFileManager``, read by :mod:`wmcheck.statestore.rocksdb.zips`) holds ``metadata``
(the ``SSTs/`` files it needs) and RocksDB's own ``CURRENT``, ``MANIFEST-*``, ``OPTIONS-*`` and
``*.log``. The table files are read with NumPy (:mod:`wmcheck.statestore.rocksdb.snapshot_rows`) where they can be; otherwise the
directory is rebuilt in a temporary folder and opened read-only through rocksdict (a maintained RocksDB
binding; raw bytes, no merge operator needed for reading merged list values).
Changelogs are applied over it by :mod:`wmcheck.statestore.engine.store_files`.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import mmap
import os
import posixpath
import tempfile
from typing import Any, Iterator, Mapping, Sequence

from wmcheck.checkpoint.errors import MalformedFileError, MissingFileError, arg
from wmcheck.checkpoint.fs import FileSystem
from wmcheck.checkpoint.records import dataclass
from wmcheck.statestore.formats.content import Damage, magic_damage, named_damage
from wmcheck.statestore.formats.files import StateFile
from wmcheck.statestore.rocksdb.snapshot_rows import snapshot_rows
from wmcheck.statestore.rocksdb.sst import verified
from wmcheck.statestore.rocksdb.sst_columns import Table, UnreadBlock, open_table
from wmcheck.statestore.rocksdb.zips import ZipMetadata, read_snapshot_zip

DAMAGED = "wmcheck check CKPT names the batch to rewind to, or restore the file from a backup"
"""The hint of a snapshot whose files Spark cannot load."""


@contextlib.contextmanager
def open_snapshot(fs: FileSystem, zip_file: StateFile, directory: str, tables: bool = True) -> Iterator["Snapshot"]:
    """A snapshot opened for reading (``directory`` holds the partition's ``SSTs/``): its table files mapped into
    memory where they lie (fetched into a temporary folder first, several at once, when the store is not a local
    disk) and verified as Spark copies them and RocksDB opens them (present, of the size the zip records, a
    table's magic number, every block's checksum: a damaged one raises, naming the table file); read with NumPy
    (:mod:`wmcheck.statestore.rocksdb.snapshot_rows`) where ``tables``, every table is in a format read there and no write-ahead log holds
    writes, else through RocksDB, the snapshot's files rebuilt in a temporary folder."""
    members, meta = read_snapshot_zip(fs.read(zip_file.path), zip_file.path)
    named = {posixpath.join(directory, zip_file.format.shared_dir or "", f.dfs_name): f for f in meta.sst_files}
    with contextlib.ExitStack() as stack:
        files = {path: fs.os_path(path) or "" for path in named}
        if not all(files.values()):
            fetched = stack.enter_context(tempfile.TemporaryDirectory(prefix="wmcheck-sst-"))
            files = {path: posixpath.join(fetched, f.local_name) for path, f in named.items()}
            try:
                fs.fetch(files)
            except MissingFileError as exc:
                if exc.path not in named:
                    raise
                _refuse(named_damage(zip_file.path, exc.path, named[exc.path], None))
        opened: list[Table | None] = []
        for path, file in files.items():  # RocksDB's iterators end at a damaged block without an error
            table = stack.enter_context(_mapped(file))
            _refuse(named_damage(zip_file.path, path, named[path], None if table is None else len(table)))
            assert table is not None
            _refuse(magic_damage(path, table))
            blocks, damaged = verified(table)
            if damaged is not None:
                raise MalformedFileError(damaged.problem, path=path, byte=damaged.byte, hint=DAMAGED)
            _release(table, 0, len(table))
            opened.append(open_table(table, blocks, functools.partial(_release, table)) if blocks else None)
        if tables and all(t is not None for t in opened) and not any(n.endswith(".log") and data for n, data in members.items()):
            yield Snapshot(meta, zip_file.path, None, [t for t in opened if t is not None])
            return
        rebuilt = stack.enter_context(tempfile.TemporaryDirectory(prefix="wmcheck-rocksdb-"))
        for name, data in members.items():
            with open(posixpath.join(rebuilt, posixpath.basename(name)), "wb") as fh:
                fh.write(data)
        for path, f in named.items():
            os.symlink(os.path.abspath(files[path]), posixpath.join(rebuilt, f.local_name))
        db = _open_db(rebuilt, zip_file.path, {f.local_name: path for path, f in named.items()})
        try:
            yield Snapshot(meta, zip_file.path, db, None)
        finally:
            db.close()


def _refuse(damage: Damage | None) -> None:
    """Raise where Spark's load of a snapshot's table file fails (``damage``)."""
    if damage is None:
        return
    kind = MissingFileError if damage.problem.startswith("missing") else MalformedFileError
    raise kind(damage.problem, path=damage.path, byte=damage.byte, hint=DAMAGED)


@contextlib.contextmanager
def _mapped(file: str) -> Iterator[Any]:
    """The local ``file`` mapped into memory read-only (its pages read as they are touched); None when it is not
    there."""
    try:
        fh = open(file, "rb")
    except FileNotFoundError:
        yield None
        return
    with fh:
        if os.fstat(fh.fileno()).st_size == 0:
            yield b""
            return
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            yield data


def _release(data: Any, start: int, end: int) -> None:
    """The pages of ``data[start:end]`` let go (read again from the file if touched again): memory holds the
    blocks being read, not the tables."""
    if isinstance(data, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        start -= start % mmap.PAGESIZE
        if end > start:
            data.madvise(mmap.MADV_DONTNEED, start, min(end, len(data)) - start)


@dataclass(frozen=True)
class Snapshot:
    """An opened snapshot: its metadata and its keys and values, read in chunks (from its ``tables``, else
    through RocksDB's ``db``)."""

    meta: ZipMetadata
    path: str
    db: Any
    tables: list[Table] | None

    def chunks(self, rows: int) -> Iterator[tuple[Sequence[bytes], Sequence[bytes]]]:
        """``(keys, values)`` of up to ``rows`` entries at a time, in RocksDB's key order (through RocksDB: keys
        and values read by two iterators over the read-only database, no tuple per entry)."""
        if self.tables is not None:
            try:
                yield from snapshot_rows(self.tables, rows)
            except UnreadBlock as exc:
                raise MalformedFileError(f"a table file of the snapshot: {exc.problem}", path=self.path,
                                         hint=f"{arg('engine', 'spark')} reads it through RocksDB") from None
            return
        keys, values = iter(self.db.keys()), iter(self.db.values())
        while chunk := list(itertools.islice(keys, rows)):
            yield chunk, list(itertools.islice(values, len(chunk)))


def _open_db(directory: str, path: str, names: Mapping[str, str]) -> Any:
    """The snapshot rebuilt in ``directory`` opened read-only; RocksDB's refusal names the snapshot's files as the
    checkpoint holds them (``names``: local file name -> path), not the temporary folder."""
    from rocksdict import AccessType, Options, Rdict

    options = Options(raw_mode=True)
    options.set_max_file_opening_threads(1)  # RocksDB's 16 threads to open the tables cost more than the few tables
    try:
        return Rdict(directory, options, access_type=AccessType.read_only())
    except Exception as exc:  # rocksdict raises plain Exceptions carrying RocksDB's status
        raise MalformedFileError(f"RocksDB cannot open the snapshot: {_in_checkpoint(str(exc), directory, names)}",
                                 path=path, hint=DAMAGED) from None


def _in_checkpoint(text: str, directory: str, names: Mapping[str, str]) -> str:
    """RocksDB's message ``text`` in one line (at most 300 characters), the files of the rebuilt ``directory``
    named as the checkpoint holds them (``names``: local file name -> path; the zip's own files by name)."""
    text = " ".join(text.split())
    for local, where in names.items():
        text = text.replace(f"{directory}/{local}", where)
    text = text.replace(f"{directory}/", "").replace(directory, "the snapshot")
    return text if len(text) <= 300 else text[:text.rfind(" ", 0, 300)] + " ..."
