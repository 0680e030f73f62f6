"""The state an HDFS provider partition's files make, found without a Python object per record: the fast
path of :class:`wmcheck.statestore.engine.store_files.PartitionStream`.

Each file's records are found by :func:`wmcheck.statestore.formats.sized_columns.file_records`. Keys equal across
records are found by a sort of the keys' fingerprints; the state keeps each key once, where it first appears,
with the last record's value, and leaves out keys whose last record deletes them (the overlay of
:class:`wmcheck.statestore.engine.store_files.PartitionStream`, exactly). Keys and values are left in the buffer the files were
read into, as :class:`ByteRows`.

Anything else (a size not a multiple of 8, a size out of bounds, no end mark, a delete in a snapshot,
a key twice in a snapshot with increments over it) gives None: the caller reads the files with
``sized_records``, the reference, which reads them or raises its error.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Sequence, overload

from wmcheck.checkpoint.records import dataclass
from wmcheck.statestore.formats.sized_columns import FileRecords, joined, key_fingerprints, keys_equal, word_view

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True, eq=False)
class ByteRows(Sequence[bytes]):
    """Byte strings lying in one buffer: row ``i`` is ``buf[starts[i]:ends[i]]`` (int64 offsets), sliced
    out only when iterated or indexed; :func:`wmcheck.statestore.encodings.columnar.decode_rows` decodes them where they lie."""

    buf: bytes
    starts: "np.ndarray"
    ends: "np.ndarray"

    def __len__(self) -> int:
        return len(self.starts)

    @overload
    def __getitem__(self, index: int) -> bytes: ...

    @overload
    def __getitem__(self, index: slice) -> "ByteRows": ...

    def __getitem__(self, index: int | slice) -> "bytes | ByteRows":
        if isinstance(index, slice):
            return ByteRows(self.buf, self.starts[index], self.ends[index])
        return self.buf[int(self.starts[index]):int(self.ends[index])]

    def __iter__(self) -> Iterator[bytes]:
        buf = self.buf
        return (buf[s:e] for s, e in zip(self.starts.tolist(), self.ends.tolist()))


def resolved_state(base: FileRecords | None, increments: Sequence[FileRecords]) -> tuple[ByteRows, ByteRows] | None:
    """The keys and values the files make (``base``: a snapshot's, or None; then the deltas over it, in
    order), or None when the reference must read them."""
    import numpy as np

    if base is not None and not len(base.starts):  # an empty snapshot: the deltas alone
        base = None
    found = [r for r in ([base] if base is not None else []) + list(increments) if len(r.starts)]
    if not found:
        nothing = ByteRows(b"", np.zeros(0, np.int64), np.zeros(0, np.int64))
        return nothing, nothing
    if base is not None and base.deleted.any():  # a snapshot holds no deletes: the reference raises Spark's error
        return None
    chain = joined(found)
    buf, starts, key_ends, value_ends = chain.data, chain.starts, chain.key_ends, chain.value_ends
    if increments:
        keep = _last_puts(buf, starts + 4, key_ends, chain.deleted, len(base.starts) if base is not None else 0)
        if keep is None:
            return None
        starts, key_ends, value_ends = starts[keep], key_ends[keep], value_ends[keep]
    return ByteRows(buf, starts + 4, key_ends), ByteRows(buf, key_ends + 4, value_ends)


def _last_puts(buf: bytes, key_starts: "np.ndarray", key_ends: "np.ndarray", deleted: "np.ndarray",
               based: int) -> "np.ndarray | None":
    """Which records hold the state: each key's last record unless it deletes, in the order keys first
    appear; None when the first ``based`` records (a snapshot's) hold a key twice, or two keys share a
    fingerprint (:func:`wmcheck.statestore.formats.sized_columns.key_fingerprints`) without being equal."""
    import numpy as np

    n = len(key_starts)
    if not n:
        return key_starts
    words = word_view(buf)
    sizes = (key_ends - key_starts) >> 3
    fingerprints = key_fingerprints(words, key_starts, sizes)
    ordered = np.sort(fingerprints)
    if not (ordered[1:] == ordered[:-1]).any():  # no fingerprint twice: no key twice
        return np.flatnonzero(~deleted)
    order = np.argsort(fingerprints, kind="stable")
    starts_group = np.ones(n, bool)
    starts_group[1:] = fingerprints[order][1:] != fingerprints[order][:-1]
    ids = np.empty(n, np.int64)
    ids[order] = np.cumsum(starts_group) - 1  # each record's fingerprint, numbered
    groups = int(starts_group.sum())
    at = np.arange(n)
    first, last = np.full(groups, n), np.full(groups, -1)
    np.minimum.at(first, ids, at)
    np.maximum.at(last, ids, at)
    same = np.flatnonzero(first[ids] != at)  # records whose fingerprint an earlier one has
    if not keys_equal(words, key_starts[same], sizes[same], key_starts[first[ids[same]]], sizes[first[ids[same]]]):
        return None
    if based and (same < based).any():
        return None
    keep = last if (first[1:] > first[:-1]).all() else last[np.argsort(first)]
    return keep[~deleted[keep]]
