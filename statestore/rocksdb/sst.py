"""A RocksDB table file (``SSTs/*.sst`` of a state snapshot) verified block by block as RocksDB reads it.

Block-based table, footer of ``format_version`` 1..5 (Spark's ``stateStore.rocksdb.formatVersion``, 5 by
default): the last 53 bytes are the checksum type, the metaindex and index block handles (varints), padding, the
format version and the magic number. Every block is followed by a 5-byte trailer: its compression type and a
little-endian checksum of the block and that byte (``kCRC32c``: masked CRC32C; ``kxxHash``: XXH32;
``kxxHash64``: XXH64's low 32 bits; ``kXXH3``, RocksDB's default: XXH3-64's low 32 bits, the type byte mixed in
by ``ModifyChecksumForLastByte``).

What RocksDB reads when, with Spark's options (``max_open_files = -1``: every table opened with the database,
index and filter blocks loaded then, ``ReadOptions.verify_checksums`` on):

* when Spark opens the snapshot (its load): the footer, the metaindex block, the blocks it names (properties,
  filter, ...) and the index block;
* when a batch reads a key, or scans the state (an aggregation's or deduplication's eviction reads every row):
  the data block holding it. The load succeeded, and a scan that meets a damaged data block ends there without
  an error (Spark's iterator does not check RocksDB's status): the rows from there on are never evicted or
  emitted (WM048; restart oracle case ``rocksdb-sst-data-block-flipped-no-sidecar``).

Footers of format 6+ (checksummed footer, block checksums modified by their offset), plain tables, partitioned
indexes and compression types without a decoder here are verified only as far as the magic number.
"""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Callable, Iterator, TypeVar

from wmcheck.checkpoint.records import dataclass

if TYPE_CHECKING:
    import numpy as np

T = TypeVar("T")
BLOCK_BASED_MAGIC = 0x88E241B785F4CFF7
FOOTER = 53
TRAILER = 5
RANDOM_PRIME = 0x6B9083D9
CRC_MASK_DELTA = 0xA282EAD8


@dataclass(frozen=True)
class SstDamage:
    """Where RocksDB fails on a table file: ``at_open`` when opening the database (Spark's load fails), else
    when a batch reads the data block."""

    byte: int
    problem: str
    at_open: bool


class _Bad(Exception):
    def __init__(self, byte: int, problem: str) -> None:
        super().__init__(problem)
        self.byte, self.problem = byte, problem


def varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """The unsigned LEB128 varint at ``pos`` (before ``end``) and the position after it; ValueError past ``end``."""
    result = shift = 0
    while pos < end and shift <= 63:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
    raise ValueError("varint")


def _checksums() -> dict[int, Callable[[bytes, int], int]]:
    import xxhash

    def crc32c(block: bytes, kind: int) -> int:
        import google_crc32c

        crc = google_crc32c.extend(google_crc32c.value(block), bytes([kind]))
        return (((crc >> 15) | (crc << 17)) + CRC_MASK_DELTA) & 0xFFFFFFFF

    return {
        1: crc32c,
        2: lambda block, kind: xxhash.xxh32_intdigest(block + bytes([kind])),
        3: lambda block, kind: xxhash.xxh64_intdigest(block + bytes([kind])) & 0xFFFFFFFF,
        4: lambda block, kind: ((xxhash.xxh3_64_intdigest(block) & 0xFFFFFFFF) ^ (kind * RANDOM_PRIME)) & 0xFFFFFFFF,
    }


NAMES = {1: "CRC32C", 2: "xxHash", 3: "xxHash64", 4: "XXH3"}


class TableFile:
    def __init__(self, data: bytes) -> None:
        self.data = data
        tail = data[-FOOTER:]
        self.kind = tail[0]
        end = FOOTER - 12
        self.meta = self._handle(tail, 1, end)
        self.index = self._handle(tail, self.meta[2], end)
        self.version = struct.unpack_from("<I", tail, FOOTER - 12)[0]
        self.checksum = _checksums().get(self.kind)

    @staticmethod
    def _handle(tail: bytes, pos: int, end: int) -> tuple[int, int, int]:
        try:
            offset, pos = varint(tail, pos, end)
            size, pos = varint(tail, pos, end)
        except ValueError:
            raise _Bad(0, "expected the footer's block handles") from None
        return offset, size, pos

    def block(self, offset: int, size: int, what: str) -> tuple[bytes, int]:
        """The block at ``offset`` (its checksum verified) and its compression type."""
        if offset < 0 or offset + size + TRAILER > len(self.data) - FOOTER:
            raise _Bad(offset, f"expected the {what} ({size} bytes) inside the file, which has {len(self.data)}")
        block = self.data[offset:offset + size]
        kind = self.data[offset + size]
        stored = struct.unpack_from("<I", self.data, offset + size + 1)[0]
        if self.checksum is not None and self.checksum(block, kind) != stored:
            raise _Bad(offset, f"the {what} ({size} bytes) does not match its {NAMES[self.kind]} checksum "
                               "(RocksDB: Corruption: block checksum mismatch)")
        return block, kind


def _entries(block: bytes, values_are_handles: bool) -> list[tuple[bytes, bytes]]:
    """The (key, value) entries of an uncompressed block (prefix-compressed keys; ``values_are_handles``: an index
    block whose values are block handles without their length, ``index_value_is_delta_encoded`` with a restart at
    every entry)."""
    restarts = struct.unpack_from("<I", block, len(block) - 4)[0] & 0x7FFFFFFF
    end = len(block) - 4 - 4 * restarts
    if end < 0:
        raise ValueError("restarts")
    out, pos, key = [], 0, b""
    while pos < end:
        shared, pos = varint(block, pos, end)
        own, pos = varint(block, pos, end)
        size = 0 if values_are_handles else varint(block, pos, end)[0]
        if not values_are_handles:
            pos = varint(block, pos, end)[1]
        key = key[:shared] + block[pos:pos + own]
        pos += own
        if values_are_handles:
            start = pos
            pos = varint(block, varint(block, pos, end)[1], end)[1]
            out.append((key, block[start:pos]))
        else:
            out.append((key, block[pos:pos + size]))
            pos += size
    return out


def inflate(block: bytes, kind: int) -> bytes | None:
    """An index or meta block's contents (compression format 2: a varint of the size, then the compressed bytes);
    None for a compression type not decoded here."""
    if kind == 0:
        return block
    if kind == 1:
        import cramjam

        return bytes(cramjam.snappy.decompress_raw(block))
    size, pos = varint(block, 0, len(block))
    if kind in (4, 5):
        import lz4.block

        return lz4.block.decompress(block[pos:], uncompressed_size=size)
    if kind == 7:
        import zstandard

        return zstandard.ZstdDecompressor().decompress(block[pos:], max_output_size=size)
    return None


def _block_handles(index: bytes, delta: bool) -> list[tuple[int, int]]:
    """The data block handles of an uncompressed index block: read at once (NumPy) where every entry is a restart
    point (RocksDB's default ``index_block_restart_interval`` of 1), else entry by entry."""
    import numpy as np

    restarts = struct.unpack_from("<I", index, len(index) - 4)[0] & 0x7FFFFFFF
    end = len(index) - 4 - 4 * restarts
    if end > 0:
        u8 = np.frombuffer(index + bytes(24), np.uint8)  # varints read past an entry stay inside
        at = np.frombuffer(index, "<u4", restarts, end).astype(np.int64)
        shared, pos = varints(u8, at)
        own, pos = varints(u8, pos)
        value_end = None
        if not delta:
            size, pos = varints(u8, pos)
            value_end = pos + own + size
        offset, after = varints(u8, pos + own)
        length, after = varints(u8, after)
        following = np.append(at[1:], end)
        if not shared.any() and ((after == following) if value_end is None else (value_end == following) & (after <= value_end)).all():
            return list(zip(offset.tolist(), length.tolist()))
    return [_handle(value) for _, value in _entries(index, delta)]


def varints(u8: "np.ndarray", at: "np.ndarray") -> tuple["np.ndarray", "np.ndarray"]:
    """The varints at ``at`` of ``u8`` (up to 64 bits) and the offsets after them."""
    import numpy as np

    byte = u8[at].astype(np.int64)
    value, more, after, shift = byte & 0x7F, byte >= 0x80, at + 1, 7
    while more.any() and shift < 64:
        byte = u8[after[more]].astype(np.int64)
        value[more] |= (byte & 0x7F) << shift
        after[more] += 1
        more[more] = byte >= 0x80
        shift += 7
    return value, after


def _handle(value: bytes) -> tuple[int, int]:
    offset, pos = varint(value, 0, len(value))
    return offset, varint(value, pos, len(value))[0]


def property_value(props: dict[bytes, bytes], name: str) -> int | None:
    value = props.get(name.encode())
    try:
        return None if value is None else varint(value, 0, len(value))[0]
    except ValueError:
        return None


def data_blocks(data: bytes) -> "Blocks | None":
    """The table file ``data`` opened, its metaindex, meta and index blocks verified, its data block handles and
    its properties; None where the format is not one read here (see the module's docstring). Raises where a
    block is damaged."""
    if len(data) < FOOTER or struct.unpack_from("<Q", data, len(data) - 8)[0] != BLOCK_BASED_MAGIC:
        return None  # the magic number is rocksdb_zip.sst_footer_ok's
    table = TableFile(data)
    if table.version > 5 or table.checksum is None:
        return None
    meta, _ = table.block(table.meta[0], table.meta[1], "metaindex block")
    props: dict[bytes, bytes] = {}
    for name, value in _entries(meta, False):
        offset, size = _handle(value)
        block, kind = table.block(offset, size, f"meta block {name.decode('utf-8', 'replace')}")
        if name == b"rocksdb.properties":
            props = dict(_entries(block, False))
    plain = inflate(*table.block(table.index[0], table.index[1], "index block"))
    if plain is None or property_value(props, "rocksdb.block.based.table.index.type") not in (None, 0):
        return None
    return table, _block_handles(plain, property_value(props, "rocksdb.index.value.is.delta.encoded") == 1), props


Blocks = tuple[TableFile, list[tuple[int, int]], dict[bytes, bytes]]
"""An opened table file: :func:`data_blocks`."""


def verified(data: bytes) -> tuple[Blocks | None, SstDamage | None]:
    """:func:`data_blocks` of the table file ``data`` with every data block's checksum verified (None where the
    format is not one verified here: see the module's docstring), and where RocksDB fails on it (None where it
    reads every block)."""
    at_open = True
    try:
        found = data_blocks(data)
        if found is None:
            return None, None
        table, handles, _ = found
        at_open = False
        for offset, size in handles:
            table.block(offset, size, "data block")
    except _Bad as bad:
        return None, SstDamage(bad.byte, bad.problem, at_open)
    except Exception as exc:  # noqa: BLE001 - a block that passed its checksum but does not parse; decompressors raise their own
        return None, SstDamage(len(data) - FOOTER, f"expected a readable {'index or meta block' if at_open else 'data block'}"
                                                   f" ({type(exc).__name__}; RocksDB: Corruption)", at_open)
    return found, None


@dataclass(frozen=True, eq=False)
class CheckedTable:
    """A table file's bytes with :func:`verified`'s answer: verified once, then read by every check that samples it
    (each block hashed once)."""

    data: bytes
    blocks: Blocks | None
    damage: SstDamage | None


def checked(data: bytes) -> CheckedTable:
    """The table file ``data`` verified (:func:`verified`)."""
    return CheckedTable(data, *verified(data))


def sst_damage(data: bytes) -> SstDamage | None:
    """Where RocksDB fails on the table file ``data``, None where it reads every block (or where the format is not
    one verified here: see the module's docstring)."""
    return verified(data)[1]


VALUE_TYPES = (1, 2)
"""Entry types of a live key: ``kTypeValue`` and ``kTypeMerge`` (list state)."""
DELETE_TYPES = (0, 7)
"""Entry types of a removed key: ``kTypeDeletion`` and ``kTypeSingleDeletion``."""


@dataclass(frozen=True)
class TableEntry:
    """One entry of a table file: the user key, its sequence number and type (the internal key's trailer), value."""

    key: bytes
    sequence: int
    kind: int
    value: bytes

    @property
    def live(self) -> bool:
        return self.kind in VALUE_TYPES


class _Unread(Exception):
    """A table file, or a block of it, in a format not read here."""


def _walk(data: bytes, blocks: Blocks | None = None) -> Iterator[TableEntry]:
    """The entries of a table file's data blocks, in key order, as they are read (``blocks``: the file's, verified
    once, :func:`verified`: not hashed again); raises _Unread where the format is not one read here (see the module's
    docstring), and what the blocks raise where they are damaged."""
    found = blocks or data_blocks(data)
    if found is None:
        raise _Unread()
    table, handles, _ = found
    for offset, size in handles:
        block = inflate(data[offset:offset + size], data[offset + size]) if blocks else inflate(
            *table.block(offset, size, "data block"))
        if block is None:
            raise _Unread()
        for internal, value in _entries(block, False):
            if len(internal) > 8:
                trailer = int.from_bytes(internal[-8:], "little")
                yield TableEntry(internal[:-8], trailer >> 8, trailer & 0xFF, value)


def table_entries(data: bytes) -> Iterator[TableEntry]:
    """The entries of a table file's data blocks, in key order, as they are read; none where the file is not read
    here (see the module's docstring); where it does not parse, those before (:func:`sst_damage` says why)."""
    try:
        yield from _walk(data)
    except Exception:  # noqa: BLE001 - a damaged table is sst_damage's
        return


def read_whole(data: bytes, use: Callable[[Iterator[TableEntry]], T], blocks: Blocks | None = None) -> T | None:
    """``use`` applied to the entries of a table file as they are read (``blocks``: as :func:`_walk` takes them); None
    where the file is not read whole (a format not read here, a damaged block) or ``use`` fails on one."""
    try:
        return use(_walk(data, blocks))
    except Exception:  # noqa: BLE001 - a damaged table is sst_damage's
        return None
