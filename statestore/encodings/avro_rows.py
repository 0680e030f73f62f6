"""Decode state rows Spark wrote with ``spark.sql.streaming.stateStore.encodingFormat=avro`` (RocksDB).

Layout (``AvroStateEncoder``): after the RocksDB version byte, a key or value is a 2-byte
little-endian state schema id (``Platform.putShort``) then the row in Avro binary encoding; the
prefix part of a prefix-scan key has no schema id. The Avro schema is the one Spark derives from the
row's ``StructType`` (``SchemaConverters.toAvroTypeWithDefaults``): a record whose every field is a
union ``[null, T]``; nested structs, arrays and maps are unions ``[null, T]`` themselves, array
items and map values are the bare element type (structs again ``[null, record]``); byte, short and
int are Avro ints, date an int (days), timestamps longs (microseconds), decimals ``fixed`` of the
fewest bytes for their precision, binary ``bytes``; maps only with string keys.

Values come out as :mod:`wmcheck.statestore.encodings.unsafe_row` returns them (timestamps and dates as integers, maps as
``(key, value)`` lists), decoded by fastavro.
"""
from __future__ import annotations

import io
import math
from typing import Any, Callable

from wmcheck.checkpoint.errors import UnsupportedError, arg
from wmcheck.statestore.encodings.unsafe_row import DECIMAL_TYPE, atomic_kind
from wmcheck.statestore.formats.codecs import require_module
from wmcheck.statestore.formats.schema import ArrayType, DataType, MapType, StructType

SCHEMA_ID_BYTES = 2
_PLAIN = {"boolean": "boolean", "byte": "int", "short": "int", "integer": "int", "long": "long", "float": "float",
          "double": "double", "string": "string", "binary": "bytes", "date": "int", "timestamp": "long",
          "timestamp_ntz": "long", "void": "null"}


def _unsupported(data_type: Any) -> UnsupportedError:
    return UnsupportedError(f"Avro-encoded state column type {data_type!r} is not decoded by the python engine",
                            hint=f"use {arg('engine', 'spark')}")


def _min_bytes(precision: int) -> int:
    """``minBytesForPrecision``: the fewest bytes whose two's complement holds 10**precision - 1."""
    size = 1
    while math.pow(2.0, 8 * size - 1) < math.pow(10.0, precision):
        size += 1
    return size


class _Names:
    def __init__(self) -> None:
        self.count = 0

    def next(self, base: str) -> str:
        self.count += 1
        return f"{base}_{self.count}"


def _nullable(schema: Any) -> Any:
    return schema if isinstance(schema, list) else ["null", schema]


def _avro(data_type: DataType, names: _Names, nested: bool) -> Any:
    if isinstance(data_type, StructType):
        record = {"type": "record", "name": names.next("record"),
                  "fields": [{"name": f.name, "type": _nullable(_avro(f.data_type, names, True)), "default": None}
                             for f in data_type.fields]}
        return ["null", record] if nested else record
    if isinstance(data_type, ArrayType):
        return ["null", {"type": "array", "items": _avro(data_type.element_type, names, True)}]
    if isinstance(data_type, MapType):
        if data_type.key_type != "string":
            raise _unsupported(f"map<{data_type.key_type}, ...>")
        return ["null", {"type": "map", "values": _avro(data_type.value_type, names, True)}]
    if not isinstance(data_type, str):
        raise _unsupported(data_type)
    kind = atomic_kind(data_type)
    if kind in _PLAIN:
        return _PLAIN[kind]
    match = DECIMAL_TYPE.match(data_type)
    if match:
        precision, scale = int(match[1]), int(match[2])
        return {"type": "fixed", "name": names.next("fixed"), "size": _min_bytes(precision),
                "logicalType": "decimal", "precision": precision, "scale": scale}
    raise _unsupported(data_type)


def _converter(data_type: DataType) -> Callable[[Any], Any] | None:
    """What turns fastavro's value into :mod:`wmcheck.statestore.encodings.unsafe_row`'s (``None``: nothing to change)."""
    if isinstance(data_type, StructType):
        fields = [(f.name, _converter(f.data_type)) for f in data_type.fields]
        changed = [(name, c) for name, c in fields if c is not None]
        if not changed:
            return None

        def struct(value: dict[str, Any]) -> dict[str, Any]:
            for name, convert in changed:
                if value[name] is not None:
                    value[name] = convert(value[name])
            return value

        return struct
    if isinstance(data_type, ArrayType):
        element = _converter(data_type.element_type)
        return None if element is None else lambda value: [None if e is None else element(e) for e in value]
    if isinstance(data_type, MapType):
        inner = _converter(data_type.value_type)
        return lambda value: [(k, v if v is None or inner is None else inner(v)) for k, v in value.items()]
    return None


def check_avro_supported(schema: StructType) -> None:
    """Raise UnsupportedError for a schema whose Avro rows this module cannot decode."""
    _avro(schema, _Names(), False)


def avro_row_decoder(schema: StructType, schema_id: bool = True) -> Callable[[bytes, int], dict[str, Any]]:
    """``(buffer, start after the version byte) -> {field: value}`` for Avro rows of ``schema``
    (``schema_id``: a 2-byte schema id comes first)."""
    require_module("fastavro", "reading Avro-encoded state")
    from fastavro import parse_schema, schemaless_reader

    parsed = parse_schema(_avro(schema, _Names(), False))
    convert = _converter(schema)
    skip = SCHEMA_ID_BYTES if schema_id else 0

    def row(buf: bytes, start: int) -> dict[str, Any]:
        value: Any = schemaless_reader(io.BytesIO(memoryview(buf)[start + skip:]), parsed, None)
        return convert(value) if convert is not None else value

    return row
