"""Which state partition Spark sends a state key to: ``HashPartitioning`` of a stateful operator's keys, i.e.
``pmod(Murmur3Hash(key columns, seed 42), partitions)``, computed from the key's ``UnsafeRow`` bytes.

Spark's ``Murmur3HashFunction`` folds the key's columns left to right, each hashed with the previous hash as its
seed (``Murmur3_x86_32``): integers, dates and booleans (0/1) with ``hashInt``, longs and timestamps with
``hashLong``, floats and doubles by their bits (-0.0 as 0.0), strings and binaries with ``hashUnsafeBytes`` (whole
4-byte little-endian words, then each remaining byte as a signed int), a struct's fields folded the same way, a
null column leaving the hash as it was. A key of any other type: None (not known here).
"""
from __future__ import annotations

import struct
from itertools import islice
from typing import Callable, Iterable, Iterator

from wmcheck.checkpoint.errors import CheckpointError
from wmcheck.checkpoint.records import dataclass
from wmcheck.statestore.formats.codecs import decompress
from wmcheck.statestore.formats.records import DELETE, PUT, changelog_records, sized_records
from wmcheck.statestore.formats.row_checksums import CHECKSUM_BYTES
from wmcheck.statestore.formats.schema import DataType, StructType
from wmcheck.statestore.rocksdb.sst import CheckedTable
from wmcheck.statestore.rocksdb.sst_columns import table_puts

SEED = 42
C1, C2, MASK = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & MASK


def _mix_k1(k1: int) -> int:
    return (_rotl((k1 * C1) & MASK, 15) * C2) & MASK


def _mix_h1(h1: int, k1: int) -> int:
    return (_rotl(h1 ^ k1, 13) * 5 + 0xE6546B64) & MASK


def _fmix(h1: int, length: int) -> int:
    h1 ^= length
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & MASK
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & MASK
    return h1 ^ (h1 >> 16)


def hash_int(value: int, seed: int) -> int:
    return _fmix(_mix_h1(seed, _mix_k1(value & MASK)), 4)


def hash_long(value: int, seed: int) -> int:
    h1 = _mix_h1(seed, _mix_k1(value & MASK))
    return _fmix(_mix_h1(h1, _mix_k1((value >> 32) & MASK)), 8)


def hash_bytes(data: bytes, seed: int) -> int:
    aligned = len(data) - len(data) % 4
    h1 = seed
    for (word,) in struct.iter_unpack("<I", data[:aligned]):
        h1 = _mix_h1(h1, _mix_k1(word))
    for byte in data[aligned:]:
        h1 = _mix_h1(h1, _mix_k1((byte - 256 if byte > 127 else byte) & MASK))
    return _fmix(h1, len(data))


Slot = Callable[[bytes, int, int, int], int]
"""hash of a non-null column: (row bytes, row start, slot offset, seed) -> hash."""


def _fixed(fmt: str, hasher: Callable[[int, int], int]) -> Slot:
    return lambda buf, base, at, seed: hasher(struct.unpack_from(fmt, buf, at)[0], seed)


def _floating(fmt: str, bits: str, nan: int, hasher: Callable[[int, int], int]) -> Slot:
    """A float or double hashed by its bits as Java's floatToIntBits/doubleToLongBits give them: -0.0 as 0.0, every
    NaN as the canonical one."""

    def run(buf: bytes, base: int, at: int, seed: int) -> int:
        (value,) = struct.unpack_from(fmt, buf, at)
        if value != value:
            return hasher(nan, seed)
        return hasher(struct.unpack(bits, struct.pack(fmt, value + 0.0))[0], seed)

    return run


def _variable(buf: bytes, base: int, at: int) -> tuple[int, int]:
    (word,) = struct.unpack_from("<q", buf, at)
    return base + (word >> 32), word & MASK


def _bytes_slot(buf: bytes, base: int, at: int, seed: int) -> int:
    start, size = _variable(buf, base, at)
    return hash_bytes(buf[start:start + size], seed)


ATOMIC: dict[str, Slot] = {
    "boolean": lambda buf, base, at, seed: hash_int(buf[at], seed),
    "byte": _fixed("<b", hash_int),
    "short": _fixed("<h", hash_int),
    "integer": _fixed("<i", hash_int),
    "date": _fixed("<i", hash_int),
    "long": _fixed("<q", hash_long),
    "timestamp": _fixed("<q", hash_long),
    "timestamp_ntz": _fixed("<q", hash_long),
    "float": _floating("<f", "<i", 0x7FC00000, hash_int),
    "double": _floating("<d", "<q", 0x7FF8000000000000, hash_long),
    "string": _bytes_slot,
    "binary": _bytes_slot,
}


def _slot(data_type: DataType) -> Slot | None:
    if isinstance(data_type, StructType):
        fold = row_hasher(data_type)
        if fold is None:
            return None
        nested = fold

        def struct_slot(buf: bytes, base: int, at: int, seed: int) -> int:
            start, _ = _variable(buf, base, at)
            return nested(buf, start, seed)

        return struct_slot
    return ATOMIC.get(data_type) if isinstance(data_type, str) else None


def row_hasher(schema: StructType) -> Callable[[bytes, int, int], int] | None:
    """``(row bytes, row start, seed) -> hash`` of an ``UnsafeRow`` of ``schema``; None for a type not known here."""
    slots = [_slot(f.data_type) for f in schema.fields]
    if not slots or any(s is None for s in slots):
        return None
    width = (len(slots) + 63) // 64 * 8

    def run(buf: bytes, base: int, seed: int) -> int:
        for i, slot in enumerate(slots):
            if buf[base + i // 8] >> (i % 8) & 1:
                continue  # null: the hash stays
            assert slot is not None
            seed = slot(buf, base, base + width + 8 * i, seed)
        return seed

    return run


FIXED_TYPES = frozenset({"boolean", "byte", "short", "integer", "date", "long", "timestamp", "timestamp_ntz", "float",
                         "double"})
VARIABLE_TYPES = frozenset({"string", "binary"})
Fit = Callable[[bytes, int, int], bool]
"""Whether ``(row bytes, row start, row size)`` is an ``UnsafeRow`` of a schema, laid out as Spark writes one."""


def row_fit(schema: StructType) -> Fit | None:
    """Whether rows are laid out as ``UnsafeRowWriter`` writes a row of ``schema``: the null bits of the fields only,
    each variable-length field inside the row after the fixed part, and those fields (8-byte aligned) filling the
    row exactly; None for a type not known here. A row of another schema (another number or kind of fields) fails."""
    kinds: list[str | Fit] = []
    for field in schema.fields:
        t = field.data_type
        nested = row_fit(t) if isinstance(t, StructType) else None
        if nested is not None:
            kinds.append(nested)
        elif isinstance(t, str) and (t in FIXED_TYPES or t in VARIABLE_TYPES):
            kinds.append(t)
        else:
            return None
    count = len(kinds)
    width = (count + 63) // 64 * 8
    fixed = width + 8 * count

    def fits(buf: bytes, base: int, size: int) -> bool:
        if size < fixed or base + size > len(buf):
            return False
        bits = int.from_bytes(buf[base:base + width], "little")
        if bits >> count:
            return False  # null bits beyond the fields
        used = 0
        for i, kind in enumerate(kinds):
            if bits >> i & 1 or kind in FIXED_TYPES:
                continue
            (word,) = struct.unpack_from("<q", buf, base + width + 8 * i)
            offset, length = word >> 32, word & MASK
            if offset < fixed or offset + length > size or (callable(kind) and not kind(buf, base + offset, length)):
                return False
            used += (length + 7) // 8 * 8
        return fixed + used == size

    return fits


def key_partitioner(schema: StructType, partitions: int) -> "Partitioner | None":
    """``(key bytes, row start) -> the partition Spark sends the key to``; None for a key type not known here."""
    hasher = row_hasher(schema)
    if hasher is None or partitions < 1:
        return None
    return lambda buf, start: _signed(hasher(buf, start, SEED)) % partitions  # Python's % is Spark's pmod here


def _signed(value: int) -> int:
    return value - (1 << 32) if value > 0x7FFFFFFF else value


KEYED_BY_PARTITIONING = frozenset({"stateStoreSave", "dedupe", "flatMapGroupsWithState", "applyInPandasWithState"})
"""Operators whose default store's key is exactly the key Spark partitions their input by."""
SAMPLE = 64
"""Rows read per file: a file of another partition holds no key of this one, so each sampled key is foreign with
probability 1 - 1/partitions; a schema that does not describe the rows fails on the first."""
Partitioner = Callable[[bytes, int], int]


@dataclass(frozen=True)
class StoreRows:
    """How a store's files are read here: its key and value rows' layouts, how Spark partitions its keys (None:
    not by its whole key, or a type not hashed here), where rows start (RocksDB: after a version byte) and whether
    values carry row checksums (their layout then not checked)."""

    partition: int
    key_fit: Fit | None
    value_fit: Fit | None
    partitioner: Partitioner | None
    rocksdb: bool
    """RocksDB rows (a version byte before each row), from a changelog or a snapshot's table files."""
    row_checksums: bool

    def key_start(self, kind: str) -> int:
        """Where a record's key row starts: after RocksDB's version byte, after a deleted key's row checksum."""
        return 1 if self.rocksdb else (CHECKSUM_BYTES if kind == DELETE and self.row_checksums else 0)


@dataclass(frozen=True)
class Sample:
    """What the sampled rows of a state file show: a partition a key hashes to other than the file's, or the row
    (``key``/``value``) its schema does not describe."""

    owner: int | None = None
    misfit: str | None = None
    rows: int = 0
    """Rows sampled (up to the first that does not fit)."""
    values: int = 0
    """Values among them checked against the value schema (not deletes)."""


def sample_rows(data: bytes, path: str, rows: StoreRows, codec: str) -> Sample:
    """The first sampled row of a state file that does not fit the store's schema, else the first key of another
    partition."""
    rows_of = changelog_records if rows.rocksdb else sized_records
    return _sample(_until_cut(rows_of(decompress(data, codec, path, PREFIX), path)), rows)


PREFIX = 1 << 20
"""Bytes of a state file decompressed to sample its first rows (the content check reads it all)."""


def _until_cut(records: Iterator[tuple[str, bytes, bytes | None]]) -> Iterator[tuple[str, bytes, bytes | None]]:
    """The first :data:`SAMPLE` records, ending quietly where the decompressed prefix cuts one."""
    try:
        yield from islice(records, SAMPLE)
    except CheckpointError:
        return


def sample_table(table: CheckedTable, rows: StoreRows) -> Sample:
    """:func:`sample_rows` for a RocksDB table file of a snapshot (its rows: a version byte, then the row)."""
    return _sample(((PUT, key, value) for key, value in table_puts(table, SAMPLE)), rows)


def _sample(records: Iterable[tuple[str, bytes, bytes | None]], rows: StoreRows) -> Sample:
    owner, count, values = None, 0, 0
    for kind, key, value in records:
        count += 1
        start = rows.key_start(kind)
        if rows.key_fit is not None and not rows.key_fit(key, start, len(key) - start):
            return Sample(misfit="key", rows=count, values=values)
        skip = 1 if rows.rocksdb else 0
        if value is not None and kind != DELETE and rows.value_fit is not None and not rows.row_checksums:
            values += 1
            if not rows.value_fit(value, skip, len(value) - skip):
                return Sample(misfit="value", rows=count, values=values)
        if owner is None and rows.partitioner is not None and rows.partitioner(key, start) != rows.partition:
            owner = rows.partitioner(key, start)
    return Sample(owner=owner, rows=count, values=values)
