"""Decode many ``UnsafeRow`` values straight into Arrow columns (one Python list per leaf field,
no dict per row): the fast path for a store's keys and values. Layout as in :mod:`wmcheck.statestore.encodings.unsafe_row`,
whose decoders it reuses for arrays, maps and every atomic type."""
from __future__ import annotations

from typing import Any, Callable, Sequence

from wmcheck.statestore.encodings.unsafe_row import MISREAD, arrow_type, malformed, nested_start, value_decoder
from wmcheck.statestore.formats.schema import StructType


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

    def finish(self, raw: bool = True, keep: Any = None):
        """The collected rows (the ``keep`` ones, indexes in order, when given) as an Arrow struct array (timestamps
        and dates as integers when ``raw``)."""
        import pyarrow as pa

        arrays = []
        for f, child, values in zip(self.schema.fields, self.children, self.lists, strict=True):
            if child is not None:
                arrays.append(child.finish(raw, keep))
            else:
                arrays.append(pa.array(values if keep is None else [values[i] for i in keep], type=arrow_type(f.data_type, raw)))
        valid = self.valid if keep is None else [self.valid[i] for i in keep]
        mask = None if all(valid) else pa.array([not v for v in valid], pa.bool_())
        return pa.StructArray.from_arrays(arrays, fields=list(arrow_type(self.schema, raw)), mask=mask)


def byte_rows(rows: Sequence[bytes], skip: int) -> tuple[bytes, Any, Any]:
    """``(buffer, starts, ends)`` of ``rows`` after ``skip`` bytes of prefix each: :class:`wmcheck.statestore.formats.record_spans.ByteRows`
    where they lie, others joined."""
    import numpy as np

    from wmcheck.statestore.formats.record_spans import ByteRows

    if isinstance(rows, ByteRows):
        return rows.buf, rows.starts + skip, rows.ends
    ends = np.cumsum(np.fromiter(map(len, rows), np.int64, len(rows)))
    starts = np.empty_like(ends)
    if len(rows):
        starts[0], starts[1:] = skip, ends[:-1] + skip
    return b"".join(rows), starts, ends


def decode_rows(schema: StructType, rows: Sequence[bytes], skip: int, fast: bool = True, keep: Any = None) -> Any:
    """The rows of ``schema`` in ``rows`` (each after ``skip`` bytes of prefix; the ``keep`` ones, indexes in order,
    when given: every row is decoded all the same, so a damaged one raises) as an Arrow struct array (timestamps and
    dates as integers): column-wise with NumPy when ``fast`` and :mod:`wmcheck.statestore.encodings.unsafe_columns` proves the batch, else row
    by row (:class:`StructColumns`, the reference)."""
    if fast and rows:
        from wmcheck.statestore.encodings.unsafe_columns import decode

        decoded = decode(schema, *byte_rows(rows, skip), keep)
        if decoded is not None:
            return decoded
    columns = StructColumns(schema)
    add = columns.add
    for row in rows:
        add(row, skip)
    return columns.finish(keep=None if keep is None else keep.tolist())
