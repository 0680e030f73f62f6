"""The state an HDFS provider partition's files make, found without a Python object per record: the fast
path of :class:`.store_files.PartitionStream`.

Each file's records are found by :func:`wmcheck.checkpoint.sized_columns.file_records`. Keys equal across
records are found by a sort of the keys' fingerprints; the state keeps each key once, where it first appears,
with the last record's value, and leaves out keys whose last record deletes them (the overlay of
:class:`.store_files.PartitionStream`, exactly). Keys and values are left in the buffer the files were
read into, as :class:`ByteRows`.

Anything else (a size not a multiple of 8, a size out of bounds, no end mark, a delete in a snapshot,
a key twice in a snapshot with increments over it) gives None: the caller reads the files with
``sized_records``, the reference, which reads them or raises its error.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Sequence, overload

from wmcheck.checkpoint.sized_columns import FileRecords

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True, eq=False)
class ByteRows(Sequence[bytes]):
    """Byte strings lying in one buffer: row ``i`` is ``buf[starts[i]:ends[i]]`` (int64 offsets), sliced
    out only when iterated or indexed; :func:`.columnar.decode_rows` decodes them where they lie."""

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
    offsets = np.cumsum([0] + [len(r.data) for r in found[:-1]])  # where each file lies in the one buffer
    buf = found[0].data if len(found) == 1 else b"".join(r.data for r in found)
    starts, key_ends, value_ends = (np.concatenate([a + at for a, at in zip(arrays, offsets)]) for arrays in zip(
        *((r.starts, r.key_ends, r.value_ends) for r in found)))
    if increments:
        deleted = np.concatenate([r.deleted for r in found])
        keep = _last_puts(buf, starts + 4, key_ends, deleted, len(base.starts) if base is not None else 0)
        if keep is None:
            return None
        starts, key_ends, value_ends = starts[keep], key_ends[keep], value_ends[keep]
    return ByteRows(buf, starts + 4, key_ends), ByteRows(buf, key_ends + 4, value_ends)


def _last_puts(buf: bytes, key_starts: "np.ndarray", key_ends: "np.ndarray", deleted: "np.ndarray",
               based: int) -> "np.ndarray | None":
    """Which records hold the state: each key's last record unless it deletes, in the order keys first
    appear; None when the first ``based`` records (a snapshot's) hold a key twice, or two keys share a
    fingerprint (:func:`_fingerprints`) without being equal."""
    import numpy as np

    n = len(key_starts)
    if not n:
        return key_starts
    words = np.ndarray((max(len(buf) - 7, 0),), "<u8", buf, 0, (1,))  # the 8 bytes at every offset, not copied
    sizes = (key_ends - key_starts) >> 3
    fingerprints = _fingerprints(words, key_starts, sizes)
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
    if not _equal(words, key_starts[same], sizes[same], key_starts[first[ids[same]]], sizes[first[ids[same]]]):
        return None
    if based and (same < based).any():
        return None
    keep = last if (first[1:] > first[:-1]).all() else last[np.argsort(first)]
    return keep[~deleted[keep]]


_PRIME = 0x100000001B3
_SEED = 0xCBF29CE484222325


def _fingerprints(words: "np.ndarray", starts: "np.ndarray", sizes: "np.ndarray") -> "np.ndarray":
    """A 64-bit hash of each key (``sizes`` 8-byte words from ``starts``; FNV-style over the words, seeded with
    the size): equal keys have equal fingerprints."""
    import numpy as np

    prime = np.uint64(_PRIME)
    hashes = (sizes.astype(np.uint64) ^ np.uint64(_SEED)) * prime
    last, uniform = len(words) - 1, sizes.min(initial=0) == sizes.max(initial=0)
    with np.errstate(over="ignore"):
        for j in range(int(sizes.max(initial=0))):
            if uniform:  # every key has word j
                hashes ^= words[starts + 8 * j]
                hashes *= prime
            else:
                word = words[np.minimum(starts + 8 * j, last)]
                hashes = np.where(sizes > j, (hashes ^ word) * prime, hashes)
    return hashes


def _equal(words: "np.ndarray", starts: "np.ndarray", sizes: "np.ndarray", others: "np.ndarray",
           other_sizes: "np.ndarray") -> bool:
    """Whether every key equals its other (sizes in 8-byte words)."""

    if not (sizes == other_sizes).all():
        return False
    for j in range(int(sizes.max(initial=0))):
        inside = sizes > j
        if (words[starts[inside] + 8 * j] != words[others[inside] + 8 * j]).any():
            return False
    return True
