"""Decode many ``UnsafeRow`` values straight into Arrow columns (one Python list per leaf field,
no dict per row): the fast path for a store's keys and values. Layout as in :mod:`.unsafe_row`,
whose decoders it reuses for arrays, maps and every atomic type."""
from __future__ import annotations

from typing import Any, Callable, Sequence

from wmcheck.checkpoint.state_schema import StructType

from .unsafe_row import MISREAD, arrow_type, malformed, nested_start, value_decoder


def _nested(buf: bytes, base: int, at: int) -> Any:
    raise AssertionError("nested structs are collected by their own StructColumns")


class StructColumns:
    """Collects rows of ``schema``: :meth:`add` one row at a time, :meth:`finish` an Arrow struct array."""

    def __init__(self, schema: StructType) -> None:
        self.schema = schema
        self.valid: list[bool] = []
        n = len(schema.fields)
        self.bitset = ((n + 63) // 64) * 8
        self.children: list[StructColumns | None] = []
        self.lists: list[list[Any]] = []
        self.decoders: list[Callable[[bytes, int, int], Any]] = []
        for f in schema.fields:
            nested = StructColumns(f.data_type) if isinstance(f.data_type, StructType) else None
            self.children.append(nested)
            self.lists.append([])
            self.decoders.append(_nested if nested else value_decoder(f.data_type))
        self.fields = list(zip(range(n), self.children, self.lists, self.decoders, strict=True))

    def add(self, buf: bytes, start: int) -> None:
        """Add the row at ``start`` of ``buf``; MalformedFileError if it is not one (then the collected
        columns are incomplete: the read stops there)."""
        self.valid.append(True)
        bitset = self.bitset
        try:
            for i, child, values, decode in self.fields:
                null = buf[start + (i >> 3)] >> (i & 7) & 1
                at = start + bitset + 8 * i
                if child is not None:
                    if null:
                        child.add_null()
                    else:
                        child.add(buf, nested_start(buf, start, at, "struct"))
                else:
                    values.append(None if null else decode(buf, start, at))
        except MISREAD as exc:
            raise malformed(exc) from None

    def add_null(self) -> None:
        self.valid.append(False)
        for child, values in zip(self.children, self.lists, strict=True):
            if child is not None:
                child.add_null()
            else:
                values.append(None)

    def finish(self, raw: bool = True):
        """The collected rows as an Arrow struct array (timestamps and dates as integers when ``raw``)."""
        import pyarrow as pa

        arrays = []
        for f, child, values in zip(self.schema.fields, self.children, self.lists, strict=True):
            arrays.append(child.finish(raw) if child is not None else pa.array(values, type=arrow_type(f.data_type, raw)))
        mask = None if all(self.valid) else pa.array([not v for v in self.valid], pa.bool_())
        return pa.StructArray.from_arrays(arrays, fields=list(arrow_type(self.schema, raw)), mask=mask)


def decode_rows(schema: StructType, rows: Sequence[bytes], skip: int, fast: bool = True) -> Any:
    """The rows of ``schema`` in ``rows`` (each after ``skip`` bytes of prefix) as an Arrow struct array
    (timestamps and dates as integers): column-wise with NumPy when ``fast`` and :mod:`.unsafe_columns`
    proves the batch (:class:`.record_spans.ByteRows` where they lie, others joined), else row by row
    (:class:`StructColumns`, the reference)."""
    if fast and rows:
        import numpy as np

        from .record_spans import ByteRows
        from .unsafe_columns import decode

        if isinstance(rows, ByteRows):
            buf, starts, ends = rows.buf, rows.starts + skip, rows.ends
        else:
            ends = np.cumsum(np.fromiter(map(len, rows), np.int64, len(rows)))
            starts = np.empty_like(ends)
            starts[0], starts[1:] = skip, ends[:-1] + skip
            buf = b"".join(rows)
        decoded = decode(schema, buf, starts, ends)
        if decoded is not None:
            return decoded
    columns = StructColumns(schema)
    add = columns.add
    for row in rows:
        add(row, skip)
    return columns.finish()
