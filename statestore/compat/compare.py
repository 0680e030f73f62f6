"""What the new code changes, measured on the re-run batch: its output rows against the old code's, each
store's state rows against the state the old code left at the same version, and the state schemas Spark
accepted and evolved."""
from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any, Iterable

from wmcheck.checkpoint.errors import CheckpointError
from wmcheck.checkpoint.file_logs import parse_file_log
from wmcheck.checkpoint.fs import FileSystem
from wmcheck.checkpoint.layout import COMPACT_SUFFIX, SINK_LOG
from wmcheck.checkpoint.locations import spark_location
from wmcheck.checkpoint.metadata_log import MetadataLog
from wmcheck.checkpoint.model import Checkpoint
from wmcheck.checkpoint.state_schema import ColumnFamilySchema

from ..rows import jsonable, pylist
from .explain import store_schemas
from .results import OutputChange, RowSample, SchemaChange, StateChange
from .schemas import render, side_by_side, struct_fields

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SAMPLES = 5
MAX_STATE_ROWS = 500_000
"""Stores with more rows than this are counted, not compared row by row."""

Schemas = dict[tuple[int, str, str], ColumnFamilySchema]


# -- output ------------------------------------------------------------------------------------


def sink_batch_files(sink: FileSystem, batch: int) -> list[str] | None:
    """The files a file sink's log says ``batch`` wrote (as Spark reads them); None when the log has no entry."""
    log = MetadataLog.listed(sink, SINK_LOG)
    holder = log.holder(batch)
    if holder is None:
        return None
    entries = parse_file_log(sink.read(holder), holder).entries
    if holder.endswith(COMPACT_SUFFIX):
        entries = tuple(e for e in entries if e.batch_id == batch)
    return [spark_location(e.path) for e in entries if e.action == "add"]


def read_files(spark: "SparkSession", fmt: str, files: list[str], like: "DataFrame") -> "DataFrame":
    """The rows of ``files``; text formats take ``like``'s schema (their own types cannot be inferred back)."""
    if not files:
        return spark.createDataFrame([], like.schema)
    reader = spark.read.format(fmt)
    if fmt not in ("parquet", "orc", "avro"):
        reader = reader.schema(like.schema)
    return reader.load(files)


def _as_json(df: "DataFrame", columns: list[str]) -> "DataFrame":
    from pyspark.sql import functions as F

    return df.select(F.to_json(F.struct(*[F.col(f"`{c}`") for c in columns])).alias("row"))


def diff_output(sink: str, old: "DataFrame | None", new: "DataFrame", note: str | None = None) -> OutputChange:
    """Rows only the old output has and only the new one has (as multisets, on the columns both have)."""
    new_columns = tuple(new.columns)
    new_rows = new.count()
    if old is None:
        return OutputChange(sink, new_rows, None, None, None, (), new_columns, note=note)
    old_columns = tuple(old.columns)
    common = [c for c in new_columns if c in old_columns]
    old_json, new_json = _as_json(old, common), _as_json(new, common)
    only_old, only_new = old_json.exceptAll(new_json), new_json.exceptAll(old_json)
    samples = tuple(RowSample("old", json.loads(r["row"])) for r in only_old.limit(SAMPLES).collect()) + tuple(
        RowSample("new", json.loads(r["row"])) for r in only_new.limit(SAMPLES).collect())
    if old_columns != new_columns:
        dropped = [c for c in old_columns if c not in new_columns]
        added = [c for c in new_columns if c not in old_columns]
        parts = ([f"new columns: {', '.join(added)}"] if added else []) + ([f"dropped columns: {', '.join(dropped)}"]
                                                                            if dropped else [])
        note = "; ".join(parts + ([note] if note else []) + ([f"rows compared on {', '.join(common)}"] if common else []))
    return OutputChange(sink, new_rows, old.count(), only_old.count(), only_new.count(), old_columns, new_columns, samples,
                        note)


# -- state -------------------------------------------------------------------------------------


def _rows(read: Any) -> list[dict[str, Any]]:
    rows = [jsonable(r) for r in pylist(read.raw)]
    for row in rows:
        row.pop("partition_id", None)
    return rows


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _diff_store(operator_id: int, store: str, old: list[dict[str, Any]], new: list[dict[str, Any]]) -> StateChange:
    keyed = all("key" in r for r in old + new)
    old_keys = [_dump(r["key"]) for r in old] if keyed else []
    new_keys = [_dump(r["key"]) for r in new] if keyed else []
    if keyed and len(set(old_keys)) == len(old_keys) and len(set(new_keys)) == len(new_keys):
        before = dict(zip(old_keys, old))
        after = dict(zip(new_keys, new))
        added = [k for k in after if k not in before]
        removed = [k for k in before if k not in after]
        changed = [k for k in after if k in before and _dump(after[k]) != _dump(before[k])]
        samples = tuple(RowSample("old", before[k]) for k in (removed + changed)[:SAMPLES]) + tuple(
            RowSample("new", after[k]) for k in (added + changed)[:SAMPLES])
        return StateChange(operator_id, store, len(old), len(new), len(added), len(removed), len(changed), samples)
    before_c, after_c = Counter(map(_dump, old)), Counter(map(_dump, new))
    only_old, only_new = before_c - after_c, after_c - before_c
    samples = tuple(RowSample("old", json.loads(k)) for k in list(only_old)[:SAMPLES]) + tuple(
        RowSample("new", json.loads(k)) for k in list(only_new)[:SAMPLES])
    return StateChange(operator_id, store, len(old), len(new), sum(only_new.values()), sum(only_old.values()), 0, samples)


def state_changes(old: Checkpoint, new: Checkpoint, batch: int) -> tuple[StateChange, ...]:
    """Per store, the state after ``batch`` as the new code wrote it (``new``) against the old code's (``old``),
    read with the python engine (no JVM; the checkpoint is only read)."""
    from wmcheck.checkpoint.errors import UnsupportedError

    from ..python_engine import read_stores

    try:  # the state batch N wrote is the one batch N + 1 starts from
        before = {(r.store.operator_id, r.store.name): r for r in read_stores(old, batch=batch + 1)}
        after = {(r.store.operator_id, r.store.name): r for r in read_stores(new, batch=batch + 1)}
    except (UnsupportedError, CheckpointError) as exc:
        return (StateChange(-1, "*", None, None, note=f"state not compared: {exc.message}"),)
    out = []
    for key in sorted(before.keys() | after.keys()):
        op, store = key
        if key not in before or key not in after:
            side = "old" if key in before else "new"
            out.append(StateChange(op, store, None, None, note=f"only the {side} query has this store"))
            continue
        try:
            rows_old, rows_new = _rows(before[key]), _rows(after[key])
        except (UnsupportedError, CheckpointError) as exc:
            out.append(StateChange(op, store, None, None, note=f"not compared: {exc.message}"))
            continue
        except Exception as exc:  # noqa: BLE001 - e.g. Avro rows of two schema ids after an evolution
            out.append(StateChange(op, store, None, None, note=f"not compared: the python state engine cannot read "
                                                               f"it ({type(exc).__name__}: {exc})"))
            continue
        if max(len(rows_old), len(rows_new)) > MAX_STATE_ROWS:
            out.append(StateChange(op, store, len(rows_old), len(rows_new),
                                   note=f"more than {MAX_STATE_ROWS} rows: counted, not compared"))
            continue
        out.append(_diff_store(op, store, rows_old, rows_new))
    return tuple(out)


# -- schemas -----------------------------------------------------------------------------------


def schemas_of(ckpt: Checkpoint) -> Schemas:
    """The newest schema of every store's column family."""
    return {(op, store, cf.name): cf for op, _, store, cf in store_schemas(ckpt)}


def _parts(cf: ColumnFamilySchema) -> Iterable[tuple[str, Any]]:
    yield "key", cf.key_schema
    yield "value", cf.value_schema


def schema_changes(before: Schemas, after: Schemas) -> tuple[SchemaChange, ...]:
    """Column families whose key or value schema the re-run changed (Spark accepted the change)."""
    out = []
    for (op, store, family), cf in sorted(after.items()):
        old = before.get((op, store, family))
        for part, schema in _parts(cf):
            new_fields = struct_fields(schema)
            old_fields = struct_fields(dict(_parts(old))[part]) if old is not None else ()
            if old is not None and old_fields == new_fields:
                continue
            where = part if family == "default" else f"{part} of {family}"
            out.append(SchemaChange(op, store, where, side_by_side(old_fields, new_fields), render(old_fields),
                                    render(new_fields)))
    for (op, store, family) in sorted(before.keys() - after.keys()):
        out.append(SchemaChange(op, store, f"state variable {family}", (), "present", "removed"))
    return tuple(out)
