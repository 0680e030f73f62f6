"""The keys and values of a RocksDB snapshot's table files as RocksDB's iterator returns them, many at once.

RocksDB returns each user key once, in bytewise order, with its newest entry (the largest sequence number),
and leaves out a key whose newest entry deletes it. One table is read run by run
(:mod:`wmcheck.statestore.rocksdb.sst_columns`); an entry of a key the entry before it already had is left out. Several
tables are read together in windows of keys: up to (not including) the smallest last key among the runs the
tables have read and not returned, so every entry of a key is in one window. A window where several tables
have entries is merged in RocksDB's order (user keys bytewise, a key before its own extensions, a key's newest
entry first): by the C walk's merge of the tables' sorted runs where it is built, else by a sort of keys padded to
one width, followed by their length and their sequence number inverted (the reference); a window of one table's
entries is already in order; its keys and values are copied out. Each table reads runs of its share of
``rows`` (its entries over all the tables' entries), so that memory holds about as much as for one table and a
large table beside a small one is read in runs about as long as alone (a quarter as long, when every table read a
quarter of ``rows``, cost the 5M-key bench state's partitions a third more time). Keys and values are returned as
:class:`wmcheck.statestore.formats.record_spans.ByteRows`.
"""
from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Any, Iterator

from wmcheck.statestore.formats.record_spans import ByteRows
from wmcheck.statestore.rocksdb import sst_columns
from wmcheck.statestore.rocksdb.sst_columns import KNOWN_TYPES, PUT, Table, TableRun, UnreadBlock, word_prefixes

if TYPE_CHECKING:
    import numpy as np

Part = tuple[TableRun, int, int]
"""Entries ``lo`` to ``hi`` of a run."""


class _Cursor:
    """A table's runs read and not yet returned, as ``[run, first entry not returned]``."""

    def __init__(self, table: Table, rows: int) -> None:
        self.runs = table.runs(rows)
        self.pending: list[list[Any]] = []
        self.done = False

    def read(self) -> None:
        """One more run, or done."""
        run = next(self.runs, None)
        if run is None:
            self.done = True
        elif len(run):
            self.pending.append([run, 0])

    def last_key(self) -> bytes:
        run = self.pending[-1][0]
        return run.key(len(run) - 1)

    def take_below(self, bound: bytes | None) -> list[Part]:
        """The pending entries of keys below ``bound`` (all when None), taken out."""
        out: list[Part] = []
        while self.pending:
            run, lo = self.pending[0]
            hi = len(run) if bound is None else bisect.bisect_left(range(len(run)), bound, lo, key=run.key)
            if hi > lo:
                out.append((run, lo, hi))
            if hi < len(run):
                self.pending[0][1] = hi
                break
            self.pending.pop(0)
        return out


def snapshot_rows(tables: list[Table], rows: int) -> Iterator[tuple[ByteRows, ByteRows]]:
    """``(keys, values)`` of the live keys, about ``rows`` at a time (a run of each table read), in RocksDB's
    order (module docstring)."""
    if len(tables) == 1:
        yield from _in_order((run, 0, len(run)) for run in tables[0].runs(rows))
        return
    total = sum(t.entries for t in tables) or 1
    cursors = [_Cursor(t, max(1, rows * t.entries // total)) for t in tables]
    while True:
        for cursor in cursors:
            while not cursor.pending and not cursor.done:
                cursor.read()
        bound = min((c.last_key() for c in cursors if not c.done), default=None)
        taken = [parts for parts in (c.take_below(bound) for c in cursors) if parts]
        if not taken:
            if bound is None:
                return
            for cursor in cursors:
                if not cursor.done and cursor.last_key() == bound:
                    cursor.read()
            continue
        yield from _in_order(iter(taken[0])) if len(taken) == 1 else _merged([p for t in taken for p in t])


def _known(kinds: "np.ndarray") -> None:
    import numpy as np

    if not np.isin(kinds, KNOWN_TYPES).all():
        raise UnreadBlock(0, f"expected puts and deletes only, found entry type {sorted(set(kinds.tolist()) - set(KNOWN_TYPES))}")


def _in_order(parts: Iterator[Part]) -> Iterator[tuple[ByteRows, ByteRows]]:
    """The live keys of parts of one table, in order: a key's first entry (its newest) kept."""
    import numpy as np

    last: bytes | None = None
    for run, lo, hi in parts:
        kinds = run.kinds[lo:hi]
        _known(kinds)
        repeated = run.repeats[lo:hi]
        if lo == 0 and last is not None:  # the first entries of a run against the last before it
            first = 0
            repeated = repeated.copy()
            while first < hi and run.key(first) == last:
                repeated[first] = True
                first += 1
        last = run.key(hi - 1)
        width = run.keys.shape[1]
        keep = np.flatnonzero(~repeated & (kinds == PUT)) + lo
        starts = keep * width
        yield (ByteRows(run.key_bytes, starts, starts + run.key_lengths[keep]),
               ByteRows(run.values, run.value_starts[keep], run.value_ends[keep]))


def _merged(parts: list[Part]) -> Iterator[tuple[ByteRows, ByteRows]]:
    """The live keys of parts of several tables, in order (module docstring): merged in C where the walk of data
    blocks is built (:data:`wmcheck.statestore.rocksdb.sst_columns.NATIVE`), else sorted with NumPy."""
    import numpy as np

    width = max(run.keys.shape[1] for run, _, _ in parts)  # a multiple of 8
    n = sum(hi - lo for _, lo, hi in parts)
    if sst_columns.NATIVE is not None:
        for run, lo, hi in parts:
            _known(run.kinds[lo:hi])
        keys, index = np.zeros((n, width), np.uint8), np.empty(n, np.int64)
        chosen = sst_columns.NATIVE.merge([(run.keys, run.key_lengths, run.sequences, run.kinds, run.keys.shape[1], lo, hi)
                                           for run, lo, hi in parts], width, keys, index)
        keep = index[:chosen]
        lengths = np.concatenate([run.key_lengths[lo:hi] for run, lo, hi in parts])[keep]
        key_starts = np.arange(chosen, dtype=np.int64) * width
        values, starts, ends = _values(parts)
        yield ByteRows(keys[:chosen].tobytes(), key_starts, key_starts + lengths), ByteRows(values, starts[keep], ends[keep])
        return
    sortable = np.zeros((n, width + 16), np.uint8)  # key, length, inverted sequence number, 4 bytes to fill a word
    words = sortable.view("<u8")
    lengths = np.concatenate([run.key_lengths[lo:hi] for run, lo, hi in parts])
    kinds = np.concatenate([run.kinds[lo:hi] for run, lo, hi in parts])
    prefix = word_prefixes()
    at = 0
    for run, lo, hi in parts:
        _known(run.kinds[lo:hi])
        own = run.keys.shape[1] // 8
        kept = prefix[np.clip(run.key_lengths[lo:hi, None] - 8 * np.arange(own), 0, 8)]  # the key's bytes, not those after
        words[at:at + hi - lo, :own] = run.keys[lo:hi].view("<u8") & kept
        sortable[at:at + hi - lo, width + 4:width + 12] = (~run.sequences[lo:hi]).astype(">u8").view(np.uint8).reshape(-1, 8)
        at += hi - lo
    sortable[:, width:width + 4] = lengths.astype(">u4").view(np.uint8).reshape(-1, 4)
    order = np.argsort(sortable.view(f"V{width + 16}").reshape(-1), kind="stable")
    ordered = words[order, :width // 8]
    ordered_lengths = lengths[order]
    repeated = np.zeros(n, bool)
    repeated[1:] = (ordered[1:] == ordered[:-1]).all(1) & (ordered_lengths[1:] == ordered_lengths[:-1])
    chosen = np.flatnonzero(~repeated & (kinds[order] == PUT))
    keep = order[chosen]
    key_starts = np.arange(len(keep), dtype=np.int64) * width
    values, starts, ends = _values(parts)
    yield ByteRows(ordered[chosen].tobytes(), key_starts, key_starts + lengths[keep]), ByteRows(values, starts[keep], ends[keep])


def _values(parts: list[Part]) -> tuple[bytes, "np.ndarray", "np.ndarray"]:
    """The values of the parts' entries in one buffer, and where each lies in it (part after part)."""
    import numpy as np

    values, starts, ends = [], [], []
    base = 0
    for run, lo, hi in parts:
        first, last = int(run.value_starts[lo]), int(run.value_ends[hi - 1])  # a run's values lie in key order
        values.append(run.values[first:last])
        starts.append(run.value_starts[lo:hi] + (base - first))
        ends.append(run.value_ends[lo:hi] + (base - first))
        base += last - first
    return b"".join(values), np.concatenate(starts), np.concatenate(ends)
