"""A delta or snapshot's records found many at once with NumPy, without a Python object per record.

The records are those of :func:`wmcheck.statestore.formats.records.sized_records` (a 4-byte big-endian key size, the key, a value
size, the value; a negative value size deletes the key, a key size of -1 ends the file). Spark writes
``UnsafeRow`` keys and values, whose sizes are multiples of 8, so every record starts at a multiple of 8: where
the record starting at each 8-byte slot would end is computed for every slot at once, and a loop follows those
ends from the first record to the end mark. Anything else (a size not a multiple of 8, a size out of bounds, no
end mark) gives None: the caller reads the file with ``sized_records``, the reference.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from wmcheck.checkpoint.records import dataclass

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True, eq=False)
class FileRecords:
    """The records of one decompressed file, in order: key ``i`` is ``data[starts[i] + 4:key_ends[i]]``, its
    value ``data[key_ends[i] + 4:value_ends[i]]`` (empty where ``deleted``)."""

    data: bytes
    starts: "np.ndarray"
    key_ends: "np.ndarray"
    value_ends: "np.ndarray"
    deleted: "np.ndarray"


_BLOCK = 1 << 20
"""8-byte slots whose records' ends are computed at once (about 25 bytes of arrays a slot)."""


def _slots(data: bytes) -> "np.ndarray | None":
    """The 8-byte slot of every record of ``data``, in order, or None when the records are not all where
    Spark's sizes put them (see the module docstring)."""
    import numpy as np

    n = len(data)
    m = (n - 4) // 8 + 1 if n >= 4 else 0  # slots whose key size can be read
    kind = np.int32 if n < 1 << 31 else np.int64
    end, bad = np.iinfo(kind).max, np.iinfo(kind).max - 1  # past any block: looking either up ends a walk
    words = np.frombuffer(data, ">i4", n // 4)
    parts, low = [], 0
    while low < m:  # the slots from the record at ``low`` on, a block at a time
        high = min(low + _BLOCK, m)
        key_size = words[2 * low:2 * high:2].astype(kind)
        value_word = np.arange(2 * low + 1, 2 * high, 2, dtype=kind)  # where the value size is, in words
        value_word += key_size >> 2
        value_size = words.take(value_word, mode="clip").astype(kind)
        kept = np.maximum(value_size, 0)
        after = kept >> 3  # the slot where the next record starts, from ``low``
        after += key_size >> 3
        after += np.arange(1, high - low + 1, dtype=kind)
        kept |= key_size
        whole = kept & np.array(7 | np.iinfo(kind).min, kind) == 0  # sizes multiples of 8, the key's not negative
        whole &= value_word < len(words)
        whole &= after < m - low
        table = np.where(whole, after, bad)
        table[key_size == -1] = end
        found = [0]
        try:  # found[i + 1] = table[found[i]], in C, until it leaves the block
            found.extend(map(table.data.__getitem__, found))
        except IndexError:
            pass
        last = found.pop()
        if last == bad:
            return None
        if last == end:
            found.pop()  # the end mark's slot
        parts.append(np.array(found, np.int64) + low)
        if last == end:
            return np.concatenate(parts)
        low += last
    return None


def file_records(data: bytes) -> FileRecords | None:
    """The records of a decompressed delta or snapshot, or None when they are not all where Spark's sizes
    put them (the reference reads the file)."""
    import numpy as np

    slots = _slots(data)
    if slots is None:
        return None
    words = np.frombuffer(data, ">i4", len(data) // 4)
    starts = slots * 8
    key_ends = starts + 4 + words[slots * 2]
    sizes = words[key_ends >> 2].astype(np.int64)
    deleted = sizes < 0
    return FileRecords(data, starts, key_ends, key_ends + 4 + np.where(deleted, 0, sizes), deleted)


def joined(records: "Sequence[FileRecords]") -> FileRecords:
    """The records of several files (in order) as those of one: their bytes joined, their offsets moved."""
    import numpy as np

    if len(records) == 1:
        return records[0]
    offsets = np.cumsum([0] + [len(r.data) for r in records[:-1]])  # where each file lies in the one buffer
    starts, key_ends, value_ends = (np.concatenate([a + at for a, at in zip(arrays, offsets)]) for arrays in zip(
        *((r.starts, r.key_ends, r.value_ends) for r in records)))
    return FileRecords(b"".join(r.data for r in records), starts, key_ends, value_ends,
                       np.concatenate([r.deleted for r in records]))


def word_view(data: bytes) -> "np.ndarray":
    """The 8 bytes at every offset of ``data`` as little-endian words, not copied."""
    import numpy as np

    return np.ndarray((max(len(data) - 7, 0),), "<u8", data, 0, (1,))


_PRIME = 0x100000001B3
_SEED = 0xCBF29CE484222325


def key_fingerprints(words: "np.ndarray", starts: "np.ndarray", sizes: "np.ndarray") -> "np.ndarray":
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


def keys_equal(words: "np.ndarray", starts: "np.ndarray", sizes: "np.ndarray", others: "np.ndarray",
               other_sizes: "np.ndarray") -> bool:
    """Whether every key equals its other (sizes in 8-byte words)."""
    if not (sizes == other_sizes).all():
        return False
    for j in range(int(sizes.max(initial=0))):
        inside = sizes > j
        if (words[starts[inside] + 8 * j] != words[others[inside] + 8 * j]).any():
            return False
    return True
