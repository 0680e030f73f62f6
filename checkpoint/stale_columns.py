"""The keys of a state file at or before a bound, found many at once with NumPy: the fast path of
:mod:`.stale_keys`, whose functions read entry by entry and stay the reference.

A RocksDB table file is read run by run (:mod:`.sst_columns`), a delta or snapshot's records all at once
(:mod:`.sized_columns`); the event time of every key is read as a column (where :class:`.stale_keys.EventField`
says it lies), and only the keys at or before the bound become :class:`.stale_keys.Change` objects, in file order.
What is not proven on every entry raises :class:`Unproven`: a file those readers leave to the reference (a format
or compression not read there, sizes not where Spark puts them), an entry type other than a put or a delete, a read
outside a key's bytes. The caller then reads the file with the reference, which returns what it returns for it
(None for a damaged file).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .rocksdb_sst import verified
from .sized_columns import file_records
from .sst_columns import KNOWN_TYPES, open_table
from .stale_keys import MAX_CHANGES, Change, EventField, FileChanges

if TYPE_CHECKING:
    import numpy as np

RUN_ROWS = 1 << 16
"""Table entries read per run."""
PUT_TYPE = 1
"""``kTypeValue``: the only live entry type of :data:`.sst_columns.KNOWN_TYPES`."""


class Unproven(Exception):
    """The fast path cannot vouch for a file: the reference reads it."""


def event_times(field: EventField, buf: bytes, starts: "np.ndarray", ends: "np.ndarray") -> tuple["np.ndarray", "np.ndarray"]:
    """``(times, known)`` of the rows of ``buf`` from ``starts`` to ``ends``: each row's event time in microseconds
    where ``known`` (its column not null), as :meth:`.stale_keys.EventField.__call__` reads it row by row."""
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


def table_changes(data: bytes, field: EventField, bound_us: int, start: int = 1,
                  limit: int = MAX_CHANGES) -> FileChanges | None:
    """:func:`.stale_keys.table_changes` of a table file's bytes (keys: a version byte, then the row)."""
    import numpy as np

    try:
        blocks, _ = verified(data)  # a damaged table is sst_damage's
        table = open_table(data, blocks) if blocks else None
        if table is None:
            raise Unproven
        out: list[Change] = []
        removes = False
        for run in table.runs(RUN_ROWS):
            rows = np.flatnonzero(run.key_lengths > 0)  # an internal key of 8 bytes has no user key: not an entry
            kinds = run.kinds[rows]
            if not np.isin(kinds, KNOWN_TYPES).all():
                raise Unproven
            removes = removes or bool((kinds != PUT_TYPE).any())
            width, lengths = run.keys.shape[1], run.key_lengths[rows]
            times, known = event_times(field, run.key_bytes, rows * width + start, rows * width + lengths)
            chosen = np.flatnonzero(known & (times <= bound_us))
            if len(out) + len(chosen) > limit:
                return None
            keys = run.key_bytes
            out += [Change(keys[at + start:at + length], when, kind == PUT_TYPE, sequence) for at, length, when, kind, sequence
                    in zip((rows[chosen] * width).tolist(), lengths[chosen].tolist(), times[chosen].tolist(),
                           kinds[chosen].tolist(), run.sequences[rows[chosen]].tolist())]
    except Unproven:
        raise
    except Exception:  # noqa: BLE001 - a block the columns do not read: the reference reads the file
        raise Unproven from None
    return FileChanges(tuple(out), removes)


def record_changes(data: bytes, put_start: int, delete_start: int, field: EventField, bound_us: int,
                   limit: int = MAX_CHANGES) -> FileChanges | None:
    """:func:`.stale_keys.record_changes` of a decompressed delta or snapshot (a put's key row starting
    ``put_start`` bytes into its key, a delete's ``delete_start``)."""
    import numpy as np

    records = file_records(data)
    if records is None:
        raise Unproven
    starts = records.starts + 4 + np.where(records.deleted, delete_start, put_start)
    times, known = event_times(field, data, starts, records.key_ends)
    chosen = np.flatnonzero(known & (times <= bound_us))
    if len(chosen) > limit:
        return None
    out = [Change(data[at:end], when, not gone) for at, end, when, gone in zip(
        starts[chosen].tolist(), records.key_ends[chosen].tolist(), times[chosen].tolist(),
        records.deleted[chosen].tolist())]
    return FileChanges(tuple(out), bool(records.deleted.any()))
