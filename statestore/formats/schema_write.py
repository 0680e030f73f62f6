"""Writing state schema files as Spark's ``SchemaWriter`` does (the format: :mod:`wmcheck.statestore.formats.schema`), for tests and
repairs that make a schema file Spark reads."""
from __future__ import annotations

import struct
from typing import Any

from wmcheck.checkpoint.errors import UnsupportedError
from wmcheck.checkpoint.logs.textlog import dump_json
from wmcheck.statestore.formats.schema import (
    CHUNK_CHARS,
    NO_USER_KEY_SCHEMA,
    ArrayType,
    DataType,
    MapType,
    StateSchemaFile,
    StructType,
)


def data_type_json(data_type: DataType) -> Any:
    """A data type as Spark's JSON value (key order as Spark writes it)."""
    if isinstance(data_type, str):
        return data_type
    if isinstance(data_type, StructType):
        return {
            "type": "struct",
            "fields": [
                {"name": f.name, "type": data_type_json(f.data_type), "nullable": f.nullable, "metadata": dict(f.metadata)}
                for f in data_type.fields
            ],
        }
    if isinstance(data_type, ArrayType):
        return {"type": "array", "elementType": data_type_json(data_type.element_type), "containsNull": data_type.contains_null}
    if isinstance(data_type, MapType):
        return {
            "type": "map",
            "keyType": data_type_json(data_type.key_type),
            "valueType": data_type_json(data_type.value_type),
            "valueContainsNull": data_type.value_contains_null,
        }
    return dict(data_type.json)


def _encode_modified_utf8(text: str) -> bytes:
    """Java's ``writeUTF`` bytes: one UTF-16 code unit at a time (surrogates separately), NUL as ``C0 80``."""
    if text.isascii() and "\0" not in text:
        return text.encode("ascii")
    units = text.encode("utf-16-be", "surrogatepass")
    chars = "".join(map(chr, struct.unpack(f">{len(units) // 2}H", units)))
    return chars.encode("utf-8", "surrogatepass").replace(b"\x00", b"\xc0\x80")


def _write_utf(text: str) -> bytes:
    raw = _encode_modified_utf8(text)
    if len(raw) > 0xFFFF:
        raise UnsupportedError(
            f"a Java writeUTF string holds at most 65535 bytes, this one needs {len(raw)}",
            hint="Spark itself cannot write a schema chunk this long",
        )
    return struct.pack(">H", len(raw)) + raw


def _write_chunked(text: str) -> bytes:
    units = text.encode("utf-16-be", "surrogatepass")
    step = 2 * CHUNK_CHARS
    chunks = [units[i : i + step].decode("utf-16-be", "surrogatepass") for i in range(0, len(units), step)]
    return struct.pack(">i", len(chunks)) + b"".join(_write_utf(c) for c in chunks)


def serialize_state_schema(schema: StateSchemaFile) -> bytes:
    """Write a schema file as Spark's ``SchemaWriter`` does (v3 schema ids only when present)."""
    out = [_write_utf(f"v{schema.version}")]
    if schema.version in (1, 2):
        if len(schema.column_families) != 1:
            raise UnsupportedError(f"a v{schema.version} schema file holds exactly one column family")
        cf = schema.column_families[0]
        write = _write_chunked if schema.version == 2 else _write_utf
        out += [write(dump_json(data_type_json(cf.key_schema))), write(dump_json(data_type_json(cf.value_schema)))]
        return b"".join(out)
    out.append(struct.pack(">i", len(schema.column_families)))
    for cf in schema.column_families:
        if cf.key_encoder is None:
            raise UnsupportedError(f"column family {cf.name!r} needs a key encoder spec in a v3 schema file")
        out.append(_write_utf(cf.name))
        if cf.key_schema_id is not None:
            out.append(struct.pack(">h", cf.key_schema_id))
        out.append(_write_chunked(dump_json(data_type_json(cf.key_schema))))
        if cf.value_schema_id is not None:
            out.append(struct.pack(">h", cf.value_schema_id))
        out.append(_write_chunked(dump_json(data_type_json(cf.value_schema))))
        out.append(_write_chunked(dump_json(dict(cf.key_encoder.fields))))
        user_key = NO_USER_KEY_SCHEMA if cf.user_key_schema is None else dump_json(data_type_json(cf.user_key_schema))
        out.append(_write_chunked(user_key))
    return b"".join(out)
