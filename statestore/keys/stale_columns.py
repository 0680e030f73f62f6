"""The keys of a state file at or before a bound, found many at once with NumPy: the fast path of
:mod:`wmcheck.statestore.keys.stale`, whose functions read entry by entry and stay the reference.

A RocksDB table file is read run by run (:mod:`wmcheck.statestore.rocksdb.sst_columns`), a delta or snapshot's records all at once
(:mod:`wmcheck.statestore.formats.sized_columns`), a changelog's by the reference's parser; the event time of every key is read as a column
(where :class:`wmcheck.statestore.keys.stale.EventField` says it lies); the keys at or before the bound are kept as
:class:`ChangeColumns`, in file order, and a load's files are resolved into the keys it holds (:func:`stale_keys`),
keys grouped by a 64-bit fingerprint and checked equal to their group's. What is not proven on every entry raises
:class:`Unproven`: a table those readers leave to RocksDB (a format or compression not read there), an entry type
other than a put or a delete, a read outside a key's bytes, two keys of one fingerprint. The caller then uses the
reference, which returns what it returns (None for a damaged file).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence, overload

from wmcheck.checkpoint.records import dataclass
from wmcheck.statestore.formats.records import DELETE, Record
from wmcheck.statestore.formats.sized_columns import file_records
from wmcheck.statestore.keys.stale import MAX_CHANGES, Change, EventField, FileChanges
from wmcheck.statestore.rocksdb.sst import CheckedTable
from wmcheck.statestore.rocksdb.sst_columns import KNOWN_TYPES, open_table

if TYPE_CHECKING:
    import numpy as np

RUN_ROWS = 1 << 16
"""Table entries read per run."""
CHUNK_ROWS = 1 << 16
"""Keys compared with their group's key at once."""
PUT_TYPE = 1
"""``kTypeValue``: the only live entry type of :data:`wmcheck.statestore.rocksdb.sst_columns.KNOWN_TYPES`."""
_PRIME = 0x100000001B3
_SEED = 0xCBF29CE484222325


class Unproven(Exception):
    """The fast path cannot vouch for a file: the reference reads it."""


@dataclass(frozen=True, eq=False)
class ChangeColumns(Sequence[Change]):
    """Changes as columns: key ``i`` is the first ``lengths[i]`` bytes of row ``i`` of ``keys`` (zeros after them,
    rows a multiple of 8 bytes wide), ``fingerprints[i]`` a hash of it (:func:`_fingerprints`); a
    :class:`wmcheck.statestore.keys.stale.Change` is made of a row only when one is asked for."""

    keys: "np.ndarray"
    lengths: "np.ndarray"
    event_us: "np.ndarray"
    live: "np.ndarray"
    sequences: "np.ndarray"
    fingerprints: "np.ndarray"

    def __len__(self) -> int:
        return len(self.lengths)

    @overload
    def __getitem__(self, index: int) -> Change: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Change]: ...

    def __getitem__(self, index: int | slice) -> "Change | Sequence[Change]":
        if isinstance(index, slice):
            return tuple(self)[index]
        return Change(self.key(index), int(self.event_us[index]), bool(self.live[index]), int(self.sequences[index]))

    def __iter__(self) -> Iterator[Change]:
        return (Change(self.key(i), when, live, sequence) for i, when, live, sequence in zip(
            range(len(self)), self.event_us.tolist(), self.live.tolist(), self.sequences.tolist()))

    def key(self, i: int) -> bytes:
        return self.keys[i, :self.lengths[i]].tobytes()


def _columns(buf: bytes, starts: "np.ndarray", ends: "np.ndarray", event_us: "np.ndarray", live: "np.ndarray",
             sequences: "np.ndarray") -> ChangeColumns:
    """:class:`ChangeColumns` of the keys ``buf[starts[i]:ends[i]]``."""
    import numpy as np

    lengths = (ends - starts).astype(np.int64)
    width = -(-int(lengths.max(initial=0)) // 8) * 8
    u8 = np.frombuffer(buf, np.uint8)
    keys = np.zeros((len(starts), width), np.uint8)
    whole = starts <= len(u8) - width  # a row's width of bytes from its start lies in ``buf``
    if width and whole.any():
        keys[whole] = np.lib.stride_tricks.sliding_window_view(u8, width)[starts[whole]]
    for row in np.flatnonzero(~whole).tolist():  # keys near its end
        keys[row, :len(u8) - starts[row]] = u8[starts[row]:]
    keys[np.arange(width) >= lengths[:, None]] = 0  # the bytes after a key
    return ChangeColumns(keys, lengths, event_us.astype(np.int64), live.astype(bool), sequences.astype(np.uint64),
                         _fingerprints(keys, lengths))


def _fingerprints(keys: "np.ndarray", lengths: "np.ndarray") -> "np.ndarray":
    """A 64-bit hash of each key, FNV-style over the 8-byte words that hold it, seeded with its length: equal keys
    have equal fingerprints, however wide the rows holding them."""
    import numpy as np

    words = keys.view("<u8")
    held = (lengths + 7) // 8
    prime = np.uint64(_PRIME)
    with np.errstate(over="ignore"):
        hashes = (lengths.astype(np.uint64) ^ np.uint64(_SEED)) * prime
        for j in range(words.shape[1]):
            hashes = np.where(held > j, (hashes ^ words[:, j]) * prime, hashes)
    return hashes


def _joined(parts: Sequence[ChangeColumns]) -> ChangeColumns:
    """One :class:`ChangeColumns` of ``parts``, in order (rows as wide as the widest)."""
    import numpy as np

    width = max((p.keys.shape[1] for p in parts), default=0)
    keys = np.zeros((sum(len(p) for p in parts), width), np.uint8)
    at = 0
    for p in parts:
        keys[at:at + len(p), :p.keys.shape[1]] = p.keys
        at += len(p)
    return ChangeColumns(keys, *(np.concatenate([getattr(p, name) for p in parts]) if parts else np.zeros(0, dtype)
                                 for name, dtype in (("lengths", np.int64), ("event_us", np.int64), ("live", bool),
                                                     ("sequences", np.uint64), ("fingerprints", np.uint64))))


def _as_columns(changes: Sequence[Change]) -> ChangeColumns:
    """The changes of a file the reference read, as columns."""
    import numpy as np

    if isinstance(changes, ChangeColumns):
        return changes
    lengths = np.fromiter((len(c.key) for c in changes), np.int64, len(changes))
    ends = np.cumsum(lengths)
    return _columns(b"".join(c.key for c in changes), ends - lengths, ends,
                    np.fromiter((c.event_us for c in changes), np.int64, len(changes)),
                    np.fromiter((c.live for c in changes), bool, len(changes)),
                    np.fromiter((c.sequence for c in changes), np.uint64, len(changes)))


def stale_keys(tables: Sequence[FileChanges], files: Sequence[FileChanges]) -> dict[bytes, int]:
    """:func:`wmcheck.statestore.keys.stale.stale_keys` with NumPy: of each key, the newest entry of the tables (the first of equal
    sequence numbers), then the last change of the files, if any; the keys whose change is a put are held."""
    import numpy as np

    parts = [_as_columns(f.changes) for f in [*tables, *files]]
    if not any(len(p) for p in parts):
        return {}
    every = ChangeColumns(np.zeros((0, 0), np.uint8), *(np.concatenate([getattr(p, name) for p in parts]) for name in (
        "lengths", "event_us", "live", "sequences", "fingerprints")))
    _, first, group = np.unique(every.fingerprints, return_index=True, return_inverse=True)
    group = group.reshape(-1)
    keys = _first_keys(parts, first, group)
    live, when = np.zeros(len(first), bool), np.zeros(len(first), np.int64)
    in_tables = sum(len(f.changes) for f in tables)
    rows = np.arange(in_tables)
    if in_tables:  # by key, the largest sequence number first, then the first entry
        order = np.lexsort((rows, ~every.sequences[:in_tables], group[:in_tables]))
        newest = order[np.r_[True, group[order][1:] != group[order][:-1]]]
        live[group[newest]], when[group[newest]] = every.live[newest], every.event_us[newest]
    later = np.arange(len(every) - 1, in_tables - 1, -1)  # the files' changes, last first
    if len(later):
        _, found = np.unique(group[later], return_index=True)
        last = later[found]
        live[group[last]], when[group[last]] = every.live[last], every.event_us[last]
    return {keys[g, :every.lengths[first[g]]].tobytes(): int(when[g]) for g in np.flatnonzero(live).tolist()}


def _first_keys(parts: list[ChangeColumns], first: "np.ndarray", group: "np.ndarray") -> "np.ndarray":
    """The key of each group (its ``first`` row of the parts joined; ``group``: each row's), a row each; raises
    :class:`Unproven` where a key differs from its group's (two keys of one fingerprint)."""
    import numpy as np

    offsets = np.cumsum([0] + [len(p) for p in parts])
    keys = np.zeros((len(first), max(p.keys.shape[1] for p in parts)), np.uint8)
    lengths = np.zeros(len(first), np.int64)
    owner = np.searchsorted(offsets, first, "right") - 1
    for i, p in enumerate(parts):
        mine = np.flatnonzero(owner == i)
        keys[mine, :p.keys.shape[1]] = p.keys[first[mine] - offsets[i]]
        lengths[mine] = p.lengths[first[mine] - offsets[i]]
    for i, p in enumerate(parts):
        for lo in range(0, len(p), CHUNK_ROWS):
            hi = min(lo + CHUNK_ROWS, len(p))
            theirs = group[offsets[i] + lo:offsets[i] + hi]
            width = p.keys.shape[1]
            if not ((p.keys[lo:hi] == keys[theirs, :width]).all(1) & (p.lengths[lo:hi] == lengths[theirs])).all():
                raise Unproven
    return keys


def event_times(field: EventField, buf: bytes, starts: "np.ndarray", ends: "np.ndarray") -> tuple["np.ndarray", "np.ndarray"]:
    """``(times, known)`` of the rows of ``buf`` from ``starts`` to ``ends``: each row's event time in microseconds
    where ``known`` (its column not null), as :meth:`wmcheck.statestore.keys.stale.EventField.__call__` reads it row by row."""
    import numpy as np

    u8 = np.frombuffer(buf, np.uint8)
    words = np.ndarray((max(len(buf) - 7, 0),), "<i8", buf, 0, (1,))  # the 8 bytes at every offset, not copied
    times = np.zeros(len(starts), np.int64)
    known = ~_bit(u8, starts, ends, field.index)
    rows = np.flatnonzero(known)
    at, limit = starts[rows], ends[rows]
    slot = at + field.width + 8 * field.index
    if field.inner is not None:
        inner, width = field.inner
        base = at + (_word(words, slot, limit) >> 32)
        if (base < at).any():
            raise Unproven
        present = ~_bit(u8, base, limit, inner)
        known[rows[~present]] = False
        rows, base, limit = rows[present], base[present], limit[present]
        slot = base + width + 8 * inner
    times[rows] = _word(words, slot, limit)
    return times, known


def _bit(u8: "np.ndarray", at: "np.ndarray", ends: "np.ndarray", index: int) -> "np.ndarray":
    """The null bit ``index`` of the bitsets at ``at``."""
    at = at + index // 8
    if (at >= ends).any():
        raise Unproven
    return (u8[at] >> (index % 8) & 1).astype(bool)


def _word(words: "np.ndarray", at: "np.ndarray", ends: "np.ndarray") -> "np.ndarray":
    if (at + 8 > ends).any():
        raise Unproven
    return words[at]


def table_changes(checked: CheckedTable, field: EventField, bound_us: int, start: int = 1,
                  limit: int = MAX_CHANGES) -> FileChanges | None:
    """:func:`wmcheck.statestore.keys.stale.table_changes` of a table file (verified once by the caller: its blocks are not hashed
    again; keys: a version byte, then the row)."""
    import numpy as np

    try:
        data, blocks = checked.data, checked.blocks  # a damaged table is sst_damage's
        table = open_table(data, blocks) if blocks else None
        if table is None:
            raise Unproven
        out: list[ChangeColumns] = []
        removes, kept = False, 0
        for run in table.runs(RUN_ROWS):
            rows = np.flatnonzero(run.key_lengths > 0)  # an internal key of 8 bytes has no user key: not an entry
            kinds = run.kinds[rows]
            if not np.isin(kinds, KNOWN_TYPES).all():
                raise Unproven
            removes = removes or bool((kinds != PUT_TYPE).any())
            begins = rows * run.keys.shape[1]
            ends = begins + run.key_lengths[rows]
            times, known = event_times(field, run.key_bytes, begins + start, ends)
            chosen = np.flatnonzero(known & (times <= bound_us))
            kept += len(chosen)
            if kept > limit:
                return None
            out.append(_columns(run.key_bytes, begins[chosen] + start, ends[chosen], times[chosen],
                                kinds[chosen] == PUT_TYPE, run.sequences[rows[chosen]]))
    except Unproven:
        raise
    except Exception:  # noqa: BLE001 - a block the columns do not read: the reference reads the file
        raise Unproven from None
    return FileChanges(_joined(out), removes)


def record_changes(data: bytes, parse: Callable[[], Iterable[Record]], put_start: int, delete_start: int,
                   field: EventField, bound_us: int, aligned: bool = True, limit: int = MAX_CHANGES) -> FileChanges | None:
    """:func:`wmcheck.statestore.keys.stale.record_changes` of a decompressed state file (a put's key row starting ``put_start`` bytes
    into its key, a delete's ``delete_start``): its records found at once where ``aligned`` (a delta or snapshot,
    :func:`wmcheck.statestore.formats.sized_columns.file_records`), else (a changelog, sizes not where Spark puts them) those ``parse()``
    yields (the reference's parser: it raises the reference's error); their event times read as a column."""
    import numpy as np

    found = file_records(data) if aligned else None
    if found is not None:
        buf, begins, ends, deleted = data, found.starts + 4, found.key_ends, found.deleted
    else:
        keys, gone = [], []
        for kind, key, _ in parse():
            keys.append(key)
            gone.append(kind == DELETE)
        lengths = np.fromiter(map(len, keys), np.int64, len(keys))
        ends = np.cumsum(lengths)
        buf, begins, deleted = b"".join(keys), ends - lengths, np.array(gone, bool)
    starts = begins + np.where(deleted, delete_start, put_start)
    times, known = event_times(field, buf, starts, ends)
    chosen = np.flatnonzero(known & (times <= bound_us))
    if len(chosen) > limit:
        return None
    return FileChanges(_columns(buf, starts[chosen], ends[chosen], times[chosen], ~deleted[chosen],
                                np.zeros(len(chosen), np.uint64)), bool(deleted.any()))
