"""One store partition's key/value bytes at a state version, from its files (HDFS or RocksDB provider),
streamed in chunks.

The files come from :func:`wmcheck.statestore.formats.load.resolve`: the newest full copy at or before the
version (HDFS ``V.snapshot``, RocksDB ``V.zip``) then every increment after it (``V.delta``,
``V.changelog``); for checkpoint format v2 those of the lineage Spark follows. HDFS provider files without row
checksums are read at once by :mod:`wmcheck.statestore.formats.record_spans` where it can. Otherwise (the reference) the increments are read
first into an overlay (the keys they put, delete or merge); the full copy is then streamed chunk by chunk with the
overlay applied, and the keys only the overlay holds come last. Memory holds the overlay and one
chunk, not the state, whenever a full copy exists (always for RocksDB; for HDFS once Spark's
maintenance wrote a snapshot; before that every delta is an increment over the empty state).

Keys and values stay encoded here, without the row checksums of ``rowChecksum.enabled``, each
verified as Spark's reader does (:mod:`wmcheck.statestore.formats.row_checksums`).
"""
from __future__ import annotations

from contextlib import closing
from typing import Any, Generator, Iterator, Sequence

from wmcheck.checkpoint.errors import MalformedFileError, MissingFileError
from wmcheck.checkpoint.fs import FileSystem
from wmcheck.statestore.formats.codecs import decompress
from wmcheck.statestore.formats.files import StateFile, StorePartition
from wmcheck.statestore.formats.load import Lineages, resolve
from wmcheck.statestore.formats.record_spans import resolved_state
from wmcheck.statestore.formats.records import DELETE, MERGE, changelog_records, sized_records
from wmcheck.statestore.formats.row_checksums import RowPlace, verified_key, verified_value, verified_values
from wmcheck.statestore.formats.sized_columns import file_records
from wmcheck.statestore.rocksdb.files import ZipMetadata, open_snapshot

CHUNK_ROWS = 1 << 16
"""Keys and values per chunk: large enough for column-wise decoding, small enough to bound memory."""
MERGE_DELIMITER = b","
Chunk = tuple[Sequence[bytes], Sequence[bytes]]


class _Merged(bytes):
    """An overlay value merged onto whatever the full copy holds for the key (RocksDB's string append)."""


class PartitionStream:
    """The state of ``part`` at ``version``; ``checksums``: the files were written with row checksums;
    ``fast``: HDFS provider files without them are read by :mod:`wmcheck.statestore.formats.record_spans` where it can (else record by
    record only), RocksDB snapshots by :mod:`wmcheck.statestore.rocksdb.snapshot_rows` (else through RocksDB only). A version that cannot be rebuilt raises MissingFileError here, before any file is read."""

    def __init__(self, fs: FileSystem, part: StorePartition, version: int, codec: str,
                 unique_ids: dict[int, str] | None = None, checksums: bool = False, fast: bool = True) -> None:
        load = resolve(part, version, unique_ids, Lineages(fs, codec) if unique_ids else None)
        chain, missing = list(load.chain), load.missing
        if missing is not None:
            raise MissingFileError(f"state version {version} cannot be rebuilt: version {missing} has neither a snapshot "
                                   "nor an increment", path=part.directory, hint="wmcheck check CKPT explains which files are missing")
        if load.failure is not None:  # checkpoint format 2: the lineage Spark follows cannot be read
            raise MalformedFileError(f"state version {version} cannot be loaded: {load.failure.describe()}",
                                     path=load.failure.path, hint="wmcheck check CKPT says what Spark does with it")
        self.fs, self.part, self.version, self.codec, self.checksums = fs, part, version, codec, checksums
        self.fast = fast and part.provider != "rocksdb" and not checksums
        self.tables = fast
        """RocksDB snapshots' table files read with NumPy where they can be (else through RocksDB only)."""
        self.chain = chain
        self.meta: ZipMetadata | None = None
        """The RocksDB snapshot's metadata, once :meth:`chunks` opened it."""

    def chunks(self, rows: int = CHUNK_ROWS) -> Generator[Chunk, None, None]:
        """``(keys, values)`` of up to ``rows`` entries at a time; every key once."""
        chain = self.chain
        base = chain[0] if chain and chain[0].format.role == "base" else None
        state = self._resolved(base, chain[1:] if base else chain) if self.fast else None
        if state is not None:
            keys, values = state
            for start in range(0, len(keys), rows):
                yield keys[start:start + rows], values[start:start + rows]
            return
        overlay = self._overlay(chain[1:] if base else chain)
        place = RowPlace(self.part.operator_id, self.part.store, self.part.partition, self.version,
                         chain[-1].path if chain else self.part.directory)
        rocksdb = self.part.provider == "rocksdb"
        verify = self.checksums and rocksdb
        with closing(self._base(base, rows, overlay)) as chunks:  # a failed check closes the snapshot at once
            for keys, values in chunks:
                yield (keys, [verified_values(k, v, place) for k, v in zip(keys, values)]) if verify else (keys, values)
        rest_keys, rest_values = list(overlay), list[Any](overlay.values())
        if None in rest_values or any(type(v) is _Merged for v in rest_values):  # deletes, merges onto no value
            kept = [(k, bytes(v)) for k, v in zip(rest_keys, rest_values) if v is not None]
            rest_keys, rest_values = [k for k, _ in kept], [v for _, v in kept]
        for start in range(0, len(rest_keys), rows):
            keys, values = rest_keys[start:start + rows], rest_values[start:start + rows]
            yield (keys, [verified_values(k, v, place) for k, v in zip(keys, values)]) if verify else (keys, values)

    def _resolved(self, base: StateFile | None, increments: list[StateFile]) -> Chunk | None:
        """The state the files make, read at once by :mod:`wmcheck.statestore.formats.record_spans`, or None when the reference must
        read them (each file read, decompressed and its records found in the reference's order, so that
        both fail alike)."""
        contents = self.fs.read_many(f.path for f in increments)
        deltas = []
        for f in increments:
            records = file_records(decompress(contents.pop(f.path), self.codec, f.path))
            if records is None:
                return None
            deltas.append(records)
        snapshot = file_records(decompress(self.fs.read(base.path), self.codec, base.path)) if base is not None else None
        if base is not None and snapshot is None:
            return None
        return resolved_state(snapshot, deltas)

    def _overlay(self, increments: list[StateFile]) -> dict[bytes, bytes | None]:
        """What the increments do, in order: key -> value put, None (deleted) or a :class:`_Merged` suffix."""
        overlay: dict[bytes, bytes | None] = {}
        contents = self.fs.read_many(f.path for f in increments)
        for f in increments:
            data = decompress(contents.pop(f.path), self.codec, f.path)
            if f.format.decoder == "rocksdb-changelog":
                for kind, key, value in changelog_records(data, f.path):
                    if kind == DELETE:
                        overlay[key] = None
                    elif kind == MERGE and key in overlay:
                        before = overlay[key]
                        joined = value if before is None else before + MERGE_DELIMITER + value  # type: ignore[operator]
                        overlay[key] = _Merged(joined) if isinstance(before, _Merged) else bytes(joined)  # type: ignore[arg-type]
                    else:
                        overlay[key] = _Merged(value) if kind == MERGE else value  # type: ignore[arg-type]
                continue
            if not self.checksums:  # a delete's value is None: the overlay's mark for it
                overlay.update((key, value) for _, key, value in sized_records(data, f.path))
                continue
            place = RowPlace(self.part.operator_id, self.part.store, self.part.partition, f.version, f.path)
            for kind, key, value in sized_records(data, f.path):
                if kind == DELETE:
                    overlay[verified_key(key, place) if self.checksums else key] = None
                elif value is not None:
                    overlay[key] = verified_value(key, value, place) if self.checksums else value
        return overlay

    def _base(self, base: StateFile | None, rows: int, overlay: dict[bytes, bytes | None]) -> Generator[Chunk, None, None]:
        """The full copy's chunks with the overlay applied (the keys it touches taken out of it)."""
        if base is None:
            return
        for keys, values in self._full_copy(base, rows):
            if overlay and any(k in overlay for k in keys):
                kept_keys, kept_values = [], []
                for k, v in zip(keys, values):
                    if k in overlay:
                        change = overlay.pop(k)
                        if change is None:
                            continue
                        v = v + MERGE_DELIMITER + change if isinstance(change, _Merged) else change
                    kept_keys.append(k)
                    kept_values.append(v)
                keys, values = kept_keys, kept_values
            yield keys, values

    def _full_copy(self, base: StateFile, rows: int) -> Iterator[Chunk]:
        if base.format.decoder == "rocksdb-zip":
            with open_snapshot(self.fs, base, self.part.directory, self.tables) as snapshot:
                self.meta = snapshot.meta
                yield from snapshot.chunks(rows)
            return
        place = RowPlace(self.part.operator_id, self.part.store, self.part.partition, base.version, base.path)
        keys: list[bytes] = []
        values: list[bytes] = []
        for kind, key, value in sized_records(decompress(self.fs.read(base.path), self.codec, base.path), base.path):
            if kind == DELETE or value is None:
                raise MalformedFileError("expected a value size, found -1 (a snapshot holds no deletes; Spark: "
                                         "CANNOT_READ_SNAPSHOT_FILE_VALUE_SIZE)", path=base.path, hint="wmcheck check CKPT")
            keys.append(key)
            values.append(verified_value(key, value, place) if self.checksums else value)
            if len(keys) == rows:
                yield keys, values
                keys, values = [], []
        if keys:
            yield keys, values


def load_partition(fs: FileSystem, part: StorePartition, version: int, codec: str,
                   unique_ids: dict[int, str] | None = None,
                   checksums: bool = False, fast: bool = True) -> tuple[dict[bytes, bytes], ZipMetadata | None]:
    """The whole encoded state of ``part`` at ``version`` and, for RocksDB, the snapshot's metadata
    (``checksums``, ``fast``: as :class:`PartitionStream`)."""
    stream = PartitionStream(fs, part, version, codec, unique_ids, checksums, fast)
    state: dict[bytes, bytes] = {}
    for keys, values in stream.chunks():
        state.update(zip(keys, values))
    return state, stream.meta
