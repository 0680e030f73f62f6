"""Elements of a RocksDB list value: size-framed elements, some joined by ``,`` (RocksDB's string
append merge), some not (elements put in one batch, and merged values compacted into a snapshot's
SST, come without it).

A frame is ``header`` bytes ending in a little-endian int32 size, then that many bytes. A ``,``
after a frame is a delimiter only if the value then still splits exactly into frames: a frame may
itself start with the byte ``,`` (an Avro element of 44 bytes, a row checksum), so the split is
taken greedily (a ``,`` is a delimiter) and, when that does not end exactly at the end of the
value, worked out from the end of the value instead.
"""
from __future__ import annotations

import struct

from wmcheck.checkpoint.errors import MalformedFileError

DELIMITER = 0x2C
_SIZE = struct.Struct("<i").unpack_from
_HINT = "the state file is truncated or damaged: wmcheck check CKPT"


def _frame_end(value: bytes, pos: int, header: int) -> int | None:
    if pos + header > len(value):
        return None
    (size,) = _SIZE(value, pos + header - 4)
    end = pos + header + size
    return end if 0 <= size and end <= len(value) else None


def _greedy(value: bytes, header: int) -> list[tuple[int, int]] | None:
    spans, pos = [], 0
    while pos < len(value):
        end = _frame_end(value, pos, header)
        if end is None:
            return None
        spans.append((pos + header, end))
        pos = end + 1 if end < len(value) and value[end] == DELIMITER else end
    return spans


def _exact(value: bytes, header: int) -> list[tuple[int, int]] | None:
    n = len(value)
    ok = [False] * (n + 1)  # ok[p]: value[p:] splits exactly into frames
    ok[n] = True
    for pos in range(n - 1, -1, -1):
        end = _frame_end(value, pos, header)
        ok[pos] = end is not None and (ok[end] or (end < n and value[end] == DELIMITER and ok[end + 1]))
    if not ok[0]:
        return None
    spans, pos = [], 0
    while pos < n:
        end = _frame_end(value, pos, header)
        assert end is not None
        spans.append((pos + header, end))
        pos = end + 1 if end < n and value[end] == DELIMITER and ok[end + 1] else end
    return spans


def frames(value: bytes, header: int, path: str | None = None) -> list[tuple[int, int]]:
    """``(start, end)`` of each element's bytes after its ``header``-byte frame header."""
    spans = _greedy(value, header) or _exact(value, header)
    if spans is None:
        raise MalformedFileError(f"expected a list value of size-framed elements ({len(value)} bytes do not split into them)",
                                 path=path, hint=_HINT)
    return spans
