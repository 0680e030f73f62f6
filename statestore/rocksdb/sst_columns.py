"""A RocksDB table file's entries read many at once with NumPy, as runs of consecutive data blocks.

A data block (see :mod:`wmcheck.statestore.rocksdb.sst` for the file's layout) is a sequence of entries, each three varints
(``shared``, ``non_shared``, ``value_length``), the key's bytes after the ``shared`` bytes it has in common with
the entry before it, and the value; then the offsets of its restart points (entries with ``shared`` 0, every
16th by default) and their count. Every restart point of a run starts a cursor: the cursors step through their
entries together, one entry each per step, so a step reads one entry of every restart interval at once. Keys
are rebuilt step by step (the shared bytes of an entry are copied from the entry before it, rebuilt the step
before); values are left where they lie in the inflated blocks. The internal key's last 8 bytes are its
sequence number and type (``kTypeValue``, deletions; :data:`wmcheck.statestore.rocksdb.sst.VALUE_TYPES`).

:func:`open_table` opens a table :func:`wmcheck.statestore.rocksdb.sst.verified` read and verified, and returns None for what it
does not read: a data block compression without a decoder here, merge operands, range deletions or a column
family other than the default (its properties say), a data block hash index; the caller reads the table
through RocksDB. A block that does not parse as RocksDB writes it raises
:class:`UnreadBlock`.
"""
from __future__ import annotations

import functools
import itertools
import struct
from typing import TYPE_CHECKING, Callable, Iterator

from wmcheck.checkpoint.records import dataclass
from wmcheck.statestore.rocksdb.sst import (
    Blocks,
    CheckedTable,
    TableFile,
    inflate,
    property_value,
    table_entries,
    varints,
)

if TYPE_CHECKING:
    from types import ModuleType

    import numpy as np

try:
    from wmcheck.statestore.rocksdb import sst_walk
except ImportError:  # not built (no C compiler where it was installed)
    NATIVE: "ModuleType | None" = None
else:
    NATIVE = sst_walk
"""The C walk of a run's entries (``sst_walk.c``), or None: the NumPy reader alone."""

PUT_RUN_ROWS = 1 << 13
"""Entries a run holds when looking for a table's first puts (a table may begin with many deletes)."""
PAD = 64
"""Bytes after a run's blocks: rows of keys up to this wide are read without copying the run."""
PUT = 1
"""``kTypeValue``."""
KNOWN_TYPES = (0, PUT, 7)
"""Entry types read here: ``kTypeDeletion``, ``kTypeValue``, ``kTypeSingleDeletion``."""


class UnreadBlock(Exception):
    """A data block that does not parse as RocksDB writes one, at ``byte`` of the table file."""

    def __init__(self, byte: int, problem: str) -> None:
        super().__init__(problem)
        self.byte, self.problem = byte, problem


@dataclass(frozen=True, eq=False)
class TableRun:
    """Entries of consecutive data blocks in the table's order: user key ``i`` is the first ``key_lengths[i]``
    bytes of row ``i`` of ``keys`` (the bytes after them are not the key's), its value
    ``values[value_starts[i]:value_ends[i]]``."""

    keys: "np.ndarray"
    key_lengths: "np.ndarray"
    repeats: "np.ndarray"
    """Whether an entry's user key is the entry before it's."""
    values: bytes
    value_starts: "np.ndarray"
    value_ends: "np.ndarray"
    sequences: "np.ndarray"
    kinds: "np.ndarray"

    def __len__(self) -> int:
        return len(self.kinds)

    @functools.cached_property
    def key_bytes(self) -> bytes:
        """``keys`` as bytes, row after row."""
        return self.keys.tobytes()

    def key(self, i: int) -> bytes:
        return self.keys[i, :self.key_lengths[i]].tobytes()


@dataclass(frozen=True)
class Table:
    """A table file opened for reading: its data blocks (offset, size) and entries (its properties say)."""

    data: bytes
    handles: tuple[tuple[int, int], ...]
    table: TableFile
    entries: int
    release: Callable[[int, int], None] | None = None
    """Called with the byte range of each run's blocks once they are read."""

    def runs(self, rows: int) -> Iterator[TableRun]:
        """The entries, about ``rows`` at a time (as many blocks as hold that many on average). The blocks'
        checksums were verified when the table was opened."""
        per_run = max(1, rows * len(self.handles) // max(self.entries, 1))
        group: list[bytes] = []
        at = 0
        for offset, length in self.handles:
            plain = inflate(self.data[offset:offset + length], kind := self.data[offset + length])
            if plain is None:
                raise UnreadBlock(offset, f"expected a data block compression read here, found type {kind}")
            if not group:
                at = offset
            group.append(plain)
            if len(group) == per_run:
                yield self._read(group, at, offset + length)
                group = []
        if group:
            yield self._read(group, at, self.handles[-1][0] + self.handles[-1][1])

    def _read(self, group: list[bytes], start: int, end: int) -> TableRun:
        run = _run(group, start)
        if self.release is not None:
            self.release(start, end)
        return run


def open_table(data: bytes, blocks: Blocks, release: Callable[[int, int], None] | None = None) -> Table | None:
    """The table file ``data`` (its ``blocks``, verified: :func:`wmcheck.statestore.rocksdb.sst.verified`) opened for reading, or
    None where it is not read here (module docstring); ``release``: see :class:`Table`."""
    table, handles, props = blocks
    if property_value(props, "rocksdb.merge.operands") or property_value(props, "rocksdb.num.range-deletions"):
        return None
    if props.get(b"rocksdb.column.family.name", b"default") != b"default":
        return None  # another column family's keys: not those RocksDB's default iterator returns
    kinds = {data[offset + size] for offset, size in handles if offset + size < len(data)}
    if not kinds <= {0, 1, 4, 5, 7}:  # none, Snappy, LZ4, LZ4HC, ZSTD: :func:`wmcheck.statestore.rocksdb.sst.inflate`
        return None
    if handles:
        offset, size = handles[0]
        block = inflate(data[offset:offset + size], data[offset + size])  # its checksum was verified
        if block is None or len(block) < 4 or struct.unpack_from("<I", block, len(block) - 4)[0] >> 31:
            return None  # a data block hash index follows the restarts
    return Table(data, tuple(handles), table, property_value(props, "rocksdb.num.entries") or 0, release)


def word_prefixes() -> "np.ndarray":
    """Masks of a little-endian 8-byte word's first ``k`` bytes, by ``k`` from 0 to 8."""
    import numpy as np

    return np.array([(1 << (8 * k)) - 1 for k in range(9)], np.uint64)


def _u32(u8: "np.ndarray", at: "np.ndarray") -> "np.ndarray":
    import numpy as np

    return u8[at[:, None] + np.arange(4)].copy().view("<u4").reshape(-1).astype(np.int64)


def _run(blocks: list[bytes], offset: int) -> TableRun:
    """The entries of inflated data ``blocks`` (the first at ``offset`` of the table file): walked in C where
    :data:`NATIVE` is built and the blocks are well formed, else (the reference) with NumPy, which raises
    :class:`UnreadBlock` where they are not."""
    import numpy as np

    padded = b"".join([*blocks, bytes(PAD)])  # varints read past the last entry stay inside
    lengths = np.fromiter(map(len, blocks), np.int64, len(blocks))
    starts = np.cumsum(lengths) - lengths
    scanned = NATIVE.scan(padded, starts, lengths) if NATIVE is not None else None
    if scanned is not None:
        return _native_run(padded, starts, lengths, *scanned)
    return _numpy_run(padded, starts, lengths, offset)


def _native_run(padded: bytes, starts: "np.ndarray", lengths: "np.ndarray", n: int, longest: int) -> TableRun:
    import numpy as np

    assert NATIVE is not None
    if not n:
        return _empty_run(padded)
    keys = np.zeros((n, -(-longest // 8) * 8), np.uint8)
    user, value_start, value_end = (np.empty(n, np.int64) for _ in range(3))
    sequence, kind, repeat = np.empty(n, np.uint64), np.empty(n, np.uint8), np.empty(n, np.bool_)
    NATIVE.fill(padded, starts, lengths, keys.shape[1], keys, user, value_start, value_end, sequence, kind, repeat)
    return TableRun(keys, user, repeat, padded, value_start, value_end, sequence, kind)


def _empty_run(padded: bytes) -> TableRun:
    import numpy as np

    empty = np.zeros(0, np.int64)
    return TableRun(np.zeros((0, 8), np.uint8), empty, empty.astype(bool), padded, empty, empty, empty.astype(np.uint64),
                    empty.astype(np.uint8))


def _numpy_run(padded: bytes, starts: "np.ndarray", lengths: "np.ndarray", offset: int) -> TableRun:
    import numpy as np

    u8 = np.frombuffer(padded, np.uint8)
    if (lengths < 4).any():
        raise UnreadBlock(offset, "expected a data block of at least 4 bytes")
    restarts = _u32(u8, starts + lengths - 4)
    region_end = starts + lengths - 4 - 4 * restarts
    if (restarts < 1).any() or (region_end < starts).any():
        raise UnreadBlock(offset, "expected a data block's restart points inside it")
    block_of = np.repeat(np.arange(len(lengths)), restarts)
    nth = np.arange(len(block_of)) - np.repeat(np.cumsum(restarts) - restarts, restarts)
    begin = starts[block_of] + _u32(u8, region_end[block_of] + 4 * nth)
    limit = region_end[block_of]
    same_block = block_of[1:] == block_of[:-1]
    limit[:-1][same_block] = begin[1:][same_block]
    if ((begin > limit) | (begin < starts[block_of])).any():
        raise UnreadBlock(offset, "expected a data block's restart points in order")
    cursor, active = begin.copy(), np.flatnonzero(begin < limit)
    steps: list[tuple[np.ndarray, ...]] = []
    while active.size:
        shared, at = varints(u8, cursor[active])
        own, at = varints(u8, at)
        size, at = varints(u8, at)
        value_end = at + own + size
        if (value_end > limit[active]).any() or (not steps and shared.any()):
            raise UnreadBlock(offset, "expected a data block's entries to end where the next restart point begins")
        steps.append((active, shared, own, at, at + own, value_end))
        cursor[active] = value_end
        active = active[value_end < limit[active]]
    if not steps:
        return _empty_run(padded)
    cursors = np.concatenate([s[0] for s in steps])
    step_no = np.repeat(np.arange(len(steps)), [len(s[0]) for s in steps])
    counts = np.bincount(cursors, minlength=len(begin))
    place = (np.cumsum(counts) - counts)[cursors] + step_no
    n = len(place)
    shared, own, own_at, value_start, value_end = (np.empty(n, np.int64) for _ in range(5))
    for out, column in zip((shared, own, own_at, value_start, value_end), range(1, 6)):
        out[place] = np.concatenate([s[column] for s in steps])
    key_len = shared + own
    if (key_len < 8).any() or (shared[1:] > key_len[:-1]).any():
        raise UnreadBlock(offset, "expected internal keys of at least 8 bytes sharing no more than the key before")
    width = -(-int(key_len.max()) // 8) * 8
    # a row per key, ``width`` bytes wide: its own bytes read where they lie (the row starts ``shared`` bytes
    # before them), then, step by step, its first ``shared`` bytes taken from the row before it, 8 at a time
    rows = np.lib.stride_tricks.sliding_window_view(np.frombuffer(padded if width <= PAD else padded + bytes(width), np.uint8), width)
    keys = rows[own_at - shared]
    words = keys.view("<u8")
    word_start = 8 * np.arange(width // 8)
    prefix_masks = word_prefixes()
    done = len(steps[0][0])
    for active, *_ in steps[1:]:
        at = place[done:done + len(active)]
        done += len(active)
        mask = prefix_masks[np.clip(shared[at, None] - word_start, 0, 8)]
        words[at] = (words[at - 1] & mask) | (words[at] & ~mask)
    lengths = np.flatnonzero(np.bincount(key_len)) if int(key_len.max()) <= 1 << 16 else np.unique(key_len)
    if len(lengths) > 8:
        trailer = keys[np.arange(n)[:, None], (key_len - 8)[:, None] + np.arange(8)].copy().view("<u8").reshape(-1)
    else:  # a few key lengths: the trailers of each read as a column
        trailer = np.empty(n, np.uint64)
        for length in lengths.tolist():
            same = key_len == length
            trailer[same] = keys[same, length - 8:length].copy().view("<u8").reshape(-1)
    user = key_len - 8
    repeats = np.zeros(n, bool)  # RocksDB shares all the bytes two equal keys have in common
    repeats[1:] = (shared[1:] >= user[:-1]) & (user[1:] == user[:-1])
    restarts = place[1:len(steps[0][0])]
    repeats[restarts] = (user[restarts] == user[restarts - 1]) & ~(
        (keys[restarts] != keys[restarts - 1]) & (np.arange(width) < user[restarts, None])).any(1)
    return TableRun(keys, user, repeats, padded, value_start, value_end, trailer >> np.uint64(8),
                    (trailer & np.uint64(0xFF)).astype(np.uint8))


def table_puts(checked: CheckedTable, limit: int) -> list[tuple[bytes, bytes]]:
    """The user keys and values of up to ``limit`` puts of the table file ``checked`` (verified once by the caller:
    its blocks are not hashed again), the first in key order (run by run: a table whose first half deletes keys is
    not read entry by entry); entry by entry where the table is not read here; none where it is not read at all,
    those before where a block does not parse."""
    import numpy as np

    data, blocks = checked.data, checked.blocks  # a damaged table is sst_damage's: read entry by entry up to the damage
    table = open_table(data, blocks) if blocks else None
    if table is None:
        return [(e.key, e.value) for e in itertools.islice((e for e in table_entries(data) if e.kind == PUT), limit)]
    out: list[tuple[bytes, bytes]] = []
    try:
        for run in table.runs(PUT_RUN_ROWS):
            for i in np.flatnonzero(run.kinds == PUT)[:limit - len(out)].tolist():
                out.append((run.key(i), run.values[run.value_starts[i]:run.value_ends[i]]))
            if len(out) >= limit:
                break
    except UnreadBlock:
        pass
    return out
