"""Keys a store partition's next load holds that the last committed batch's eviction had already removed.

A streaming aggregation (``StateStoreSaveExec``) in append and update output modes ends every batch by removing
each key whose event-time column (a window's ``end``) is ``<=`` the operator's eviction watermark
(``watermarkPredicateForKeysForEviction``), before it commits the state version the batch writes. That version,
which the next batch loads, therefore holds no such key; one that does was not written by that batch (a state
file replaced by another partition's or an older version's, or a lost increment over an older full copy).

Only the rows of keys at or before the bound are kept here, in file order: a key's event time belongs to the
key, so what a file does to any other key cannot make it one of them.
"""
from __future__ import annotations

import struct
from typing import Callable, Iterable, Sequence

from wmcheck.checkpoint.records import dataclass
from wmcheck.statestore.formats.records import DELETE
from wmcheck.statestore.formats.schema import StructType
from wmcheck.statestore.rocksdb.sst import DELETE_TYPES, VALUE_TYPES, TableEntry

EventTime = Callable[[bytes, int], "int | None"]
"""``(row bytes, row start) -> the key's event time`` (microseconds), None where the column is null."""
TIMESTAMPS = ("timestamp", "timestamp_ntz")


@dataclass(frozen=True)
class EventField:
    """Where a key row's event time lies: slot ``index`` of the row (after its ``width``-byte null bitset), or,
    with ``inner`` = ``(field, width)``, slot ``field`` of the struct that slot points to. Called with
    ``(row bytes, row start)``, it reads the time of one row (:data:`EventTime`; :mod:`wmcheck.statestore.keys.stale_columns` reads it
    from many rows at once)."""

    index: int
    width: int
    inner: tuple[int, int] | None = None

    def __call__(self, buf: bytes, base: int) -> int | None:
        if self.inner is None:
            return _long(buf, base, self.width, self.index)
        if _null(buf, base, self.index):
            return None
        (word,) = struct.unpack_from("<q", buf, base + self.width + 8 * self.index)
        field, inner_width = self.inner
        return _long(buf, base + (word >> 32), inner_width, field)


def event_time_reader(schema: StructType, path: Sequence[str]) -> EventField | None:
    """How to read the timestamp at ``path`` (a column, or a struct column's field: ``("window", "end")``) from an
    ``UnsafeRow`` of ``schema``; None for another kind of column."""
    names = [f.name for f in schema.fields]
    if not path or path[0] not in names:
        return None
    index = names.index(path[0])
    column = schema.fields[index].data_type
    width = _bitset(len(names))
    if len(path) == 1:
        return EventField(index, width) if column in TIMESTAMPS else None
    if not isinstance(column, StructType) or len(path) != 2:
        return None
    inner = [f.name for f in column.fields]
    if path[1] not in inner or column.fields[inner.index(path[1])].data_type not in TIMESTAMPS:
        return None
    return EventField(index, width, (inner.index(path[1]), _bitset(len(inner))))


def _bitset(fields: int) -> int:
    return (fields + 63) // 64 * 8


def _null(buf: bytes, base: int, index: int) -> bool:
    return bool(buf[base + index // 8] >> (index % 8) & 1)


def _long(buf: bytes, base: int, width: int, index: int) -> int | None:
    if _null(buf, base, index):
        return None
    return struct.unpack_from("<q", buf, base + width + 8 * index)[0]


@dataclass(frozen=True, slots=True)
class Change:
    """What a file does to a key at or before the bound: puts it (``live``) or removes it."""

    key: bytes
    """The key row's bytes from its start."""
    event_us: int
    live: bool
    sequence: int = 0
    """A table file's sequence number of the entry (the newest entry of a key across a snapshot's tables wins)."""


@dataclass(frozen=True)
class FileChanges:
    """What one state file does to the keys at or before the bound, in its order, and whether it removes any key."""

    changes: Sequence[Change]
    """A tuple here; columns where :mod:`wmcheck.statestore.keys.stale_columns` read the file."""
    removes: bool


MAX_CHANGES = 1_000_000
"""Rows at or before the bound kept per file: a file with more (an operator that never removes a key, complete
mode, holds every key it ever saw) is not judged, not held in memory."""


def record_changes(records: Iterable[tuple[str, bytes, bytes | None]], start: Callable[[str], int], event: EventTime,
                   bound_us: int, limit: int = MAX_CHANGES) -> FileChanges | None:
    """:class:`FileChanges` of a delta, snapshot or changelog's records (``start(kind)``: where a key row starts);
    None past ``limit`` of them."""
    out, removes = [], False
    for kind, key, _ in records:
        gone = kind == DELETE
        removes |= gone
        at = start(kind)
        when = event(key, at)
        if when is not None and when <= bound_us:
            out.append(Change(key[at:], when, not gone))
            if len(out) > limit:
                return None
    return FileChanges(tuple(out), removes)


def table_changes(entries: Iterable[TableEntry], event: EventTime, bound_us: int, start: int = 1,
                  limit: int = MAX_CHANGES) -> FileChanges | None:
    """:class:`FileChanges` of a snapshot's table file (its rows: a version byte, then the row); None past
    ``limit``."""
    out, removes = [], False
    for entry in entries:
        if entry.kind in DELETE_TYPES:
            removes = True
        elif entry.kind not in VALUE_TYPES:
            continue
        when = event(entry.key, start)
        if when is not None and when <= bound_us:
            out.append(Change(entry.key[start:], when, entry.live, entry.sequence))
            if len(out) > limit:
                return None
    return FileChanges(tuple(out), removes)


def stale_keys(tables: Sequence[FileChanges], files: Sequence[FileChanges]) -> dict[bytes, int]:
    """The keys at or before the bound a load holds, with their event times: a snapshot's ``tables`` (the newest
    entry of each key), then ``files`` (a full copy and the increments after it) in the order Spark reads them."""
    newest: dict[bytes, Change] = {}
    for table in tables:
        for change in table.changes:
            known = newest.get(change.key)
            if known is None or change.sequence > known.sequence:
                newest[change.key] = change
    held = {key: c.event_us for key, c in newest.items() if c.live}
    for f in files:
        for change in f.changes:
            if change.live:
                held[change.key] = change.event_us
            else:
                held.pop(change.key, None)
    return held


def latest_removal(files: Iterable[FileChanges]) -> int | None:
    """The latest event time of a key the ``files`` remove, None when they remove none at or before their bound."""
    return max((c.event_us for f in files if f.removes for c in f.changes if not c.live), default=None)
