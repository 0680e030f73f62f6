"""The rows of a stream-stream join's state (join state formats 1 and 2), as ``SymmetricHashJoinStateManager`` keeps
them per side: ``keyToNumValues`` maps a join key to how many rows it holds, ``keyWithIndexToValue`` maps (join key,
index) to each row, at indices 0 to count - 1. Rows are ``UnsafeRow`` bytes."""
from __future__ import annotations

import re
import struct
from typing import Callable, Iterable, Mapping, NamedTuple

from wmcheck.statestore.formats.records import PUT, Record
from wmcheck.statestore.formats.schema import StructType
from wmcheck.statestore.keys.partitions import FIXED_TYPES

Key = tuple[bytes | None, ...]
"""A join key's fields: None for a null, the 8 bytes of a fixed-width field, the bytes of a variable-length one."""

_LONG = struct.Struct("<q").unpack_from
_DECIMAL = re.compile(r"decimal\((\d+),\s*\d+\)")


def _fixed_width(data_type: object) -> bool:
    """Whether ``UnsafeRow`` keeps a field of this type in its 8-byte slot (else the slot points at its bytes)."""
    if not isinstance(data_type, str):
        return False
    decimal = _DECIMAL.fullmatch(data_type)
    return data_type in FIXED_TYPES or (decimal is not None and int(decimal[1]) <= 18)


def key_fields(schema: StructType, total: int) -> Callable[[bytes], Key]:
    """``row bytes -> Key``: the fields of ``schema`` at the start of an ``UnsafeRow`` of ``total`` fields (the key
    row of ``keyToNumValues``: ``total`` is the key's field count; of ``keyWithIndexToValue``: one more, the index)."""
    fixed = [_fixed_width(f.data_type) for f in schema.fields]
    width = (total + 63) // 64 * 8

    def read(row: bytes) -> Key:
        out: list[bytes | None] = []
        for i, kind in enumerate(fixed):
            if row[i // 8] >> (i % 8) & 1:
                out.append(None)
                continue
            at = width + 8 * i
            if kind:
                out.append(row[at:at + 8])
            else:
                word = int.from_bytes(row[at:at + 8], "little")
                out.append(row[word >> 32:(word >> 32) + (word & 0xFFFFFFFF)])
        return tuple(out)

    return read


def long_field(row: bytes, index: int, total: int) -> int:
    """The long at field ``index`` of an ``UnsafeRow`` of ``total`` fields."""
    return _LONG(row, (total + 63) // 64 * 8 + 8 * index)[0]


def fold(files: Iterable[Iterable[Record]]) -> dict[bytes, bytes]:
    """The state a chain of files loads (a snapshot, then increments): each key's last put, deletes applied."""
    state: dict[bytes, bytes] = {}
    for records in files:
        for kind, key, value in records:
            if kind == PUT and value is not None:
                state[key] = value
            else:
                state.pop(key, None)
    return state


class Missing(NamedTuple):
    """A join key whose count names a row its indexed store lacks: the count (``values``) and the first index missing."""

    key: Key
    values: int
    gap: int


def missing_rows(counts: Mapping[bytes, bytes], rows: Mapping[bytes, bytes], key: StructType) -> list[Missing]:
    """Every key of ``counts`` (``keyToNumValues``) whose count names an index ``rows`` (``keyWithIndexToValue``)
    does not hold, in key order. Rows beyond a key's count are not read by Spark (not reported)."""
    n = len(key.fields)
    plain, indexed = key_fields(key, n), key_fields(key, n + 1)
    held: dict[Key, set[int]] = {}
    for row in rows:
        held.setdefault(indexed(row), set()).add(long_field(row, n, n + 1))
    out = []
    for row, value in counts.items():
        k, count = plain(row), long_field(value, 0, 1)
        have = held.get(k, set())
        gap = next((i for i in range(count) if i not in have), None)
        if gap is not None:
            out.append(Missing(k, count, gap))
    return sorted(out, key=lambda m: tuple(b or b"" for b in m.key))


def shown_key(key: Key, schema: StructType) -> str:
    """A join key as text: strings decoded, integers as numbers, other fields as hex."""
    parts = []
    for value, field in zip(key, schema.fields):
        if value is None:
            parts.append("null")
        elif field.data_type == "string":
            parts.append(repr(value.decode("utf-8", "replace")))
        elif field.data_type in ("integer", "date"):
            parts.append(str(int.from_bytes(value[:4], "little", signed=True)))
        elif field.data_type in ("long", "timestamp", "timestamp_ntz"):
            parts.append(str(_LONG(value)[0]))
        else:
            parts.append(value.hex())
    return ", ".join(parts)
