"""Operator state metadata: ``state/<op>/_metadata/metadata`` (v1) and ``state/<op>/_metadata/v2/<batch>`` (v2).

Format (Spark's ``OperatorStateMetadata.scala``): a ``vN`` line, then one json4s object::

    v1
    {"operatorInfo":{"operatorId":0,"operatorName":"stateStoreSave"},
     "stateStoreInfo":[{"storeName":"default","numColsPrefixKey":0,"numPartitions":5}]}

v2 (written by transformWithState) adds, per store, the schema file location(s) and, at the top,
``operatorPropertiesJson``: a JSON document stored as a JSON *string*. Spark 4.0 wrote one
``stateSchemaFilePath`` string per store; Spark 4.1+ writes a ``stateSchemaFilePaths`` list.
Both are absolute URIs of the machine that wrote them. Unknown keys are kept at every level.
"""
from __future__ import annotations

import json
from dataclasses import field
from typing import Any, Mapping, overload

from wmcheck.checkpoint.errors import MalformedFileError
from wmcheck.checkpoint.logs.textlog import dump_json, int_field, open_log, parse_json, parse_json_object
from wmcheck.checkpoint.records import dataclass

MAX_VERSION = 2
_OPERATOR_KEYS = ("operatorId", "operatorName")
_STORE_KEYS = ("storeName", "numColsPrefixKey", "numPartitions")
_V2_STORE_KEYS = ("stateSchemaFilePath", "stateSchemaFilePaths")


@dataclass(frozen=True)
class StoreMetadata:
    """One state store of the operator (``default``, or e.g. ``left-keyToNumValues`` for joins)."""

    store_name: str
    num_cols_prefix_key: int
    num_partitions: int
    schema_file_path: str | None = None
    """v2 as written by Spark 4.0: one schema file URI."""
    schema_file_paths: tuple[str, ...] | None = None
    """v2 as written by Spark 4.1+: every schema file URI."""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def schema_files(self) -> tuple[str, ...]:
        """The schema file URIs of either v2 form (empty for v1)."""
        single = (self.schema_file_path,) if self.schema_file_path is not None else ()
        return single + (self.schema_file_paths or ())


@dataclass(frozen=True)
class OperatorMetadata:
    """A parsed operator metadata file; ``extra`` and ``operator_extra`` hold unknown keys."""

    version: int
    operator_id: int
    operator_name: str
    stores: tuple[StoreMetadata, ...]
    properties_json: str | None = None
    """v2 ``operatorPropertiesJson`` exactly as stored (a JSON document in a string)."""
    properties: Any = None
    """``properties_json`` parsed (for transformWithState: timeMode, outputMode, stateVariables)."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    operator_extra: Mapping[str, Any] = field(default_factory=dict)


def _bad(message: str, path: str, hint: str = "the file was edited by hand or written by an unknown tool") -> MalformedFileError:
    return MalformedFileError(message, path=path, line=2, hint=hint)


def _object(value: Any, what: str, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _bad(f"expected {what} as a JSON object, found {json.dumps(value)[:40]}", path)
    return value


@overload
def _string(obj: dict[str, Any], key: str, what: str, path: str) -> str: ...
@overload
def _string(obj: dict[str, Any], key: str, what: str, path: str, required: bool) -> str | None: ...
def _string(obj: dict[str, Any], key: str, what: str, path: str, required: bool = True) -> str | None:
    if key not in obj and not required:
        return None
    value = obj.get(key)
    if not isinstance(value, str):
        found = "nothing" if key not in obj else json.dumps(value)[:40]
        raise _bad(f"expected {what} {key} to be a string, found {found}", path)
    return value


def _int(obj: dict[str, Any], key: str, what: str, path: str) -> int:
    value = int_field(obj, key, path, 2)
    if value is None:
        raise _bad(f"expected {what} to have an integer {key}, found nothing", path)
    return value


def _store(value: Any, index: int, version: int, path: str) -> StoreMetadata:
    what = f"stateStoreInfo[{index}]"
    obj = _object(value, what, path)
    known = _STORE_KEYS + (_V2_STORE_KEYS if version >= 2 else ())
    paths = None
    if version >= 2 and "stateSchemaFilePaths" in obj:
        raw = obj["stateSchemaFilePaths"]
        if not isinstance(raw, list) or not all(isinstance(p, str) for p in raw):
            raise _bad(f"expected {what} stateSchemaFilePaths to be a list of strings, found {json.dumps(raw)[:40]}", path)
        paths = tuple(raw)
    return StoreMetadata(
        store_name=_string(obj, "storeName", what, path),
        num_cols_prefix_key=_int(obj, "numColsPrefixKey", what, path),
        num_partitions=_int(obj, "numPartitions", what, path),
        schema_file_path=_string(obj, "stateSchemaFilePath", what, path, required=False) if version >= 2 else None,
        schema_file_paths=paths,
        extra={k: v for k, v in obj.items() if k not in known},
    )


def parse_operator_metadata(data: bytes, path: str) -> OperatorMetadata:
    """Parse a v1 ``_metadata/metadata`` or a v2 ``_metadata/v2/<batch>`` file."""
    version, lines = open_log(data, path, MAX_VERSION, "stateful operator metadata", "the operator metadata",
                              "an empty metadata file is left by a crash while writing; Spark rewrites it on the next run")
    text = "\n".join(lines)
    if not text.strip():
        raise _bad("expected the operator metadata JSON after the version line, found nothing", path,
                   hint="the file is truncated; Spark rewrites it on the next run")
    obj = parse_json_object(text, path, 2, "the operator metadata")
    info = _object(obj.get("operatorInfo"), "operatorInfo", path)
    stores = obj.get("stateStoreInfo")
    if not isinstance(stores, list):
        raise _bad(f"expected stateStoreInfo to be a list, found {json.dumps(stores)[:40]}", path)
    properties_json = _string(obj, "operatorPropertiesJson", "the operator's", path) if version >= 2 else None
    known = ("operatorInfo", "stateStoreInfo") + (("operatorPropertiesJson",) if version >= 2 else ())
    return OperatorMetadata(
        version=version,
        operator_id=_int(info, "operatorId", "operatorInfo", path),
        operator_name=_string(info, "operatorName", "operatorInfo", path),
        stores=tuple(_store(s, i, version, path) for i, s in enumerate(stores)),
        properties_json=properties_json,
        properties=None if properties_json is None else parse_json(properties_json, path, 2, "operatorPropertiesJson"),
        extra={k: v for k, v in obj.items() if k not in known},
        operator_extra={k: v for k, v in info.items() if k not in _OPERATOR_KEYS},
    )


def _store_json(store: StoreMetadata) -> dict[str, Any]:
    out: dict[str, Any] = {
        "storeName": store.store_name,
        "numColsPrefixKey": store.num_cols_prefix_key,
        "numPartitions": store.num_partitions,
    }
    if store.schema_file_path is not None:
        out["stateSchemaFilePath"] = store.schema_file_path
    if store.schema_file_paths is not None:
        out["stateSchemaFilePaths"] = list(store.schema_file_paths)
    return {**out, **store.extra}


def serialize_operator_metadata(meta: OperatorMetadata) -> bytes:
    """Write the file as Spark does (keys in Spark's order, unknown keys after, no trailing newline).

    ``properties_json`` is written as stored; ``properties`` is only its parsed view.
    """
    obj: dict[str, Any] = {
        "operatorInfo": {"operatorId": meta.operator_id, "operatorName": meta.operator_name, **meta.operator_extra},
        "stateStoreInfo": [_store_json(s) for s in meta.stores],
    }
    if meta.properties_json is not None:
        obj["operatorPropertiesJson"] = meta.properties_json
    return f"v{meta.version}\n{dump_json({**obj, **meta.extra})}".encode("utf-8")
