"""Decode one state file as Spark's load reads it, without keeping its rows: frame by frame, record by record,
row checksums included, and say where Spark's reader would fail (file, byte, Spark's error).

* HDFS ``V.delta``/``V.snapshot`` (``updateFromDeltaFile``, ``readSnapshotFile``): the compressed stream, then
  size-prefixed records up to the ``-1`` end mark; a snapshot holds no deletes; with row checksums every
  record's checksum is verified at load (``verificationRatio = 1``).
* RocksDB ``V.changelog`` (``replayChangelog``): the stream, its version header and lineage, every record, and
  with row checksums every record's checksum.
* RocksDB ``V.zip`` (``loadCheckpointFromDfs``): the archive entry by entry, its ``metadata``, and every file it
  names under ``SSTs/`` present with the size it records (Spark copies them and fails on another size), ending
  in a RocksDB table's magic number, and block by block as RocksDB reads it (:mod:`wmcheck.statestore.rocksdb.sst`): the footer,
  index and meta blocks when Spark opens the snapshot, the data blocks when a batch reads their rows.

Which decoder a format uses is its :attr:`~wmcheck.statestore.formats.registry.StateFormat.decoder`.
"""
from __future__ import annotations

import re
from typing import Callable, Mapping

from wmcheck.checkpoint.errors import CheckpointError, UnsupportedError
from wmcheck.checkpoint.records import dataclass
from wmcheck.statestore.formats.codecs import codec_name, decompress, require_codec, require_module
from wmcheck.statestore.formats.records import DELETE, changelog_records, sized_records
from wmcheck.statestore.formats.registry import RECORDS, ROCKSDB_CHANGELOG, ROCKSDB_ZIP, Decoder, StateFormat
from wmcheck.statestore.formats.row_checksums import RowPlace, verified_key, verified_value, verified_values
from wmcheck.statestore.formats.sized_columns import file_records
from wmcheck.statestore.rocksdb.manifest import live_files
from wmcheck.statestore.rocksdb.sst import CheckedTable
from wmcheck.statestore.rocksdb.zips import SharedFile, ZipMetadata, read_snapshot_zip, sst_footer_ok

CODEC = "spark.sql.streaming.stateStore.compression.codec"
ROW_CHECKSUM = "spark.sql.streaming.stateStore.rowChecksum.enabled"
LOAD_ERROR = "CANNOT_LOAD_STATE_STORE"


@dataclass(frozen=True)
class Damage:
    """Where and why Spark's load of a state file fails."""

    path: str
    byte: int | None
    problem: str
    version: int | None = None
    """The state version of the file whose load fails (a snapshot's, for the SST files it names)."""
    on_read: bool = False
    """Spark loads the file, and what the batch reads of it is wrong (a RocksDB data block: a scan of the state
    ends there without an error, and the rows from there on are never evicted or emitted): snapshot repair, which
    retries failed loads only, does not skip it."""

    def describe(self) -> str:
        return (f"byte {self.byte}: " if self.byte is not None else "") + self.problem


@dataclass(frozen=True)
class Decoding:
    """How a store's files are encoded: its compression codec and whether rows carry checksums."""

    codec: str
    row_checksums: bool = False

    @classmethod
    def of(cls, conf: Callable[[str], str | None]) -> "Decoding":
        """The decoding a checkpoint's pinned confs (``conf(key)``) say."""
        return cls(codec_name(conf(CODEC)), (conf(ROW_CHECKSUM) or "false").strip().lower() == "true")

    def missing_module(self) -> str | None:
        """Why this machine cannot decode the files (a package not installed), None when it can."""
        try:
            require_codec(self.codec)
            if self.row_checksums:
                require_module("google_crc32c", "verifying row checksums")
        except UnsupportedError as exc:
            return exc.message
        return None


TABLE_NAME = re.compile(r"[0-9]+\.sst")
"""RocksDB's name of table file N (``%06d.sst``, longer past a million)."""
COLUMNAR_BYTES = 1 << 20
"""Decompressed files this large are read at once (NumPy); smaller ones record by record, which costs less than
importing NumPy (``show`` of a small checkpoint stays free of it)."""


def _records(data: bytes, fmt: StateFormat, decoding: Decoding, path: str, place: RowPlace) -> None:
    """Every record read as Spark reads it: at once where a large file's records lie where Spark's sizes put them
    and carry no row checksums (:func:`wmcheck.statestore.formats.sized_columns.file_records`), else record by record (the reference, which
    raises its error)."""
    plain = decompress(data, decoding.codec, path)
    at_once = len(plain) >= COLUMNAR_BYTES and not decoding.row_checksums
    found = file_records(plain) if at_once else None
    if found is not None:
        if fmt.role == "base" and found.deleted.any():
            raise _snapshot_delete(path)
        return
    for kind, key, value in sized_records(plain, path):
        if kind == DELETE:
            if fmt.role == "base":
                raise _snapshot_delete(path)
            if decoding.row_checksums:
                verified_key(key, place)
        elif decoding.row_checksums and value is not None:
            verified_value(key, value, place)


def _snapshot_delete(path: str) -> CheckpointError:
    return CheckpointError("expected a value size, found -1 (a snapshot holds no deletes; Spark: "
                           "CANNOT_READ_SNAPSHOT_FILE_VALUE_SIZE)", path=path)


def _changelog(data: bytes, fmt: StateFormat, decoding: Decoding, path: str, place: RowPlace) -> None:
    for kind, key, value in changelog_records(decompress(data, decoding.codec, path), path):
        if not decoding.row_checksums:
            continue
        if kind == DELETE:
            verified_key(key, place)
        elif value is not None:
            verified_values(key, value, place)


def _zip(data: bytes, fmt: StateFormat, decoding: Decoding, path: str, place: RowPlace) -> None:
    read_snapshot_zip(data, path)


DECODERS: Mapping[Decoder, Callable[[bytes, StateFormat, Decoding, str, RowPlace], None]] = {
    RECORDS: _records, ROCKSDB_CHANGELOG: _changelog, ROCKSDB_ZIP: _zip,
}


def damage(data: bytes, fmt: StateFormat, decoding: Decoding, path: str, place: RowPlace) -> Damage | None:
    """Where Spark's load of the file ``data`` of format ``fmt`` fails, None when it reads it (the SST files a
    zip names are :func:`shared_damage`'s)."""
    try:
        DECODERS[fmt.decoder](data, fmt, decoding, path, place)
    except CheckpointError as exc:
        return Damage(path, exc.byte, exc.message + (f" (line {exc.line})" if exc.line is not None else ""))
    return None


def named_damage(zip_path: str, where: str, sst: SharedFile, size: int | None) -> Damage | None:
    """Where Spark's copy of the file ``where`` that the snapshot zip ``zip_path`` names (``sst``) fails: missing
    (``size`` None), or another size than the zip records; None when it copies it."""
    name = zip_path.rsplit("/", 1)[-1]
    if size is None:
        return Damage(where, None, f"missing: {name} names it (Spark: FileNotFoundException while copying "
                                   "the snapshot's files)")
    if sst.size >= 0 and size != sst.size:
        return Damage(where, None, f"{size} bytes, but {name} records {sst.size} ({LOAD_ERROR}.UNEXPECTED_FILE_SIZE)")
    return None


def magic_damage(where: str, table: bytes) -> Damage | None:
    """The table file ``where`` (its bytes ``table``) does not end as a RocksDB table (RocksDB fails to open the
    snapshot); None when it does."""
    if sst_footer_ok(table[-8:]):
        return None
    return Damage(where, max(len(table) - 8, 0), "expected a RocksDB table's magic number in the last 8 bytes "
                                                 "(RocksDB opening the snapshot: Corruption: Bad table magic number)")


def shared_damage(data: bytes, path: str, shared_dir: str, present: Mapping[str, int],
                  read: Callable[[str], CheckedTable], sidecar: Callable[[str, bytes], str | None] = lambda p, d: None,
                  ) -> Damage | None:
    """The first file a snapshot zip names that is missing from ``present`` (path -> size), has another size, does
    not match its Hadoop checksum sidecar (``sidecar(path, bytes)``: why not; Spark copies SST files through Hadoop's
    checksummed file system), does not end as a RocksDB table, or holds a block RocksDB fails on when it opens the
    snapshot (``read(path)``: the table file, verified); else a damaged data block, which Spark's scans stop at
    silently."""
    try:
        entries, meta = read_snapshot_zip(data, path)
    except CheckpointError:
        return None  # the zip itself is damage()'s
    later: Damage | None = None
    for sst in meta.sst_files:
        where = f"{shared_dir}/{sst.dfs_name}"
        named = named_damage(path, where, sst, present.get(where))
        if named is not None:
            return named
        table = read(where)
        mismatch = sidecar(where, table.data)
        if mismatch is not None:
            return Damage(where, None, f"{mismatch} (Spark copies the snapshot's SST files through Hadoop's checksummed "
                                       "file system: ChecksumException)")
        magic = magic_damage(where, table.data)
        if magic is not None:
            return magic
        found = table.damage
        if found is not None and found.at_open:
            return Damage(where, found.byte, f"{found.problem}, read when RocksDB opens the snapshot")
        if found is not None and later is None:
            later = Damage(where, found.byte, f"{found.problem}, read when a batch reads its rows (RocksDB's "
                                              "iterator ends there without an error)", on_read=True)
    return manifest_damage(entries, meta, path) or later


def manifest_damage(entries: Mapping[str, bytes], meta: ZipMetadata, path: str) -> Damage | None:
    """Where the table files the snapshot's MANIFEST leaves live are not the ones its metadata has Spark copy (a
    file missing, another size): RocksDB fails to open the snapshot. None where they are, or cannot be told."""
    current = entries.get("CURRENT")
    name = current.decode("utf-8", "replace").strip() if current is not None else ""
    live = live_files(entries[name]) if name in entries else None
    if live is None:
        return None
    copied = {int(s.local_name[:-4]): s for s in meta.sst_files if TABLE_NAME.fullmatch(s.local_name)}
    for number, size in sorted(live.items()):
        table = f"{number:06d}.sst"
        if number not in copied:
            return Damage(path, None, f"its {name} names table file {table}, which its metadata does not list, so "
                                      "Spark does not copy it: RocksDB fails to open the snapshot")
        if copied[number].size != size:
            return Damage(path, None, f"its {name} records {size} bytes for table file {table}, which its metadata "
                                      f"copies from {copied[number].dfs_name} ({copied[number].size} bytes): RocksDB "
                                      "fails to open the snapshot")
    return None
