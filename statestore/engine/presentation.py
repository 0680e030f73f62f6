"""Which files and encodings make up one store as Spark's state reader shows it, and its rows.

Spark's reader (``StatePartitionReader``, ``StreamStreamJoinStatePartitionReader``, transformWithState
variables), per store it can read:

* a store by name (aggregations, dedup, [flatMap]GroupsWithState, a join's internal stores):
  ``key`` and ``value`` as stored;
* a join side: the ``<side>-keyWithIndexToValue`` rows whose index is below the key's count in
  ``<side>-keyToNumValues``, ``key`` without the index, ``value`` without state format 2's
  trailing ``matched`` flag (the input row only, as Spark 4.3's reader shows it);
* transformWithState (RocksDB column families): a ValueState as ``key, value``; a ListState as
  ``key, list_element`` (one row per element); a MapState as ``key, user_map_key, user_map_value``;
  event-time and processing-time timers as ``key, expiration_timestamp_ms``. With a TTL the value,
  list element or map value is ``{value, ttlExpirationMs}``, the row the state schema file describes
  (``TransformWithStateVariableUtils.getValueSchemaWithTTL``); the TTL index column families
  (``$ttl_*``, ``$min_*``, ``$count_*``) are not shown.

Avro-encoded rows (``encodingFormat=avro``) are read for transformWithState on RocksDB. Everything
unsupported (Avro encoding of other operators, other providers) is refused by
:func:`plan_store` before any state file is read.
"""
from __future__ import annotations

import json
import struct
from dataclasses import replace
from typing import Any, Callable, Iterator, Sequence

from wmcheck.checkpoint.errors import UnsupportedError, arg
from wmcheck.checkpoint.model import Checkpoint
from wmcheck.checkpoint.operator_kinds import is_transform_with_state
from wmcheck.checkpoint.records import dataclass
from wmcheck.statestore.discovery import Store
from wmcheck.statestore.encodings.avro_rows import check_avro_supported
from wmcheck.statestore.encodings.columnar import byte_rows, decode_rows
from wmcheck.statestore.encodings.key_encoders import PREFIX_SCAN, key_decoder, single_value_decoder, values_decoder
from wmcheck.statestore.encodings.unsafe_columns import leaf
from wmcheck.statestore.encodings.unsafe_row import arrow_type, check_supported
from wmcheck.statestore.formats.codecs import codec_name, require_codec, require_module
from wmcheck.statestore.formats.schema import ColumnFamilySchema, KeyEncoderSpec, StructField, StructType

HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"
CODEC = "spark.sql.streaming.stateStore.compression.codec"
ENCODING = "spark.sql.streaming.stateStore.encodingFormat"
ROW_CHECKSUM = "spark.sql.streaming.stateStore.rowChecksum.enabled"
Rows = Iterator[dict[str, Any]]
States = dict[str, dict[bytes, bytes]]


@dataclass(frozen=True)
class StorePlan:
    """How to read one reader store: the physical stores to load and how to turn them into rows."""

    store: Store
    rocksdb: bool
    codec: str
    physical: tuple[str, ...]
    """Store directories to load (``default``, or a join's two stores of one side)."""
    columns: StructType
    """The reader's columns besides ``partition_id`` (``key``, ``value``, ...)."""
    rows: Callable[[States, dict[str, int]], Rows]
    """``(store name -> key/value bytes, column family name -> id) -> reader rows``."""
    columns_of: Callable[[Sequence[bytes], Sequence[bytes], Any], dict[str, Any]] | None = None
    """Plain stores (one physical store, a row per key): ``(keys, values, keep) -> Arrow arrays per column`` of the
    ``keep`` rows (indexes in order; all when None; every row decoded all the same), for a partition read in chunks."""
    leaf_of: Callable[[Sequence[bytes], Sequence[bytes], tuple[str, ...]], Any] | None = None
    """Plain stores decoded column-wise: ``(keys, values, path) -> (values, set)``, NumPy arrays of the whole-number
    or time column at ``path`` of the reader's columns (``("key", "window", "end")``), or None where
    :func:`wmcheck.statestore.encodings.unsafe_columns.leaf` declines."""
    checksums: bool = False
    """Rows were written with checksums (``rowChecksum.enabled``), taken off when loading."""
    fast: bool = True
    """State files read and rows decoded by the fast paths where they can (else by the references only)."""


def _field(name: str, data_type: Any) -> StructField:
    return StructField(name, data_type, True, {})


def _schema(ckpt: Checkpoint, op: int, store: str, family: str = "default") -> ColumnFamilySchema:
    schema = ckpt.store_schema(op, store, family)
    if schema is None:
        raise UnsupportedError(f"operator {op} store {store!r} has no state schema file the python engine can read",
                               hint=f"use {arg('engine', 'spark')}")
    check_supported(schema.key_schema)
    check_supported(schema.value_schema)
    return schema


def plan_store(ckpt: Checkpoint, store: Store, fast: bool = True) -> StorePlan:
    """The plan for ``store``, or UnsupportedError naming what the python engine does not read (``fast``:
    decode rows column-wise where :mod:`wmcheck.statestore.encodings.unsafe_columns` can, else row by row only)."""
    conf = ckpt.conf
    provider = conf.get(PROVIDER) or HDFS
    if provider not in (HDFS, ROCKSDB):
        raise UnsupportedError(f"state provider {provider} is not read by the python engine", hint=f"use {arg('engine', 'spark')}")
    encoding = (conf.get(ENCODING) or "unsaferow").lower()
    tws = is_transform_with_state(store.operator_name)
    if encoding not in ("unsaferow", "avro") or (encoding == "avro" and not (tws and provider == ROCKSDB)):
        raise UnsupportedError(f"state encoding format {conf.get(ENCODING)!r} is not read by the python engine here "
                               "(unsaferow; avro for transformWithState on RocksDB)", hint=f"use {arg('engine', 'spark')}")
    codec = codec_name(conf.get(CODEC))
    require_codec(codec)
    rocksdb = provider == ROCKSDB
    if rocksdb:
        require_module("rocksdict", "reading RocksDB state")
    if tws:
        plan = _tws_plan(ckpt, store, rocksdb, codec, encoding == "avro")
    elif "joinSide" in store.options:
        _require_join_stores(ckpt, store.operator_id)
        plan = _join_side_plan(ckpt, store, rocksdb, codec, store.options["joinSide"])
    else:
        plan = _store_plan(ckpt, store, rocksdb, codec, fast)
    checksums = (conf.get(ROW_CHECKSUM) or "false").lower() == "true"
    if checksums:
        require_module("google_crc32c", "verifying row checksums")
    return replace(plan, checksums=checksums, fast=fast)


def _store_plan(ckpt: Checkpoint, store: Store, rocksdb: bool, codec: str, fast: bool) -> StorePlan:
    op = store.operator_id
    name = store.options["storeName"]
    schema = _schema(ckpt, op, name)
    prefix = (_num_prefix_cols(ckpt, op) or 0) if rocksdb else 0
    spec = KeyEncoderSpec(PREFIX_SCAN, prefix, None, {}) if prefix else None  # session windows
    key = key_decoder(schema.key_schema, spec, rocksdb, False)
    value = single_value_decoder(schema.value_schema, rocksdb)

    def rows(states: States, _families: dict[str, int]) -> Rows:
        for k, v in states[name].items():
            yield {"key": key(k), "value": value(v)}

    skip = 1 if rocksdb else 0  # the RocksDB version byte

    def columns_of(keys: Sequence[bytes], values: Sequence[bytes], keep: Any) -> dict[str, Any]:
        if spec is not None:
            chosen = range(len(keys)) if keep is None else keep.tolist()
            decoded = [(key(k), value(v)) for k, v in zip(keys, values)]
            return {"key": pa_array([decoded[i][0] for i in chosen], schema.key_schema),
                    "value": pa_array([decoded[i][1] for i in chosen], schema.value_schema)}
        return {"key": decode_rows(schema.key_schema, keys, skip, fast, keep),
                "value": decode_rows(schema.value_schema, values, skip, fast, keep)}

    def leaf_of(keys: Sequence[bytes], values: Sequence[bytes], path: tuple[str, ...]) -> Any:
        root, rows = (schema.key_schema, keys) if path[0] == "key" else (schema.value_schema, values)
        return leaf(root, *byte_rows(rows, skip), path[1:])

    columns = StructType((_field("key", schema.key_schema), _field("value", schema.value_schema)))
    return StorePlan(store, rocksdb, codec, (name,), columns, rows, columns_of, leaf_of if fast and spec is None else None)


def pa_array(values: list[Any], schema: StructType) -> Any:
    import pyarrow as pa

    return pa.array(values, type=arrow_type(schema, raw=True))


def _num_prefix_cols(ckpt: Checkpoint, op: int) -> int | None:
    operator = next((o for o in ckpt.operators if o.operator_id == op), None)
    stores = getattr(operator.metadata, "stores", ()) if operator else ()
    return max((s.num_cols_prefix_key or 0 for s in stores), default=None)


def _require_join_stores(ckpt: Checkpoint, op: int) -> None:
    """Join state formats 3 and 4 keep both sides in one store, by column family: not read here."""
    stores = next((o.stores for o in ckpt.operators if o.operator_id == op), ())
    if tuple(stores) == ("default",):
        version = ckpt.conf.get("spark.sql.streaming.join.stateFormatVersion")
        raise UnsupportedError(f"operator {op}: a stream-stream join in state format {version} (both sides in one store, "
                               "by column family) is not read by the python engine", hint=f"use {arg('engine', 'spark')}")


def _join_side_plan(ckpt: Checkpoint, store: Store, rocksdb: bool, codec: str, side: str) -> StorePlan:
    op = store.operator_id
    counts_name, values_name = f"{side}-keyToNumValues", f"{side}-keyWithIndexToValue"
    counts, values = _schema(ckpt, op, counts_name), _schema(ckpt, op, values_name)
    count_key = key_decoder(counts.key_schema, None, rocksdb, False)
    count_value = single_value_decoder(counts.value_schema, rocksdb)
    indexed_key = key_decoder(values.key_schema, None, rocksdb, False)
    stored = single_value_decoder(values.value_schema, rocksdb)
    last = values.value_schema.fields[-1] if values.value_schema.fields else None
    shown = StructType(values.value_schema.fields[:-1]) if last and last.name == "matched" and last.data_type == "boolean" \
        else values.value_schema
    names = [f.name for f in shown.fields]

    def value(data: bytes) -> dict[str, Any] | None:
        row = stored(data)
        return {n: row[n] for n in names}
    key_names = [f.name for f in counts.key_schema.fields]
    index_name = values.key_schema.fields[-1].name

    def rows(states: States, _families: dict[str, int]) -> Rows:
        numbers = {}
        for k, v in states[counts_name].items():
            key = count_key(k)
            numbers[_canonical(key)] = next(iter(count_value(v).values()))
        for k, v in states[values_name].items():
            full = indexed_key(k)
            key = {n: full[n] for n in key_names}
            if full[index_name] < (numbers.get(_canonical(key)) or 0):
                yield {"key": key, "value": value(v)}

    columns = StructType((_field("key", counts.key_schema), _field("value", shown)))
    return StorePlan(store, rocksdb, codec, (counts_name, values_name), columns, rows)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr)


def _variable(ckpt: Checkpoint, store: Store) -> dict[str, Any]:
    variables = (getattr(next(o for o in ckpt.operators if o.operator_id == store.operator_id).metadata, "properties", None)
                 or {}).get("stateVariables") or []
    found = next((v for v in variables if v.get("stateName") == store.name), None)
    if found is None:
        raise UnsupportedError(f"state variable {store.name!r} is not in the operator metadata", hint=f"use {arg('engine', 'spark')}")
    return found


def _tws_plan(ckpt: Checkpoint, store: Store, rocksdb: bool, codec: str, avro: bool) -> StorePlan:
    if not rocksdb:
        raise UnsupportedError("transformWithState state outside RocksDB is not read by the python engine", hint=f"use {arg('engine', 'spark')}")
    var = _variable(ckpt, store)
    kind = var.get("stateVariableType")
    schema = _schema(ckpt, store.operator_id, "default", store.name)
    if avro:
        require_module("fastavro", "reading Avro-encoded state")
        check_avro_supported(schema.key_schema)
        check_avro_supported(schema.value_schema)
    key = key_decoder(schema.key_schema, schema.key_encoder, True, True, avro)
    family = store.name
    columns, present = _tws_rows(kind, store.name, schema, avro)
    def rows(states: States, families: dict[str, int]) -> Rows:
        if family not in families:
            return
        prefix = struct.pack("<h", families[family])
        for k, v in states["default"].items():
            if k[:2] == prefix:
                yield from present(key(k), v)

    return StorePlan(store, rocksdb, codec, ("default",), columns, rows)


def _tws_rows(kind: str | None, name: str, schema: ColumnFamilySchema,
              avro: bool) -> tuple[StructType, Callable[[dict[str, Any], bytes], Rows]]:
    """The reader's columns for one transformWithState variable and ``(decoded key, value bytes) -> rows``."""
    if kind == "ListState":
        many = values_decoder(schema.value_schema, avro)

        def elements(k: dict[str, Any], v: bytes) -> Rows:
            return ({"key": k, "list_element": e} for e in many(v))

        return StructType((_field("key", schema.key_schema), _field("list_element", schema.value_schema))), elements
    single = single_value_decoder(schema.value_schema, True, avro)
    if kind == "ValueState":
        def value(k: dict[str, Any], v: bytes) -> Rows:
            yield {"key": k, "value": single(v)}

        return StructType((_field("key", schema.key_schema), _field("value", schema.value_schema))), value
    outer, inner = schema.key_schema.fields[0], schema.key_schema.fields[-1]
    if kind == "MapState":
        def entry(k: dict[str, Any], v: bytes) -> Rows:
            yield {"key": k[outer.name], "user_map_key": k[inner.name], "user_map_value": single(v)}

        return StructType((_field("key", outer.data_type), _field("user_map_key", inner.data_type),
                           _field("user_map_value", schema.value_schema))), entry
    if kind == "TimerState":
        def timer(k: dict[str, Any], v: bytes) -> Rows:
            yield {"key": k[outer.name], "expiration_timestamp_ms": k[inner.name]}

        return StructType((_field("key", outer.data_type), _field("expiration_timestamp_ms", "long"))), timer
    raise UnsupportedError(f"state variable {name!r} of type {kind!r} is not read by the python engine", hint=f"use {arg('engine', 'spark')}")
