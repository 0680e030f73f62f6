"""Decode a batch of ``UnsafeRow`` values column by column with NumPy: the fast path of the python engine.

The rows of a batch lie in one buffer (``starts``/``ends`` per row). Each field is read for every row
at once: the null bit from the row's bitset, fixed-width values gathered from their 8-byte slots,
strings and binaries gathered by the offsets and sizes in their slots, nested structs decoded the same
way from the rows their slots point to. Layout and values as :mod:`wmcheck.statestore.encodings.unsafe_row` (the reference, row by
row) describes them; the result is the Arrow struct array :class:`wmcheck.statestore.encodings.columnar.StructColumns` builds.

Arrays, maps and decimals of more than 18 digits are decoded row by row by the reference's decoders,
column by column. :func:`decode` returns None when anything is not proven on every row: a bounds
check fails, a decimal is out of its range, a string is not UTF-8 (the reference replaces invalid
bytes) or the reference's decoder of a column fails; the caller then decodes the batch with the
reference, which raises the reference's error on a damaged row.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from wmcheck.checkpoint.errors import MalformedFileError
from wmcheck.statestore.encodings.unsafe_row import DECIMAL_TYPE, MISREAD, arrow_type, atomic_kind, value_decoder
from wmcheck.statestore.formats.schema import DataType, StructType

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

_FIXED = {"boolean": (1, "<u1"), "byte": (1, "<i1"), "short": (2, "<i2"), "integer": (4, "<i4"), "date": (4, "<i4"),
          "float": (4, "<f4"), "long": (8, "<i8"), "timestamp": (8, "<i8"), "timestamp_ntz": (8, "<i8"),
          "double": (8, "<f8"), "day_time_interval": (8, "<i8"), "decimal_long": (8, "<i8")}
_VARIABLE = ("string", "binary")
_INTEGERS = ("byte", "short", "integer", "date", "long", "timestamp", "timestamp_ntz")


class _Unproven(Exception):
    """A check failed: the reference decodes (or refuses) the batch."""


def decode(schema: StructType, buf: bytes, starts: "np.ndarray", ends: "np.ndarray",
           keep: "np.ndarray | None" = None) -> "pa.StructArray | None":
    """The rows of ``schema`` at ``starts`` of ``buf`` (each ending at its ``ends``) as an Arrow struct array
    with timestamps and dates as integers, or None (see the module docstring). ``keep``: the rows (indexes, in
    order) the array holds; every row is checked all the same, so a batch is declined whichever rows are kept."""
    import numpy as np

    u8 = np.frombuffer(buf, np.uint8)
    try:
        return _struct(schema, buf, u8, starts.astype(np.int64, copy=False), ends.astype(np.int64, copy=False), None,
                       keep)
    except _Unproven:
        return None


def leaf(schema: StructType, buf: bytes, starts: "np.ndarray", ends: "np.ndarray",
         path: tuple[str, ...]) -> "tuple[np.ndarray, np.ndarray] | None":
    """``(values, set)`` of the integer field (a timestamp, date or whole number) at ``path`` of the rows at ``starts``
    (int64 values, 0 where a struct on the path or the field is null), or None where it is no such field or a struct
    on the path does not lie inside its row."""
    import numpy as np

    u8 = np.frombuffer(buf, np.uint8)
    starts, ends = starts.astype(np.int64, copy=False), ends.astype(np.int64, copy=False)
    valid = np.ones(len(starts), bool)
    current: Any = schema
    for depth, name in enumerate(path):
        fields = [f.name for f in current.fields] if isinstance(current, StructType) else []
        if name not in fields:
            return None
        i, bitset = fields.index(name), ((len(fields) + 63) // 64) * 8
        if len(starts) and (valid & (ends - starts < bitset + 8 * len(fields))).any():
            return None
        at = np.where(valid, starts, 0)
        valid &= ((u8[at + (i >> 3)] >> (i & 7)) & 1) == 0
        slots, current = at + bitset + 8 * i, current.fields[i].data_type
        if depth + 1 < len(path):
            size, offset = _slot(u8, slots)
            starts = np.where(valid, starts + offset, 0)
            if (valid & (starts + size > ends)).any():
                return None
            ends = np.where(valid, ends, 0)  # a nested struct ends where its row does, as the decoders read it
            continue
        kind = atomic_kind(current) if isinstance(current, str) else None
        if kind not in _INTEGERS:
            return None
        width, dtype = _FIXED[kind]
        return np.where(valid, _gather(u8, slots, width, dtype), 0).astype(np.int64), valid
    return None


def _gather(u8: "np.ndarray", at: "np.ndarray", width: int, dtype: str) -> "np.ndarray":
    """The ``width``-byte values of ``dtype`` at offsets ``at`` of ``u8``: one gather from a view of a value at every
    byte (a fifth of the time of gathering their bytes)."""
    import numpy as np

    return np.ndarray((max(len(u8) - width + 1, 0),), dtype, u8, 0, (1,))[at]


def _validity(valid: "np.ndarray") -> "pa.Buffer | None":
    import numpy as np
    import pyarrow as pa

    return None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))


def _struct(schema: StructType, buf: bytes, u8: "np.ndarray", starts: "np.ndarray", ends: "np.ndarray",
            valid: "np.ndarray | None", keep: "np.ndarray | None") -> "pa.StructArray":
    """The struct array of the ``keep`` rows (all when None) of the rows at ``starts``, every row checked (only rows
    where ``valid`` are read; the others are null)."""
    import numpy as np
    import pyarrow as pa

    n = len(starts)
    if valid is not None and not valid.all():  # the rows whose struct is set, then the nulls put back
        kept = np.arange(n) if keep is None else keep
        present = valid[kept]
        inner = _struct(schema, buf, u8, starts[valid], ends[valid], None, (np.cumsum(valid) - 1)[kept[present]])
        return inner.take(pa.array(np.cumsum(present) - 1, mask=~present))
    fields = schema.fields
    bitset = ((len(fields) + 63) // 64) * 8
    if n and (ends - starts < bitset + 8 * len(fields)).any():
        raise _Unproven
    arrays = []
    for i, f in enumerate(fields):
        null = (u8[starts + (i >> 3)] >> (i & 7)) & 1 if n else np.zeros(0, np.uint8)
        arrays.append(_field(f.data_type, buf, u8, starts, ends, starts + bitset + 8 * i, null == 0, keep))
    return pa.StructArray.from_arrays(arrays, fields=list(arrow_type(schema, raw=True)))


def _field(data_type: DataType, buf: bytes, u8: "np.ndarray", starts: "np.ndarray", ends: "np.ndarray", slots: "np.ndarray",
           valid: "np.ndarray", keep: "np.ndarray | None") -> Any:
    import numpy as np
    import pyarrow as pa

    if isinstance(data_type, StructType):
        size, offset = _slot(u8, slots)
        child = starts + offset
        if (valid & (child + size > ends)).any():
            raise _Unproven
        return _struct(data_type, buf, u8, np.where(valid, child, 0), np.where(valid, ends, 0), valid, keep)
    kind = atomic_kind(data_type) if isinstance(data_type, str) else None
    if kind is None or kind == "decimal_bytes":
        return _by_rows(data_type, buf, starts, ends, slots, valid, keep)
    assert isinstance(data_type, str)
    arrow = arrow_type(data_type, raw=True)
    if kind in _VARIABLE:
        return _variable(kind, u8, starts, ends, slots, valid, keep)
    if keep is not None and kind != "decimal_long":  # a decimal's range is checked in every row
        slots, valid = slots[keep], valid[keep]
    n = len(slots)
    if kind == "void":
        return pa.nulls(n)
    width, dtype = _FIXED[kind]
    values = _gather(u8, slots, width, dtype)
    values = np.where(valid, values, 0)
    if kind == "boolean":
        return pa.Array.from_buffers(arrow, n, [_validity(valid), pa.py_buffer(np.packbits(values != 0, bitorder="little"))])
    if kind == "decimal_long":
        match = DECIMAL_TYPE.match(data_type)
        assert match is not None
        limit = 10 ** int(match[1])
        if ((values <= -limit) | (values >= limit)).any():
            raise _Unproven
        if keep is not None:
            values, valid, n = values[keep], valid[keep], len(keep)
        wide = np.empty((n, 2), np.int64)
        wide[:, 0], wide[:, 1] = values, values >> 63
        return pa.Array.from_buffers(arrow, n, [_validity(valid), pa.py_buffer(wide)])
    return pa.Array.from_buffers(arrow, n, [_validity(valid), pa.py_buffer(np.ascontiguousarray(values))])


def _slot(u8: "np.ndarray", slots: "np.ndarray") -> tuple["np.ndarray", "np.ndarray"]:
    """(size, offset) of variable-length slots: ``offset << 32 | size``."""
    import numpy as np

    words = _gather(u8, slots, 8, "<u8")
    return (words & 0xFFFFFFFF).astype(np.int64), (words >> np.uint64(32)).astype(np.int64)


def _variable(kind: str, u8: "np.ndarray", starts: "np.ndarray", ends: "np.ndarray", slots: "np.ndarray",
              valid: "np.ndarray", keep: "np.ndarray | None") -> Any:
    """Strings and binaries: every row's bounds checked, the ``keep`` rows' bytes gathered (and, for strings, their
    UTF-8 checked: another row's invalid bytes never reach the array)."""
    import numpy as np
    import pyarrow as pa

    size, offset = _slot(u8, slots)
    size = np.where(valid, size, 0)
    first = starts + offset
    if (valid & (first + size > ends)).any():
        raise _Unproven
    if keep is not None:
        size, first, valid = size[keep], first[keep], valid[keep]
    n = len(size)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(size, out=offsets[1:])
    total = int(offsets[-1])
    index = np.repeat(first - offsets[:-1], size) + np.arange(total, dtype=np.int64)
    data = u8[index]
    array = pa.Array.from_buffers(pa.large_binary(), n, [_validity(valid), pa.py_buffer(offsets), pa.py_buffer(data)])
    if kind == "binary":
        return array
    text = array.view(pa.large_string())
    try:
        text.validate(full=True)
    except pa.ArrowInvalid:
        raise _Unproven from None
    return text


def _by_rows(data_type: DataType, buf: bytes, starts: "np.ndarray", ends: "np.ndarray", slots: "np.ndarray",
             valid: "np.ndarray", keep: "np.ndarray | None") -> Any:
    """An array, map or wide decimal column, value by value with the reference's decoder (each row's
    buffer ending where the row does, as the reference sees it); every row decoded, the ``keep`` rows kept."""
    import pyarrow as pa

    decode, view = value_decoder(data_type), cast(bytes, memoryview(buf))  # read as bytes, sliced without copies
    rows = zip(starts.tolist(), ends.tolist(), slots.tolist(), valid.tolist())
    try:
        values = [decode(view[:end], base, at) if ok else None for base, end, at, ok in rows]
    except (MalformedFileError, *MISREAD):
        raise _Unproven from None
    if keep is not None:
        values = [values[i] for i in keep.tolist()]
    return pa.array(values, type=arrow_type(data_type, raw=True))
