"""State schema files v1/v2 (``_metadata/schema``) and v3 (``_stateSchema/...``), on real bytes."""
from __future__ import annotations

import dataclasses
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wmcheck.checkpoint.errors import CheckpointError, MalformedFileError, NewerVersionError, UnsupportedError
from wmcheck.statestore.formats.schema import (
    ArrayType,
    ColumnFamilySchema,
    EventTimeField,
    KeyEncoderSpec,
    MapType,
    OtherType,
    StateSchemaFile,
    StructField,
    StructType,
    event_time_field,
    parse_state_schema,
)
from wmcheck.statestore.formats.schema_write import serialize_state_schema

DATA = Path(__file__).parent / "data"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
AGG = "agg_window/state/0/0/_metadata/schema"
DEDUP = "dedup/state/0/0/_metadata/schema"
JOIN = "join/state/0/0/left-keyWithIndexToValue/_metadata/schema"
TWS = "tws/state/0/_stateSchema/default/0_4558f3bc-a4ba-4601-b52c-3e23e734722c"
DELAY = {"spark.watermarkDelayMs": 10000}


def read(rel: str) -> tuple[bytes, str]:
    return (DATA / rel).read_bytes(), rel


def f(name, data_type, nullable=True, metadata=None) -> StructField:
    return StructField(name, data_type, nullable, metadata or {})


def struct_of(*fields: StructField) -> StructType:
    return StructType(tuple(fields))


def utf(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">H", len(raw)) + raw


def chunked(*chunks: bytes) -> bytes:
    return struct.pack(">i", len(chunks)) + b"".join(chunks)


# -- real files, exact values ----------------------------------------------------------------


def test_v2_window_aggregation():
    schema = parse_state_schema(*read(AGG))
    window = struct_of(f("start", "timestamp"), f("end", "timestamp"))
    assert schema == StateSchemaFile(
        2,
        (
            ColumnFamilySchema(
                "default",
                struct_of(f("window", window, metadata={"spark.timeWindow": True, **DELAY}), f("k", "string")),
                struct_of(f("sum", "long")),
            ),
        ),
    )
    assert event_time_field(schema.column_families[0].key_schema) == EventTimeField(("window", "end"), "timestamp", 10000)
    assert event_time_field(schema.column_families[0].value_schema) is None


def test_v2_deduplication():
    cf = parse_state_schema(*read(DEDUP)).column_families[0]
    assert cf.key_schema == struct_of(f("k", "string"), f("ts", "timestamp", metadata=DELAY))
    assert cf.value_schema == struct_of(f("__dummy__", "void"))
    assert event_time_field(cf.key_schema) == EventTimeField(("ts",), "timestamp", 10000)


def test_v2_join_keeps_event_time_in_the_value():
    cf = parse_state_schema(*read(JOIN)).column_families[0]
    assert cf.key_schema == struct_of(f("field0", "string"), f("index", "long"))
    assert cf.value_schema == struct_of(
        f("lk", "string"), f("lts", "timestamp", metadata=DELAY), f("v", "integer"), f("matched", "boolean")
    )
    assert event_time_field(cf.key_schema) is None
    assert event_time_field(cf.value_schema) == EventTimeField(("lts",), "timestamp", 10000)


def test_v3_transform_with_state():
    schema = parse_state_schema(*read(TWS))
    assert schema.version == 3
    by_name = {cf.name: cf for cf in schema.column_families}
    assert list(by_name) == [
        "$eventTimers_keyToTimestamp",
        "$eventTimers_timestampToKey",
        "$rowCounter_seenState",
        "countState",
        "lastByValue",
        "seenState",
    ]
    assert {(cf.key_schema_id, cf.value_schema_id) for cf in schema.column_families} == {(0, 0)}
    grouping = struct_of(f("k", "string"))
    assert by_name["countState"] == ColumnFamilySchema(
        "countState", grouping, struct_of(f("count", "long")), 0, 0,
        KeyEncoderSpec("NoPrefixKeyStateEncoderSpec", None, None, {"keyStateEncoderType": "NoPrefixKeyStateEncoderSpec"}),
        None,
    )
    timers = by_name["$eventTimers_timestampToKey"]
    assert timers.key_schema == struct_of(f("expiryTimestampMs", "long", nullable=False), f("key", grouping))
    assert (timers.key_encoder.encoder_type, timers.key_encoder.ordering_ordinals) == ("RangeKeyScanStateEncoderSpec", (0,))
    prefix = by_name["$eventTimers_keyToTimestamp"].key_encoder
    assert (prefix.encoder_type, prefix.num_cols_prefix_key) == ("PrefixKeyScanStateEncoderSpec", 1)
    map_state = by_name["lastByValue"]
    assert map_state.user_key_schema == struct_of(f("v", "long"))
    assert map_state.key_schema == struct_of(f("key", grouping), f("userKey", struct_of(f("v", "long"))))
    assert map_state.value_schema == struct_of(f("ts", "timestamp"))
    assert all(cf.user_key_schema is None for cf in schema.column_families if cf.name != "lastByValue")
    assert all(event_time_field(cf.key_schema) is None for cf in schema.column_families)


def real_schema_files() -> list[Path]:
    patterns = ("*/state/*/*/_metadata/schema", "*/state/*/*/*/_metadata/schema", "*/state/*/_stateSchema/*/[0-9]*")
    found = [p for pat in patterns for p in sorted(DATA.glob(pat))]
    for root in sorted(FIXTURES.glob("*/checkpoint")):
        found += [p for pat in patterns for p in sorted(root.glob(pat.split("/", 1)[1]))]
    return found


def test_every_real_file_parses_and_round_trips_byte_for_byte():
    files = real_schema_files()
    assert len(files) >= 4
    for p in files:
        data = p.read_bytes()
        assert serialize_state_schema(parse_state_schema(data, str(p))) == data, p


def test_v3_without_schema_ids_as_written_before_spark_4_0_0():
    modern = parse_state_schema(*read(TWS))
    legacy = dataclasses.replace(
        modern,
        column_families=tuple(dataclasses.replace(cf, key_schema_id=None, value_schema_id=None) for cf in modern.column_families),
    )
    data = serialize_state_schema(legacy)
    assert len(data) == len(read(TWS)[0]) - 4 * len(modern.column_families)
    assert parse_state_schema(data, TWS) == legacy


def test_v1_is_two_plain_write_utf_strings():
    """Spark writes v1 only in its own tests now (3.1/3.2 wrote it); built from the real v2 JSON."""
    data, _ = read(AGG)
    v2 = parse_state_schema(data, AGG)
    key_end = 4 + 4 + 2 + struct.unpack_from(">H", data, 8)[0]
    key_json = data[10:key_end]
    value_json = data[key_end + 6 :]
    v1_bytes = utf("v1") + struct.pack(">H", len(key_json)) + key_json + struct.pack(">H", len(value_json)) + value_json
    v1 = parse_state_schema(v1_bytes, "state/0/0/_metadata/schema")
    assert v1 == dataclasses.replace(v2, version=1)
    assert serialize_state_schema(v1) == v1_bytes


# -- Java modified UTF-8 and chunks ----------------------------------------------------------


def test_modified_utf8_nul_and_supplementary_characters():
    encoder = KeyEncoderSpec("NoPrefixKeyStateEncoderSpec", None, None, {"keyStateEncoderType": "NoPrefixKeyStateEncoderSpec"})
    name = "a\0é😀"  # a column family name is written raw (JSON would escape the NUL)
    schema = StateSchemaFile(3, (ColumnFamilySchema(name, struct_of(f(name, "long")), struct_of(), 1, 2, encoder),))
    data = serialize_state_schema(schema)
    assert utf("v3") + struct.pack(">iH", 1, 11) + b"a\xc0\x80\xc3\xa9\xed\xa0\xbd\xed\xb8\x80" == data[:21]
    assert parse_state_schema(data, "p") == schema


def test_surrogate_pair_split_across_chunks_is_joined():
    key = '{"type":"struct","fields":[{"name":"', '","type":"long","nullable":true,"metadata":{}}]}'
    high, low = "\ud83d".encode("utf-8", "surrogatepass"), "\ude00".encode("utf-8", "surrogatepass")
    parts = [key[0].encode() + high, low + key[1].encode()]
    key_bytes = chunked(*(struct.pack(">H", len(p)) + p for p in parts))
    data = utf("v2") + key_bytes + chunked(utf('{"type":"struct","fields":[]}'))
    assert parse_state_schema(data, "p").column_families[0].key_schema.fields[0].name == "😀"


def test_schema_longer_than_one_chunk():
    key = StructType(tuple(f(f"column_{i:05d}", "long") for i in range(1500)))
    schema = StateSchemaFile(2, (ColumnFamilySchema("default", key, struct_of(f("v", "long"))),))
    data = serialize_state_schema(schema)
    assert struct.unpack_from(">i", data, 4)[0] == 2  # the key JSON (> 65535 chars) took two chunks
    assert parse_state_schema(data, "p") == schema
    with pytest.raises(UnsupportedError, match="at most 65535 bytes"):
        serialize_state_schema(dataclasses.replace(schema, version=1))


# -- event time ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (struct_of(f("a", "long"), f("t", "timestamp_ntz", metadata={"spark.watermarkDelayMs": 0})), EventTimeField(("t",), "timestamp_ntz", 0)),
        (struct_of(f("s", struct_of(f("start", "timestamp"), f("end", "timestamp")), metadata=DELAY)), EventTimeField(("s", "end"), "timestamp", 10000)),
        (struct_of(f("t1", "timestamp", metadata={"spark.watermarkDelayMs": 5}), f("t2", "timestamp", metadata=DELAY)), EventTimeField(("t1",), "timestamp", 5)),
        (struct_of(f("n", struct_of(f("t", "timestamp", metadata=DELAY)))), None),
        (struct_of(f("t", "timestamp", metadata={"spark.watermarkDelayMs": "10"})), None),
        (struct_of(f("t", "timestamp", metadata={"spark.watermarkDelayMs": True})), None),
        (struct_of(), None),
    ],
)
def test_event_time_field(schema, expected):
    assert event_time_field(schema) == expected


# -- bad input -------------------------------------------------------------------------------

PATH = "state/1/0/_metadata/schema"
STRUCT = '{"type":"struct","fields":[]}'
DEEP = '{"type":"struct","fields":[{"name":"a","type":' + '{"type":"array","elementType":' * 2000 + '"long"' + ',"containsNull":true}' * 2000 + ',"nullable":true}]}'


def split(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


@pytest.mark.parametrize(
    ("data", "error", "message", "byte"),
    [
        (b"", MalformedFileError, "file is empty", 0),
        (b"\x00", MalformedFileError, "expected 2 bytes of the length of the version string, found 1", 0),
        (b"v2\n{}", MalformedFileError, "expected 30258 bytes of the version string", 2),
        (utf("v4"), NewerVersionError, "version v4 is newer", 0),
        (utf("x2"), MalformedFileError, 'expected a version string like "v2", found \'x2\'', 0),
        (utf("v0"), MalformedFileError, "version string", 0),
        (utf("v" + "9" * 5000), MalformedFileError, "version string", 0),
        (utf("v²"), MalformedFileError, "version string", 0),
        (utf("v2") + chunked(utf("not json")), MalformedFileError, "expected the key schema as JSON, found 'not json'", 4),
        (utf("v2") + chunked(utf('{"type":"array"}')), MalformedFileError, "expected a struct type", 4),
        (utf("v2") + chunked(utf(STRUCT)), MalformedFileError, "chunk count of the value schema", 39),
        (utf("v2") + chunked(utf(STRUCT)) + struct.pack(">i", -1), MalformedFileError, "at least 1 chunk of the value schema, found a count of -1", 39),
        (utf("v2") + chunked(utf(STRUCT)) * 2 + b"!", MalformedFileError, "expected the end of the file, found 1 more bytes", 74),
        (utf("v2") + chunked(b"\x00\x02\xf0\x9f"), MalformedFileError, "as Java modified UTF-8", 8),
        (utf("v2") + chunked(utf('{"type":"struct","fields":[{"name":"a","type":"long","nullable":1}]}')), MalformedFileError, "nullable at the key schema.fields[0] to be true or false", 4),
        (utf("v2") + chunked(utf('{"type":"struct","fields":[{"name":"a","x":1,"type":"long"}]}')), MalformedFileError,
         "expected the field at the key schema.fields[0] to have the keys name, type and optionally nullable and metadata, "
         "found name,type,x: Spark fails to read it (INVALID_JSON_DATA_TYPE)", 4),
        (utf("v2") + chunked(utf('{"x":1,"type":"struct","fields":[]}')), MalformedFileError, "no other key", 4),
        (utf("v2") + chunked(utf('{"type":"struct","fields":[{"name":"a","type":{"type":"array","elementType":"long"}}]}')),
         MalformedFileError, "expected a Spark data type at the key schema.a with the keys containsNull,elementType,type", 4),
        (utf("v2") + chunked(utf('{"type":"struct","fields":[{"name":"a","type":7,"nullable":true}]}')), MalformedFileError, "expected a Spark data type at the key schema.a", 4),
        (utf("v2") + chunked(utf('{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":[]}]}')), MalformedFileError, "metadata of the key schema.fields[0]", 4),
        (utf("v2") + chunked(utf("[" * 100 + "]" * 100)), MalformedFileError, "expected a struct type", 4),
        (utf("v2") + chunked(*map(utf, split(DEEP, 60000))), MalformedFileError, "expected the key schema as JSON", 4),
        (utf("v3") + struct.pack(">i", -2), MalformedFileError, "column family count of at least 0, found -2", 4),
        (utf("v3") + struct.pack(">i", 1) + utf("cf") + struct.pack(">h", 0) + chunked(utf(STRUCT)) + struct.pack(">h", 0) + chunked(utf(STRUCT)) + chunked(utf('{"x":1}')), MalformedFileError, "key encoder spec of column family 'cf'", 86),
    ],
)
def test_bad_files(data, error, message, byte):
    with pytest.raises(error) as info:
        parse_state_schema(data, PATH)
    assert message in info.value.message
    assert info.value.byte == byte
    assert str(info.value).startswith(PATH)
    assert info.value.hint


def test_odd_types_are_kept():
    udt = {"type": "udt", "class": "x.Y", "pyClass": None, "sqlType": "long"}
    text = (
        '{"type":"struct","fields":[{"name":"a","type":{"type":"array","elementType":"string","containsNull":false},'
        '"nullable":true,"metadata":{}},{"name":"m","type":{"type":"map","keyType":"string","valueType":'
        '{"type":"udt","class":"x.Y","pyClass":null,"sqlType":"long"},"valueContainsNull":true},"nullable":false,"metadata":{"x":[1.5]}}]}'
    )
    data = utf("v2") + chunked(utf(text)) + chunked(utf(STRUCT))
    key = parse_state_schema(data, PATH).column_families[0].key_schema
    assert key == struct_of(
        f("a", ArrayType("string", False)), f("m", MapType("string", OtherType(udt), True), False, {"x": [1.5]})
    )
    assert serialize_state_schema(parse_state_schema(data, PATH)) == data


@pytest.mark.parametrize("rel", [AGG, TWS])
def test_truncated_at_every_byte_of_a_real_file(rel):
    data, _ = read(rel)
    for end in range(len(data)):
        with pytest.raises(CheckpointError) as info:
            parse_state_schema(data[:end], PATH)
        assert PATH in str(info.value)


@settings(max_examples=300)
@given(st.binary(max_size=200) | st.binary(max_size=200).map(lambda b: utf("v3") + b) | st.binary(max_size=200).map(lambda b: utf("v2") + b))
def test_random_bytes_raise_only_checkpoint_errors(data):
    try:
        parse_state_schema(data, PATH)
    except CheckpointError as exc:
        assert PATH in str(exc)


@settings(max_examples=200)
@given(st.data())
def test_corrupting_a_real_file_raises_only_checkpoint_errors(data):
    original, _ = read(data.draw(st.sampled_from([AGG, TWS, JOIN])))
    at = data.draw(st.integers(0, len(original) - 1))
    corrupt = original[:at] + bytes([data.draw(st.integers(0, 255))]) + original[at + 1 :]
    try:
        parse_state_schema(corrupt, PATH)
    except CheckpointError as exc:
        assert PATH in str(exc)


# -- property: parse(serialize(x)) == x --------------------------------------------------------

metadata = st.dictionaries(
    st.text(max_size=8),
    st.integers() | st.text(max_size=8) | st.booleans() | st.floats(allow_nan=False, allow_infinity=False),
    max_size=2,
)
atomic = st.sampled_from(["long", "string", "timestamp", "decimal(10,2)", "void", "binary"])


def data_types(depth: int = 2):
    if depth == 0:
        return atomic
    inner = data_types(depth - 1)
    return (
        atomic
        | st.builds(ArrayType, inner, st.booleans())
        | st.builds(MapType, inner, inner, st.booleans())
        | structs(depth - 1)
    )


def structs(depth: int = 2):
    field = st.builds(StructField, st.text(max_size=10), data_types(depth) if depth else atomic, st.booleans(), metadata)
    return st.lists(field, max_size=4).map(lambda fs: StructType(tuple(fs)))


encoders = st.sampled_from(
    [
        {"keyStateEncoderType": "NoPrefixKeyStateEncoderSpec"},
        {"keyStateEncoderType": "PrefixKeyScanStateEncoderSpec", "numColsPrefixKey": 1},
        {"keyStateEncoderType": "RangeKeyScanStateEncoderSpec", "orderingOrdinals": [0, 2]},
    ]
).map(lambda d: KeyEncoderSpec(d["keyStateEncoderType"], d.get("numColsPrefixKey"), tuple(d["orderingOrdinals"]) if "orderingOrdinals" in d else None, d))


@st.composite
def schema_files(draw) -> StateSchemaFile:
    version = draw(st.sampled_from([1, 2, 3]))
    if version < 3:
        return StateSchemaFile(version, (ColumnFamilySchema("default", draw(structs()), draw(structs())),))
    with_ids = draw(st.booleans())
    ids = st.integers(-(2**15), 2**15 - 1) if with_ids else st.none()
    families = st.builds(
        ColumnFamilySchema, st.text(max_size=20), structs(), structs(), ids, ids, encoders, st.none() | structs(1)
    )
    return StateSchemaFile(3, tuple(draw(st.lists(families, max_size=4))))


@settings(max_examples=150, deadline=None)
@given(schema_files())
def test_parse_serialize_round_trip(schema):
    data = serialize_state_schema(schema)
    assert parse_state_schema(data, PATH) == schema
    assert serialize_state_schema(parse_state_schema(data, PATH)) == data


def test_schema_json_is_read_as_spark_reads_it():
    """DataType.fromJson: a field without nullable is nullable, without metadata has none, keys in any order; the
    first JSON value is read, whatever follows it ignored (restart probe: the control run's output)."""
    key = '{"fields":[{"nullable":false,"type":"long","name":"a"},{"name":"b","type":"string"}],"type":"struct"} junk'
    schema = parse_state_schema(utf("v2") + chunked(utf(key)) + chunked(utf(STRUCT)), "schema")
    assert [(f.name, f.data_type, f.nullable, dict(f.metadata)) for f in schema.column_families[0].key_schema.fields] == [
        ("a", "long", False, {}), ("b", "string", True, {})]
