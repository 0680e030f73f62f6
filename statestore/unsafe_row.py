"""Decode Spark's ``UnsafeRow`` bytes (how state stores keep keys and values) into Python values.

Layout (Spark's ``UnsafeRow``, ``UnsafeArrayData``, ``UnsafeMapData``; all little-endian):

* a row of N fields: a null bitset of ``ceil(N/64)`` 8-byte words (bit i = field i is null), then
  one 8-byte slot per field. Fixed-width values sit at the start of their slot (boolean and byte
  1 byte, short 2, int/date/float 4, long/timestamp/double 8, a decimal of precision <= 18 its
  unscaled long); every other value is ``offset << 32 | size`` pointing into the row: strings
  (UTF-8), binary, decimals (``BigInteger.toByteArray``, big-endian), nested rows, arrays and maps.
  Interval types are refused (no fixture proves them: pyspark cannot collect year-month intervals).
* an array: a long element count, a null bitset of ``ceil(n/64)`` words, then the elements, each
  as wide as its type (1, 2, 4 or 8 bytes; variable-width ones an 8-byte offset-and-size relative
  to the array).
* a map: a long holding the byte size of the key array, the key array, then the value array.

Values come out as Arrow builds them (:func:`arrow_type`): ints, floats, ``str``, ``bytes``,
``Decimal``, dicts for structs, lists for arrays, lists of ``(key, value)`` for maps;
timestamps as epoch microseconds and dates as epoch days, cast by Arrow afterwards.
"""
from __future__ import annotations

import re
import struct
from decimal import Context, Decimal
from typing import Any, Callable

from wmcheck.checkpoint.errors import UnsupportedError
from wmcheck.checkpoint.state_schema import ArrayType, DataType, MapType, OtherType, StructType

MAX_LONG_DIGITS = 18
_EXACT = Context(prec=80)  # Spark decimals have at most 38 digits: scaling them never rounds
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(-?\d+)\)$")
_FIXED = {
    "boolean": ("?", 1), "byte": ("b", 1), "short": ("<h", 2), "integer": ("<i", 4), "date": ("<i", 4),
    "float": ("<f", 4), "long": ("<q", 8), "timestamp": ("<q", 8), "timestamp_ntz": ("<q", 8), "double": ("<d", 8),
}
_VARIABLE = ("string", "binary")


def atomic_kind(name: str) -> str:
    """The storage kind of an atomic Spark type name, or raise UnsupportedError."""
    if name in _FIXED or name in _VARIABLE or name == "void":
        return name
    if name.startswith(("char(", "varchar(")):
        return "string"
    match = _DECIMAL.match(name)
    if match:
        return "decimal_long" if int(match[1]) <= MAX_LONG_DIGITS else "decimal_bytes"
    raise UnsupportedError(f"state column type {name!r} is not decoded by the python engine", hint="use --engine spark")


def _unsupported(data_type: OtherType) -> UnsupportedError:
    return UnsupportedError(f"state column type {dict(data_type.json)} is not decoded by the python engine",
                            hint="use --engine spark")


def check_supported(data_type: DataType) -> None:
    """Raise UnsupportedError for any type this module cannot decode (before any file is read)."""
    if isinstance(data_type, StructType):
        for f in data_type.fields:
            check_supported(f.data_type)
    elif isinstance(data_type, ArrayType):
        check_supported(data_type.element_type)
    elif isinstance(data_type, MapType):
        check_supported(data_type.key_type)
        check_supported(data_type.value_type)
    elif isinstance(data_type, str):
        atomic_kind(data_type)
    else:
        raise UnsupportedError(f"state column type {dict(data_type.json)!r} is not decoded by the python engine",
                               hint="use --engine spark")


def _scale(name: str) -> int:
    match = _DECIMAL.match(name)
    return int(match[2]) if match else 0


def _offset_size(buf: bytes, at: int) -> tuple[int, int]:
    word = int.from_bytes(buf[at:at + 8], "little")
    return word >> 32, word & 0xFFFFFFFF


def element_size(data_type: DataType) -> int:
    """Bytes per element of an array of ``data_type`` (``UnsafeArrayWriter``)."""
    if isinstance(data_type, str):
        kind = atomic_kind(data_type)
        if kind in _FIXED:
            return _FIXED[kind][1]
        if kind == "void":
            return 1
    return 8


def value_decoder(data_type: DataType) -> Callable[[bytes, int, int], Any]:
    """``(buffer, base of the enclosing row or array, address of the slot or element) -> value``."""
    if isinstance(data_type, StructType):
        row = row_decoder(data_type)
        return lambda buf, base, at: row(buf, base + _offset_size(buf, at)[0])
    if isinstance(data_type, ArrayType):
        array = array_decoder(data_type.element_type)
        return lambda buf, base, at: array(buf, base + _offset_size(buf, at)[0])
    if isinstance(data_type, MapType):
        keys, values = array_decoder(data_type.key_type), array_decoder(data_type.value_type)

        def map_value(buf: bytes, base: int, at: int) -> Any:
            start = base + _offset_size(buf, at)[0]
            key_bytes = int.from_bytes(buf[start:start + 8], "little", signed=True)
            return list(zip(keys(buf, start + 8), values(buf, start + 8 + key_bytes), strict=True))

        return map_value
    if not isinstance(data_type, str):
        raise _unsupported(data_type)
    kind = atomic_kind(data_type)
    if kind in _FIXED:
        unpack = struct.Struct(_FIXED[kind][0]).unpack_from
        return lambda buf, base, at: unpack(buf, at)[0]
    if kind == "void":
        return lambda buf, base, at: None
    if kind == "decimal_long":
        scale = _scale(data_type)
        return lambda buf, base, at: Decimal(struct.unpack_from("<q", buf, at)[0]).scaleb(-scale, _EXACT)
    if kind == "decimal_bytes":
        scale = _scale(data_type)

        def big_decimal(buf: bytes, base: int, at: int) -> Decimal:
            offset, size = _offset_size(buf, at)
            return Decimal(int.from_bytes(buf[base + offset:base + offset + size], "big", signed=True)).scaleb(-scale, _EXACT)

        return big_decimal
    if kind == "string":
        def text(buf: bytes, base: int, at: int) -> str:
            offset, size = _offset_size(buf, at)
            return bytes(buf[base + offset:base + offset + size]).decode("utf-8", "replace")

        return text

    def binary(buf: bytes, base: int, at: int) -> bytes:
        offset, size = _offset_size(buf, at)
        return bytes(buf[base + offset:base + offset + size])

    return binary


def row_decoder(schema: StructType) -> Callable[[bytes, int], dict[str, Any]]:
    """``(buffer, start of the row) -> {field: value}`` for rows of ``schema``."""
    names = [f.name for f in schema.fields]
    decoders = [value_decoder(f.data_type) for f in schema.fields]
    n = len(names)
    bitset = ((n + 63) // 64) * 8
    fields = list(zip(range(n), names, decoders))

    def row(buf: bytes, start: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for i, name, decode in fields:
            if buf[start + (i >> 3)] >> (i & 7) & 1:
                out[name] = None
            else:
                out[name] = decode(buf, start, start + bitset + 8 * i)
        return out

    return row


def array_decoder(element_type: DataType) -> Callable[[bytes, int], list[Any]]:
    """``(buffer, start of the array) -> [values]``."""
    width = element_size(element_type)
    decode = value_decoder(element_type)

    def array(buf: bytes, start: int) -> list[Any]:
        count = int.from_bytes(buf[start:start + 8], "little", signed=True)
        first = start + 8 + ((count + 63) // 64) * 8
        return [None if buf[start + 8 + (i >> 3)] >> (i & 7) & 1 else decode(buf, start, first + i * width)
                for i in range(count)]

    return array


def arrow_type(data_type: DataType, raw: bool = False):
    """The Arrow type of a Spark type as Spark's ``toArrow`` gives it (large strings and binaries,
    UTC timestamps); ``raw``: timestamps and dates as the integers :func:`row_decoder` returns."""
    import pyarrow as pa

    if isinstance(data_type, StructType):
        return pa.struct([pa.field(f.name, arrow_type(f.data_type, raw), f.nullable) for f in data_type.fields])
    if isinstance(data_type, ArrayType):
        return pa.list_(arrow_type(data_type.element_type, raw))
    if isinstance(data_type, MapType):
        return pa.map_(arrow_type(data_type.key_type, raw), arrow_type(data_type.value_type, raw))
    if not isinstance(data_type, str):
        raise _unsupported(data_type)
    kind = atomic_kind(data_type)
    simple = {"boolean": pa.bool_(), "byte": pa.int8(), "short": pa.int16(), "integer": pa.int32(), "long": pa.int64(),
              "float": pa.float32(), "double": pa.float64(), "string": pa.large_string(), "binary": pa.large_binary(),
              "void": pa.null()}
    if kind in simple:
        return simple[kind]
    if kind in ("decimal_long", "decimal_bytes"):
        match = _DECIMAL.match(data_type)
        assert match is not None
        return pa.decimal128(int(match[1]), int(match[2]))
    if raw:
        return pa.int32() if kind == "date" else pa.int64()
    return {"date": pa.date32(), "timestamp": pa.timestamp("us", tz="UTC"), "timestamp_ntz": pa.timestamp("us")}[kind]
