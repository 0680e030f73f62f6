"""Operator state metadata (``state/<op>/_metadata/metadata`` and ``_metadata/v2/<batch>``), on real bytes."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wmcheck.checkpoint.errors import CheckpointError, MalformedFileError, NewerVersionError
from wmcheck.checkpoint.logs.operator_metadata import (
    OperatorMetadata,
    StoreMetadata,
    parse_operator_metadata,
    serialize_operator_metadata,
)

DATA = Path(__file__).parent / "data"
CORPUS = Path(__file__).resolve().parents[2] / "shared" / "spark-checkpoints"
TWS_AVRO = "checkpoint-version-4.0.0-tws-avro/state/0/_metadata/v2/0"
TWS_PROPERTIES = {
    "timeMode": "NoTime",
    "outputMode": "Update",
    "stateVariables": [{"stateName": "countState", "stateVariableType": "ValueState", "ttlEnabled": False}],
}


@pytest.fixture
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip("../shared/spark-checkpoints is not present")
    return CORPUS


def read(root: Path, rel: str) -> tuple[bytes, str]:
    return (root / rel).read_bytes(), rel


# -- real files, exact values ----------------------------------------------------------------


def test_v1_dedup_from_spark_4_0(corpus):
    meta = parse_operator_metadata(*read(corpus, "checkpoint-version-4.0.0-checkpoint-v2/rocksdb/dedup/state/0/_metadata/metadata"))
    assert meta == OperatorMetadata(1, 0, "dedupe", (StoreMetadata("default", 0, 5),))
    assert meta.stores[0].schema_files == ()


def test_v1_join_has_four_stores(corpus):
    meta = parse_operator_metadata(*read(corpus, "checkpoint-version-4.0.0/hdfs/join2/state/0/_metadata/metadata"))
    assert meta.operator_name == "symmetricHashJoin"
    assert [(s.store_name, s.num_cols_prefix_key, s.num_partitions) for s in meta.stores] == [
        ("left-keyToNumValues", 0, 5),
        ("left-keyWithIndexToValue", 0, 5),
        ("right-keyToNumValues", 0, 5),
        ("right-keyWithIndexToValue", 0, 5),
    ]


def test_v2_spark_4_0_single_schema_path_and_nested_properties(corpus):
    meta = parse_operator_metadata(*read(corpus, TWS_AVRO))
    assert (meta.version, meta.operator_id, meta.operator_name) == (2, 0, "transformWithStateExec")
    store = meta.stores[0]
    assert store.schema_file_path == (
        "file:/Users/anish.shrigondekar/spark/spark/target/tmp/spark-dcaeba6f-ff09-4f91-ba1b-4d14fe53cc9f"
        "/state/0/_stateSchema/default/0_6b12d3c5-57e6-4001-8321-3ae63d6be7a0"
    )
    assert store.schema_file_paths is None
    assert store.schema_files == (store.schema_file_path,)
    assert meta.properties == TWS_PROPERTIES
    assert meta.properties_json == (
        '{"timeMode":"NoTime","outputMode":"Update","stateVariables":'
        '[{"stateName":"countState","stateVariableType":"ValueState","ttlEnabled":false}]}'
    )
    assert meta.extra == {} and meta.operator_extra == {} and store.extra == {}


def test_v2_spark_4_3_schema_path_list():
    meta = parse_operator_metadata(*read(DATA, "tws/state/0/_metadata/v2/0"))
    assert meta.operator_name == "transformWithStateInPandasExec"
    store = meta.stores[0]
    assert (store.store_name, store.num_cols_prefix_key, store.num_partitions) == ("default", 0, 2)
    assert store.schema_file_path is None
    assert store.schema_file_paths == (
        "file:/tmp/wmgen/ck2/tws/state/0/_stateSchema/default/0_4558f3bc-a4ba-4601-b52c-3e23e734722c",
    )
    assert meta.properties["timeMode"] == "EventTime"
    assert [(v["stateName"], v["stateVariableType"]) for v in meta.properties["stateVariables"]] == [
        ("lastByValue", "MapState"),
        ("seenState", "ListState"),
        ("countState", "ValueState"),
        ("$eventTimers_keyToTimestamp", "TimerState"),
    ]


def test_v1_written_by_pyspark_4_3():
    meta = parse_operator_metadata(*read(DATA, "agg_window/state/0/_metadata/metadata"))
    assert meta == OperatorMetadata(1, 0, "stateStoreSave", (StoreMetadata("default", 0, 2),))
    join = parse_operator_metadata(*read(DATA, "join/state/0/_metadata/metadata"))
    assert [s.store_name for s in join.stores][1::2] == ["left-keyWithIndexToValue", "right-keyWithIndexToValue"]


def real_files() -> list[tuple[bytes, str]]:
    found = sorted(DATA.glob("*/state/*/_metadata/metadata")) + sorted(DATA.glob("*/state/*/_metadata/v2/[0-9]*"))
    if CORPUS.is_dir():
        found += sorted(p for p in CORPUS.rglob("*") if p.is_file() and "/state/" in str(p) and "_metadata" in p.parts)
    return [(p.read_bytes(), str(p)) for p in found]


def test_every_real_file_round_trips_byte_for_byte():
    files = real_files()
    assert len(files) >= 4
    for data, path in files:
        assert serialize_operator_metadata(parse_operator_metadata(data, path)) == data, path


# -- unknown fields --------------------------------------------------------------------------


def test_unknown_fields_are_kept_at_every_level():
    data = (
        b'v2\n{"operatorInfo":{"operatorId":3,"operatorName":"x","opNew":[1]},'
        b'"stateStoreInfo":[{"storeName":"default","numColsPrefixKey":1,"numPartitions":4,'
        b'"stateSchemaFilePath":"file:/a","storeNew":{"k":"v"}}],'
        b'"operatorPropertiesJson":"[1,2]","topNew":null}'
    )
    meta = parse_operator_metadata(data, "state/3/_metadata/v2/7")
    assert meta.operator_extra == {"opNew": [1]}
    assert meta.stores[0].extra == {"storeNew": {"k": "v"}}
    assert meta.extra == {"topNew": None}
    assert meta.properties == [1, 2]
    assert serialize_operator_metadata(meta) == data


def test_v2_keys_in_a_v1_file_are_unknown_fields():
    data = b'v1\n{"operatorInfo":{"operatorId":0,"operatorName":"x"},"stateStoreInfo":[{"storeName":"a","numColsPrefixKey":0,"numPartitions":1,"stateSchemaFilePaths":[]}],"operatorPropertiesJson":"{}"}'
    meta = parse_operator_metadata(data, "p")
    assert meta.properties_json is None and meta.extra == {"operatorPropertiesJson": "{}"}
    assert meta.stores[0].schema_file_paths is None and meta.stores[0].extra == {"stateSchemaFilePaths": []}
    assert serialize_operator_metadata(meta) == data


# -- bad input -------------------------------------------------------------------------------

PATH = "state/0/_metadata/v2/0"


@pytest.mark.parametrize(
    ("data", "error", "message"),
    [
        (b"", MalformedFileError, "file is empty"),
        (b"v1", MalformedFileError, "expected the operator metadata JSON after the version line"),
        (b"v1\n", MalformedFileError, "expected the operator metadata JSON"),
        (b"v3\n{}", NewerVersionError, "newer Spark"),
        (b"v0\n{}", MalformedFileError, 'expected a stateful operator metadata version header like "v1"'),
        (b"x1\n{}", MalformedFileError, "version header"),
        (b"v" + b"9" * 5000 + b"\n{}", MalformedFileError, 'metadata version header like "v1"'),
        ("v²\n{}".encode(), MalformedFileError, "version header"),
        (b"v1\nnot json", MalformedFileError, "expected the operator metadata as JSON"),
        (b"v1\n[1]", MalformedFileError, "as a JSON object, found list"),
        (b"v1\n{}", MalformedFileError, "expected operatorInfo as a JSON object, found null"),
        (b'v1\n{"operatorInfo":{"operatorId":"0","operatorName":"a"},"stateStoreInfo":[]}', MalformedFileError, "operatorId to be an integer"),
        (b'v1\n{"operatorInfo":{"operatorId":0},"stateStoreInfo":[]}', MalformedFileError, "operatorName to be a string, found nothing"),
        (b'v1\n{"operatorInfo":{"operatorId":0,"operatorName":"a"},"stateStoreInfo":{}}', MalformedFileError, "stateStoreInfo to be a list"),
        (b'v1\n{"operatorInfo":{"operatorId":0,"operatorName":"a"},"stateStoreInfo":[{"storeName":"s","numPartitions":1}]}', MalformedFileError, "stateStoreInfo[0] to have an integer numColsPrefixKey"),
        (b'v1\n{"operatorInfo":{"operatorId":0,"operatorName":"a"},"stateStoreInfo":[7]}', MalformedFileError, "stateStoreInfo[0] as a JSON object"),
        (b'v2\n{"operatorInfo":{"operatorId":0,"operatorName":"a"},"stateStoreInfo":[]}', MalformedFileError, "operatorPropertiesJson to be a string, found nothing"),
        (b'v2\n{"operatorInfo":{"operatorId":0,"operatorName":"a"},"stateStoreInfo":[],"operatorPropertiesJson":"{oops"}', MalformedFileError, "expected operatorPropertiesJson as JSON"),
        (b'v2\n{"operatorInfo":{"operatorId":0,"operatorName":"a"},"stateStoreInfo":[{"storeName":"s","numColsPrefixKey":0,"numPartitions":1,"stateSchemaFilePaths":"x"}],"operatorPropertiesJson":"{}"}', MalformedFileError, "stateSchemaFilePaths to be a list of strings"),
        (b"v1\n\xff\xfe", MalformedFileError, "not UTF-8"),
    ],
)
def test_bad_files(data, error, message):
    with pytest.raises(error) as info:
        parse_operator_metadata(data, PATH)
    assert message in info.value.message
    assert str(info.value).startswith(PATH)
    assert info.value.hint


def test_truncated_at_every_byte_of_a_real_file():
    data, _ = read(DATA, "tws/state/0/_metadata/v2/0")
    for end in range(len(data)):
        with pytest.raises(CheckpointError) as info:
            parse_operator_metadata(data[:end], PATH)
        assert PATH in str(info.value)


@settings(max_examples=300)
@given(st.binary(max_size=300) | st.binary(max_size=200).map(lambda b: b"v2\n" + b))
def test_random_bytes_raise_only_checkpoint_errors(data):
    try:
        parse_operator_metadata(data, PATH)
    except CheckpointError as exc:
        assert PATH in str(exc)


# -- property: parse(serialize(x)) == x --------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


def extras(known: set[str]):
    return st.dictionaries(st.text(max_size=8).filter(lambda k: k not in known), json_values, max_size=2)


@st.composite
def metadata_objects(draw) -> tuple[int, dict]:
    version = draw(st.sampled_from([1, 2]))
    stores = []
    for _ in range(draw(st.integers(0, 4))):
        store = {"storeName": draw(st.text()), "numColsPrefixKey": draw(st.integers(0, 3)), "numPartitions": draw(st.integers(1, 10**6))}
        if version == 2:
            form = draw(st.sampled_from(["single", "list", "none"]))
            if form == "single":
                store["stateSchemaFilePath"] = draw(st.text())
            elif form == "list":
                store["stateSchemaFilePaths"] = draw(st.lists(st.text(), max_size=3))
        store.update(draw(extras(set(store) | {"stateSchemaFilePath", "stateSchemaFilePaths"})))
        stores.append(store)
    info = {"operatorId": draw(st.integers(0, 2**63 - 1)), "operatorName": draw(st.text())}
    info.update(draw(extras(set(info))))
    obj = {"operatorInfo": info, "stateStoreInfo": stores}
    if version == 2:
        obj["operatorPropertiesJson"] = json.dumps(draw(json_values), separators=(",", ":"))
    obj.update(draw(extras(set(obj) | {"operatorPropertiesJson"})))
    return version, obj


@settings(max_examples=200)
@given(metadata_objects())
def test_parse_serialize_round_trip(version_and_obj):
    version, obj = version_and_obj
    data = f"v{version}\n{json.dumps(obj, separators=(',', ':'), ensure_ascii=False)}".encode()
    meta = parse_operator_metadata(data, PATH)
    assert serialize_operator_metadata(meta) == data
    assert parse_operator_metadata(serialize_operator_metadata(meta), PATH) == meta
