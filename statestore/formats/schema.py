"""State schema files: the key and value schema of every state store (column family).

Where they live (all written once, by the driver, for partition 0's store id):

* ``state/<op>/0/[<store>/]_metadata/schema``: versions 1 and 2, one key and one value schema
  (``<store>/`` only for named stores, e.g. stream-stream join's four).
* ``state/<op>/_stateSchema/<store>/<batch>_<uuid>``: version 3, every column family of the store;
  written by transformWithState (its operator metadata v2 points at the file).

Format (Spark's ``SchemaHelper.scala``, read by ``StateSchemaCompatibilityChecker.scala``), all
integers big-endian, strings as Java ``DataOutputStream.writeUTF`` (2-byte length + modified UTF-8)::

    writeUTF("v<N>")
    v1: writeUTF(key schema JSON) writeUTF(value schema JSON)
    v2: chunked(key schema JSON) chunked(value schema JSON)
    v3: int count, then per column family:
        writeUTF(name) short keySchemaId chunked(key JSON) short valueSchemaId chunked(value JSON)
        chunked(key encoder spec JSON) chunked(user key schema JSON, or "{    }" when none)

``chunked(s)`` is an int chunk count, then ``writeUTF`` of each 65535-char slice of ``s``. The
schema ids came with SPARK-50714 (TWS schema evolution, early 2025); v3 files from earlier 4.0
development builds have none and are read too (``key_schema_id`` is then ``None``). The older
line-based ``StateSchemaV3File`` text format of mid-2024 builds is not read. Schemas are Spark
``StructType`` JSON.
"""
from __future__ import annotations

import json
import struct
from typing import Any, Mapping, Union

from wmcheck.checkpoint.errors import MalformedFileError, NewerVersionError
from wmcheck.checkpoint.logs.textlog import first_json_value
from wmcheck.checkpoint.records import dataclass

MAX_VERSION = 3
DEFAULT_COLUMN_FAMILY = "default"
WATERMARK_DELAY_KEY = "spark.watermarkDelayMs"
CHUNK_CHARS = 65535
NO_USER_KEY_SCHEMA = "{    }"
_HINT = "the file is truncated or not a state schema file; Spark rewrites it only for a new checkpoint"


@dataclass(frozen=True)
class StructField:
    """A field of a ``StructType``: name, type, nullable and metadata, as in Spark's JSON."""

    name: str
    data_type: "DataType"
    nullable: bool
    metadata: Mapping[str, Any]


@dataclass(frozen=True)
class StructType:
    fields: tuple[StructField, ...]


@dataclass(frozen=True)
class ArrayType:
    element_type: "DataType"
    contains_null: bool


@dataclass(frozen=True)
class MapType:
    key_type: "DataType"
    value_type: "DataType"
    value_contains_null: bool


@dataclass(frozen=True)
class OtherType:
    """A type given as a JSON object other than struct/array/map (e.g. ``udt``), kept as read."""

    json: Mapping[str, Any]


DataType = Union[str, StructType, ArrayType, MapType, OtherType]
"""Atomic types are their Spark name (``"long"``, ``"timestamp"``, ``"decimal(10,2)"``, ...)."""


@dataclass(frozen=True)
class KeyEncoderSpec:
    """How the key is laid out in RocksDB (v3 only); ``fields`` is the JSON object as read."""

    encoder_type: str
    """``NoPrefixKeyStateEncoderSpec``, ``PrefixKeyScanStateEncoderSpec``, ``RangeKeyScanStateEncoderSpec``, ..."""
    num_cols_prefix_key: int | None
    ordering_ordinals: tuple[int, ...] | None
    fields: Mapping[str, Any]


@dataclass(frozen=True)
class ColumnFamilySchema:
    """The schemas of one column family; v1/v2 files hold exactly one, named ``default``."""

    name: str
    key_schema: StructType
    value_schema: StructType
    key_schema_id: int | None = None
    value_schema_id: int | None = None
    key_encoder: KeyEncoderSpec | None = None
    user_key_schema: StructType | None = None
    """The map key of a transformWithState MapState (``None`` for other column families)."""


@dataclass(frozen=True)
class StateSchemaFile:
    version: int
    column_families: tuple[ColumnFamilySchema, ...]


@dataclass(frozen=True)
class EventTimeField:
    """The state column Spark compares with the watermark to evict state.

    ``path`` names it from the top of the schema, e.g. ``("ts",)`` or ``("window", "end")``.
    """

    path: tuple[str, ...]
    data_type: DataType
    delay_ms: int


# -- reading ---------------------------------------------------------------------------------


class _Reader:
    """Sequential big-endian reads, like Java's ``DataInputStream``, failing as MalformedFileError."""

    def __init__(self, data: bytes, path: str) -> None:
        self.data, self.path, self.pos = data, path, 0

    def fail(self, message: str, at: int | None = None) -> MalformedFileError:
        return MalformedFileError(message, path=self.path, byte=self.pos if at is None else at, hint=_HINT)

    def take(self, n: int, what: str) -> bytes:
        if self.pos + n > len(self.data):
            raise self.fail(f"expected {n} bytes of {what}, found {len(self.data) - self.pos} (the file ends)")
        self.pos += n
        return self.data[self.pos - n : self.pos]

    def int32(self, what: str) -> int:
        return struct.unpack(">i", self.take(4, what))[0]

    def int16(self, what: str) -> int:
        return struct.unpack(">h", self.take(2, what))[0]

    def utf(self, what: str) -> str:
        start = self.pos
        (length,) = struct.unpack(">H", self.take(2, f"the length of {what}"))
        raw = self.take(length, what)
        try:
            return _decode_modified_utf8(raw)
        except ValueError:
            raise self.fail(f"expected {what} as Java modified UTF-8, found invalid bytes", at=start) from None

    def chunked(self, what: str) -> str:
        start = self.pos
        count = self.int32(f"the chunk count of {what}")
        if count < 1:
            raise self.fail(f"expected at least 1 chunk of {what}, found a count of {count}", at=start)
        # a character outside the BMP may straddle two chunks, as two surrogates
        return _join_surrogates("".join(self.utf(f"chunk {i + 1} of {count} of {what}") for i in range(count)))


def _decode_modified_utf8(raw: bytes) -> str:
    """Java's modified UTF-8: NUL is ``C0 80``, characters beyond U+FFFF are two encoded surrogates."""
    if raw and max(raw) >= 0xF0:
        raise ValueError("4-byte sequences do not occur in modified UTF-8")
    text = raw.replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")
    return _join_surrogates(text)


def _join_surrogates(text: str) -> str:
    """Combine surrogate pairs (as Java strings hold them) into single characters."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "surrogatepass")


def _json(text: str, what: str, reader: _Reader, at: int) -> Any:
    try:
        return first_json_value(text)
    except (ValueError, RecursionError):
        shown = text if len(text) <= 60 else text[:60] + "..."
        raise reader.fail(f"expected {what} as JSON, found {shown!r}", at=at) from None


_TYPE_KEYS = {
    "array": ({"containsNull", "elementType", "type"},),
    "map": ({"keyType", "type", "valueContainsNull", "valueType"},),
    "struct": ({"fields", "type"},),
    "udt": ({"class", "pyClass", "sqlType", "type"}, {"pyClass", "serializedClass", "sqlType", "type"}),
}
"""The keys of each JSON data type Spark's ``DataType.parseDataType`` takes (its ``JSortedObject`` patterns: no other
key, none missing); anything else fails it (``INVALID_JSON_DATA_TYPE``)."""
_FIELD_KEYS = ({"metadata", "name", "nullable", "type"}, {"name", "nullable", "type"}, {"name", "type"})
"""The keys of a struct field ``parseStructField`` takes (``metadata`` and ``nullable`` may be missing: no metadata,
nullable)."""
_REFUSED = "Spark fails to read it (INVALID_JSON_DATA_TYPE)"


def _data_type(value: Any, where: str) -> DataType:
    if isinstance(value, str):
        return value
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise ValueError(f"expected a Spark data type at {where}, found {json.dumps(value)[:60]}")
    kind = value["type"]
    if set(value) not in _TYPE_KEYS.get(kind, ()):
        keys = " or ".join(",".join(sorted(k)) for k in _TYPE_KEYS.get(kind, ())) or "array, map, struct or udt"
        raise ValueError(f"expected a Spark data type at {where} with the keys {keys}, found {json.dumps(value)[:60]}: "
                         + _REFUSED)
    if kind == "struct":
        return _struct(value, where)
    if kind == "array":
        return ArrayType(_data_type(value.get("elementType"), f"{where}.element"), _bool(value, "containsNull", where))
    if kind == "map":
        return MapType(
            _data_type(value.get("keyType"), f"{where}.key"),
            _data_type(value.get("valueType"), f"{where}.value"),
            _bool(value, "valueContainsNull", where),
        )
    return OtherType(value)


def _bool(obj: dict[str, Any], key: str, where: str) -> bool:
    value = obj.get(key)
    if not isinstance(value, bool):
        raise ValueError(f"expected {key} at {where} to be true or false, found {json.dumps(value)[:40]}")
    return value


def _struct(value: Any, where: str) -> StructType:
    if not isinstance(value, dict) or value.get("type") != "struct" or not isinstance(value.get("fields"), list) \
            or set(value) != {"fields", "type"}:
        raise ValueError(f'expected a struct type ({{"type":"struct","fields":[...]}}, no other key) at {where}, found '
                         f'{json.dumps(value)[:60]}' + (f": {_REFUSED}" if isinstance(value, dict) and value.get("type") == "struct" else ""))
    fields = []
    for i, f in enumerate(value["fields"]):
        at = f"{where}.fields[{i}]"
        if not isinstance(f, dict) or not isinstance(f.get("name"), str):
            raise ValueError(f"expected a field with a name at {at}, found {json.dumps(f)[:60]}")
        if set(f) not in _FIELD_KEYS:
            raise ValueError(f"expected the field at {at} to have the keys name, type and optionally nullable and metadata, "
                             f"found {','.join(sorted(f))}: {_REFUSED}")
        metadata = f.get("metadata", {})
        if not isinstance(metadata, dict):
            raise ValueError(f"expected the metadata of {at} to be a JSON object, found {json.dumps(metadata)[:40]}")
        name = f["name"]
        nullable = _bool(f, "nullable", at) if "nullable" in f else True
        fields.append(StructField(name, _data_type(f.get("type"), f"{where}.{name}"), nullable, metadata))
    return StructType(tuple(fields))


def _to_struct(value: Any, what: str, reader: _Reader, at: int) -> StructType:
    try:
        return _struct(value, what)
    except ValueError as exc:
        raise reader.fail(str(exc), at=at) from None
    except RecursionError:
        raise reader.fail(f"expected {what} as a Spark struct type, found types nested too deeply", at=at) from None


def _schema(reader: _Reader, what: str, chunked: bool = True) -> StructType:
    at = reader.pos
    text = reader.chunked(what) if chunked else reader.utf(what)
    return _to_struct(_json(text, what, reader, at), what, reader, at)


def _encoder(reader: _Reader, what: str) -> KeyEncoderSpec:
    at = reader.pos
    obj = _json(reader.chunked(what), what, reader, at)
    kind = obj.get("keyStateEncoderType") if isinstance(obj, dict) else None
    prefix, ordinals = (obj.get("numColsPrefixKey"), obj.get("orderingOrdinals")) if isinstance(obj, dict) else (None, None)
    if (
        not isinstance(kind, str)
        or not (prefix is None or (isinstance(prefix, int) and not isinstance(prefix, bool)))
        or not (ordinals is None or (isinstance(ordinals, list) and all(type(o) is int for o in ordinals)))
    ):
        raise reader.fail(
            f'expected {what} like {{"keyStateEncoderType":"..."}}, found {json.dumps(obj)[:80]}', at=at
        )
    return KeyEncoderSpec(kind, prefix, None if ordinals is None else tuple(ordinals), obj)


def _user_key_schema(reader: _Reader, what: str) -> StructType | None:
    at = reader.pos
    value = _json(reader.chunked(what), what, reader, at)
    return None if value == {} else _to_struct(value, what, reader, at)


def _column_family(reader: _Reader, index: int, with_ids: bool) -> ColumnFamilySchema:
    name = reader.utf(f"the name of column family {index + 1}")
    what = f"column family {name!r}"
    key_id = reader.int16(f"the key schema id of {what}") if with_ids else None
    key = _schema(reader, f"the key schema of {what}")
    value_id = reader.int16(f"the value schema id of {what}") if with_ids else None
    value = _schema(reader, f"the value schema of {what}")
    encoder = _encoder(reader, f"the key encoder spec of {what}")
    user_key = _user_key_schema(reader, f"the user key schema of {what}")
    return ColumnFamilySchema(name, key, value, key_id, value_id, encoder, user_key)


def _read_v3(data: bytes, path: str, start: int, with_ids: bool) -> tuple[ColumnFamilySchema, ...]:
    reader = _Reader(data, path)
    reader.pos = start
    count = reader.int32("the column family count")
    if count < 0:
        raise reader.fail(f"expected a column family count of at least 0, found {count}", at=start)
    families = tuple(_column_family(reader, i, with_ids) for i in range(count))
    _expect_end(reader)
    return families


def _expect_end(reader: _Reader) -> None:
    if reader.pos != len(reader.data):
        raise reader.fail(f"expected the end of the file, found {len(reader.data) - reader.pos} more bytes")


def _version(reader: _Reader) -> int:
    text = reader.utf("the version string")
    number = text[1:]
    if not (text.startswith("v") and number.isascii() and number.isdigit() and len(number) <= 9 and int(number) > 0):
        raise reader.fail(f'expected a version string like "v2", found {text[:40]!r}', at=0)
    version = int(number)
    if version > MAX_VERSION:
        raise NewerVersionError(
            f"state schema version v{version} is newer than wmcheck knows (up to v{MAX_VERSION})",
            path=reader.path,
            byte=0,
            hint="upgrade wmcheck; this state schema format is not supported yet",
        )
    return version


def parse_state_schema(data: bytes, path: str) -> StateSchemaFile:
    """Parse a state schema file of version 1, 2 or 3 (see the module docstring)."""
    reader = _Reader(data, path)
    if not data:
        raise reader.fail("file is empty: expected a state schema version string")
    version = _version(reader)
    if version == 3:
        try:
            families = _read_v3(data, path, reader.pos, with_ids=True)
        except MalformedFileError as modern:
            try:
                families = _read_v3(data, path, reader.pos, with_ids=False)
            except MalformedFileError:
                raise modern from None
        return StateSchemaFile(3, families)
    key = _schema(reader, "the key schema", chunked=version == 2)
    value = _schema(reader, "the value schema", chunked=version == 2)
    _expect_end(reader)
    return StateSchemaFile(version, (ColumnFamilySchema(DEFAULT_COLUMN_FAMILY, key, value),))


# -- event time ------------------------------------------------------------------------------


def event_time_field(schema: StructType) -> EventTimeField | None:
    """The column Spark evicts state by, or ``None`` when the schema has no watermarked column.

    Follows Spark's ``WatermarkSupport.watermarkExpression``: the first top-level field whose
    metadata carries ``spark.watermarkDelayMs``; if that field is a struct (a ``window`` or
    ``session_window``, i.e. ``struct<start: timestamp, end: timestamp>``), Spark compares its
    second field, the window ``end``, so the result is e.g. ``("window", "end")``. State is
    evicted when that column is at or below the watermark. Spark does not look into nested
    structs for the metadata, so neither does this. Works on key and value schemas alike (a
    stream-stream join keeps its event-time column in the value of ``keyWithIndexToValue``).
    A delay that is not an integer is not Spark's and is ignored.
    """
    for f in schema.fields:
        delay = f.metadata.get(WATERMARK_DELAY_KEY)
        if type(delay) is not int:
            continue
        if isinstance(f.data_type, StructType) and len(f.data_type.fields) >= 2:
            end = f.data_type.fields[1]
            return EventTimeField((f.name, end.name), end.data_type, delay)
        return EventTimeField((f.name,), f.data_type, delay)
    return None
