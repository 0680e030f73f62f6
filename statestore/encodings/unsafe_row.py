"""Decode Spark's ``UnsafeRow`` bytes (how state stores keep keys and values) into Python values.

Layout (Spark's ``UnsafeRow``, ``UnsafeArrayData``, ``UnsafeMapData``; all little-endian):

* a row of N fields: a null bitset of ``ceil(N/64)`` 8-byte words (bit i = field i is null), then
  one 8-byte slot per field. Fixed-width values sit at the start of their slot (boolean and byte
  1 byte, short 2, int/date/float 4, long/timestamp/double 8, a decimal of precision <= 18 its
  unscaled long); every other value is ``offset << 32 | size`` pointing into the row: strings
  (UTF-8), binary, decimals (``BigInteger.toByteArray``, big-endian), nested rows, arrays and maps.
  Day-time intervals are a long of microseconds; year-month and calendar intervals are refused (no
  fixture proves them: pyspark can collect neither).
* an array: a long element count, a null bitset of ``ceil(n/64)`` words, then the elements, each
  as wide as its type (1, 2, 4 or 8 bytes; variable-width ones an 8-byte offset-and-size relative
  to the array).
* a map: a long holding the byte size of the key array, the key array, then the value array.

Bytes that are not such a row raise :class:`MalformedFileError` (variable-length data, arrays and
decimals past the end of the buffer or out of their type's range are checked; every other misread,
such as a fixed-width slot past the end, is translated by :func:`malformed`).

Values come out as Arrow builds them (:func:`arrow_type`): ints, floats, ``str``, ``bytes``,
``Decimal``, dicts for structs, lists for arrays, lists of ``(key, value)`` for maps;
timestamps as epoch microseconds and dates as epoch days, cast by Arrow afterwards; day-time
intervals as microseconds (Arrow ``duration("us")``, as Spark's ``toArrow``).
"""
from __future__ import annotations

import re
import struct
from decimal import Context, Decimal
from typing import Any, Callable

from wmcheck.checkpoint.errors import MalformedFileError, UnsupportedError, arg
from wmcheck.statestore.formats.schema import ArrayType, DataType, MapType, OtherType, StructType

MAX_LONG_DIGITS = 18
_EXACT = Context(prec=80)  # Spark decimals have at most 38 digits: scaling them never rounds
DECIMAL_TYPE = re.compile(r"^decimal\((\d+),\s*(-?\d+)\)$")
"""A decimal type name as Spark writes it in a schema: precision and scale."""
_DAY_TIME = re.compile(r"^interval (day|hour|minute|second)( to (day|hour|minute|second))?$")
_FIXED = {
    "boolean": ("?", 1), "byte": ("b", 1), "short": ("<h", 2), "integer": ("<i", 4), "date": ("<i", 4),
    "float": ("<f", 4), "long": ("<q", 8), "timestamp": ("<q", 8), "timestamp_ntz": ("<q", 8), "double": ("<d", 8),
    "day_time_interval": ("<q", 8),
}
_VARIABLE = ("string", "binary")
MAX_DECIMAL_BYTES = 16  # BigInteger.toByteArray of 38 digits
MISREAD = (IndexError, ValueError, OverflowError, struct.error)
"""What Python raises reading bytes that are not an ``UnsafeRow`` of the schema."""


def malformed(exc: Exception, what: str = "bytes") -> MalformedFileError:
    """``exc`` (one of :data:`MISREAD`) as the error of ``what`` not being an ``UnsafeRow`` of its schema."""
    if isinstance(exc, MalformedFileError):
        return exc
    return MalformedFileError(f"{what} do not decode as an UnsafeRow of the schema: {exc}")


def _past_end(what: str, at: int, end: int, size: int) -> MalformedFileError:
    return MalformedFileError(f"{what} of {size} bytes at byte {at} ends past the buffer's {end} bytes")


def atomic_kind(name: str) -> str:
    """The storage kind of an atomic Spark type name, or raise UnsupportedError."""
    if name in _FIXED or name in _VARIABLE or name == "void":
        return name
    if name.startswith(("char(", "varchar(")):
        return "string"
    if _DAY_TIME.match(name):
        return "day_time_interval"
    match = DECIMAL_TYPE.match(name)
    if match:
        return "decimal_long" if int(match[1]) <= MAX_LONG_DIGITS else "decimal_bytes"
    raise UnsupportedError(f"state column type {name!r} is not decoded by the python engine", hint=f"use {arg('engine', 'spark')}")


def _unsupported(data_type: OtherType) -> UnsupportedError:
    return UnsupportedError(f"state column type {dict(data_type.json)} is not decoded by the python engine",
                            hint=f"use {arg('engine', 'spark')}")


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
                               hint=f"use {arg('engine', 'spark')}")


_SLOT = struct.Struct("<II").unpack_from  # a variable-length slot: size (low word), then offset


def nested_start(buf: bytes, base: int, at: int, what: str) -> int:
    """Where the nested struct, array or map the slot at ``at`` points to starts (offset relative to ``base``)."""
    size, offset = _SLOT(buf, at)
    if base + offset + size > len(buf):
        raise _past_end(what, base + offset, len(buf), size)
    return base + offset


def _data(buf: bytes, base: int, at: int, what: str) -> bytes:
    """The variable-length data the slot at ``at`` points to (offset relative to ``base``)."""
    size, offset = _SLOT(buf, at)
    data = bytes(buf[base + offset:base + offset + size])
    if len(data) != size:
        raise _past_end(what, base + offset, len(buf), size)
    return data


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
        return lambda buf, base, at: row(buf, nested_start(buf, base, at, "struct"))
    if isinstance(data_type, ArrayType):
        array = array_decoder(data_type.element_type)
        return lambda buf, base, at: array(buf, nested_start(buf, base, at, "array"))
    if isinstance(data_type, MapType):
        keys, values = array_decoder(data_type.key_type), array_decoder(data_type.value_type)

        def map_value(buf: bytes, base: int, at: int) -> Any:
            start = nested_start(buf, base, at, "map")
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
    if kind in ("decimal_long", "decimal_bytes"):
        return _decimal_decoder(data_type, kind)
    if kind == "string":
        return lambda buf, base, at: _data(buf, base, at, "string").decode("utf-8", "replace")
    return lambda buf, base, at: _data(buf, base, at, "binary")


def _decimal_decoder(data_type: str, kind: str) -> Callable[[bytes, int, int], Decimal]:
    match = DECIMAL_TYPE.match(data_type)
    assert match is not None
    limit, scale = 10 ** int(match[1]), int(match[2])

    def scaled(unscaled: int) -> Decimal:
        if not -limit < unscaled < limit:
            raise MalformedFileError(f"{unscaled} has more digits than {data_type} holds")
        return Decimal(unscaled).scaleb(-scale, _EXACT)

    if kind == "decimal_long":
        unpack = struct.Struct("<q").unpack_from
        return lambda buf, base, at: scaled(unpack(buf, at)[0])

    def big_decimal(buf: bytes, base: int, at: int) -> Decimal:
        data = _data(buf, base, at, "decimal")
        if not 0 < len(data) <= MAX_DECIMAL_BYTES:
            raise MalformedFileError(f"a {data_type} of {len(data)} bytes (Spark writes 1 to {MAX_DECIMAL_BYTES})")
        return scaled(int.from_bytes(data, "big", signed=True))

    return big_decimal


def row_decoder(schema: StructType) -> Callable[[bytes, int], dict[str, Any]]:
    """``(buffer, start of the row) -> {field: value}`` for rows of ``schema``."""
    names = [f.name for f in schema.fields]
    decoders = [value_decoder(f.data_type) for f in schema.fields]
    n = len(names)
    bitset = ((n + 63) // 64) * 8
    fields = list(zip(range(n), names, decoders))

    def row(buf: bytes, start: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        try:
            for i, name, decode in fields:
                if buf[start + (i >> 3)] >> (i & 7) & 1:
                    out[name] = None
                else:
                    out[name] = decode(buf, start, start + bitset + 8 * i)
        except MISREAD as exc:
            raise malformed(exc) from None
        return out

    return row


def array_decoder(element_type: DataType) -> Callable[[bytes, int], list[Any]]:
    """``(buffer, start of the array) -> [values]``."""
    width = element_size(element_type)
    decode = value_decoder(element_type)

    def array(buf: bytes, start: int) -> list[Any]:
        count = int.from_bytes(buf[start:start + 8], "little", signed=True)
        first = start + 8 + ((count + 63) // 64) * 8
        if count < 0 or first + count * width > len(buf):
            raise MalformedFileError(f"an array of {count} elements at byte {start} does not fit in {len(buf)} bytes")
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
              "void": pa.null(), "day_time_interval": pa.duration("us")}
    if kind in simple:
        return simple[kind]
    if kind in ("decimal_long", "decimal_bytes"):
        match = DECIMAL_TYPE.match(data_type)
        assert match is not None
        return pa.decimal128(int(match[1]), int(match[2]))
    if raw:
        return pa.int32() if kind == "date" else pa.int64()
    return {"date": pa.date32(), "timestamp": pa.timestamp("us", tz="UTC"), "timestamp_ntz": pa.timestamp("us")}[kind]
