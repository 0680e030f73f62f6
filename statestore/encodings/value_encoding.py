"""Which encoding a RocksDB store's values were written in, told from their bytes (no I/O here).

With ``spark.sql.streaming.stateStore.encodingFormat=unsaferow`` every value Spark puts in a RocksDB store is a
version byte (0) and an UnsafeRow, whose size is a multiple of 8 bytes; a list state's value is such values merged,
each after its size (4 bytes, little-endian). With ``avro`` a value is a version byte, a schema id and Avro's
variable-length fields, a few bytes each, which seldom add up to those sizes: values that all fit the UnsafeRow
layout were written as UnsafeRows, values none of which fits were not.
"""
from __future__ import annotations

from typing import Iterable

UNSAFE_ROW, AVRO = "unsaferow", "avro"
SIZE_BYTES = 4


def _row(value: bytes) -> bool:
    """A version byte and an UnsafeRow (a null bit set of at least one word)."""
    return len(value) >= 9 and value[0] == 0 and (len(value) - 1) % 8 == 0


def unsafe_row_value(value: bytes) -> bool:
    """Whether ``value`` is one UnsafeRow value, or a list state's merged values, each after its size."""
    if _row(value):
        return True
    at = 0
    while at + SIZE_BYTES <= len(value):
        size = int.from_bytes(value[at:at + SIZE_BYTES], "little")
        at += SIZE_BYTES
        if not _row(value[at:at + size]):
            return False
        at += size
    return at == len(value) > 0


def written_encoding(values: Iterable[bytes]) -> str | None:
    """:data:`UNSAFE_ROW` when every non-empty value fits the UnsafeRow layout, :data:`AVRO` when none does, None when
    some do and some do not, or there is none."""
    fits = {unsafe_row_value(v) for v in values if v}
    return None if len(fits) != 1 else UNSAFE_ROW if fits == {True} else AVRO
