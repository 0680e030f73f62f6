"""What the new code changes, measured on the re-run batch: its output rows against the old code's, each
store's state rows against the state the old code left at the same version, and the state schemas Spark
accepted and evolved."""
from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any, Iterable

from wmcheck.checkpoint.errors import CheckpointError
from wmcheck.checkpoint.fs import FileSystem
from wmcheck.checkpoint.layout import COMPACT_SUFFIX, SINK_LOG
from wmcheck.checkpoint.locations import spark_location
from wmcheck.checkpoint.logs.file_logs import FileLogEntry, parse_file_log
from wmcheck.checkpoint.logs.metadata_log import MetadataLog
from wmcheck.checkpoint.model import Checkpoint
from wmcheck.statestore.formats.schema import ColumnFamilySchema
from wmcheck.statestore.output.rows import jsonable, pylist
from wmcheck.statestore.spark.compat.explain import store_schemas
from wmcheck.statestore.spark.compat.results import OutputChange, RowSample, SchemaChange, StateChange
from wmcheck.statestore.spark.compat.schemas import render, side_by_side, struct_fields

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SAMPLES = 5
MAX_STATE_ROWS = 500_000
"""Stores with more rows than this are counted, not compared row by row."""

Schemas = dict[tuple[int, str, str], ColumnFamilySchema]


# -- output ------------------------------------------------------------------------------------


def _added(sink: FileSystem, batch: int) -> list[FileLogEntry] | None:
    """The entries ``batch`` added to a file sink's log; None when the log has no entry, or cannot tell them: a
    compact file lists every file of the batches up to it without their batch ids, so a compaction batch's own are
    its entries less those of the batches before it (the compact file before and the files after that), and a batch
    whose own file is gone has none of its own to tell."""
    log = MetadataLog.listed(sink, SINK_LOG)
    holder = log.holder(batch)
    if holder is None:
        return None
    entries = parse_file_log(sink.read(holder), holder).entries
    if holder.endswith(COMPACT_SUFFIX):
        if log.files.get(batch) != holder:
            return None
        earlier = _paths_before(sink, log, batch)
        if earlier is None:
            return None
        entries = tuple(e for e in entries if e.path not in earlier)
    return [e for e in entries if e.action == "add"]


def _paths_before(sink: FileSystem, log: MetadataLog, batch: int) -> set[str] | None:
    """The files a sink's log lists for the batches before ``batch``: the compact file before it and every file after
    that; None where one of them is gone (purged after a compaction)."""
    before = [c for c in log.compacts if c < batch]
    first = before[-1] if before else 0
    paths: set[str] = set()
    for earlier in range(first, batch):
        name = log.files.get(earlier)
        if name is None or (earlier != first and name.endswith(COMPACT_SUFFIX)):
            return None
        paths.update(e.path for e in parse_file_log(sink.read(name), name).entries)
    return paths


def sink_batch_files(sink: FileSystem, batch: int, with_bytes: bool = False) -> list[str] | None:
    """The files a file sink's log says ``batch`` wrote (as Spark reads them; ``with_bytes``: those that are not
    empty); None when the log has no entry."""
    added = _added(sink, batch)
    return None if added is None else [spark_location(e.path) for e in added if e.size or not with_bytes]


SELF_DESCRIBING = ("parquet", "orc", "avro")
"""File formats whose files carry their columns' types."""


def newest_sink_files(sink: FileSystem, batch: int, with_bytes: bool = False) -> list[str]:
    """The files of the newest batch up to ``batch`` whose sink log entry adds any (``with_bytes``: any that is not
    empty), as Spark reads them."""
    log = MetadataLog.listed(sink, SINK_LOG)
    for earlier in sorted((b for b in log.batch_ids if b <= batch), reverse=True):
        files = sink_batch_files(sink, earlier, with_bytes)
        if files:
            return files
    return []


def written_shape(spark: "SparkSession", fmt: str, sink: FileSystem, batch: int,
                  like: "DataFrame") -> tuple["DataFrame", str]:
    """No rows, with the columns the old code wrote (read from the newest files its sink log lists), and how they
    were found: what a batch that wrote nothing is compared by, so a renamed or added output column shows without
    data. Self-describing formats give the types too (an empty file its schema); JSON the names of a file's rows
    (in ``like``'s order where they match); other formats, or JSON files without a row, leave them unknown (taken
    as ``like``'s)."""
    from pyspark.sql.types import StringType, StructField, StructType

    unknown = (f"batch {batch} wrote no rows before, and the columns the old code wrote are unknown (no {fmt} file of "
               f"its sink holds a row): output columns not compared")
    files = newest_sink_files(sink, batch, with_bytes=fmt not in SELF_DESCRIBING)
    if not files or fmt not in (*SELF_DESCRIBING, "json"):
        return spark.createDataFrame([], like.schema), unknown
    found = f"batch {batch} wrote no rows before: the columns compared are those of the old code's newest output files"
    if fmt in SELF_DESCRIBING:
        return spark.createDataFrame([], spark.read.format(fmt).load(files[:1]).schema), found
    names = spark.read.json(files[:1]).columns
    if not names:
        return spark.createDataFrame([], like.schema), unknown
    known = {f.name: f for f in like.schema.fields}
    ordered = [n for n in like.columns if n in names] + [n for n in names if n not in known]
    return spark.createDataFrame([], StructType([known.get(n) or StructField(n, StringType()) for n in ordered])), found


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


def type_changes(old: "DataFrame", new: "DataFrame") -> tuple[str, ...]:
    """``column: old type -> new type`` for each column both outputs have with another type."""
    before = {f.name: f.dataType.simpleString() for f in old.schema.fields}
    return tuple(f"{f.name}: {before[f.name]} -> {f.dataType.simpleString()}" for f in new.schema.fields
                 if f.name in before and before[f.name] != f.dataType.simpleString())


def diff_output(sink: str, old: "DataFrame | None", new: "DataFrame", note: str | None = None,
                typed: bool = False) -> OutputChange:
    """Rows only the old output has and only the new one has (as multisets, on the columns both have); with
    ``typed`` (the old files carry their types), the columns whose type changed."""
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
    retyped = type_changes(old, new) if typed else ()
    if old_columns != new_columns or retyped:
        dropped = [c for c in old_columns if c not in new_columns]
        added = [c for c in new_columns if c not in old_columns]
        parts = ([f"new columns: {', '.join(added)}"] if added else []) + ([f"dropped columns: {', '.join(dropped)}"]
                                                                            if dropped else [])
        parts += [f"column types: {', '.join(retyped)}"] if retyped else []
        if not added and not dropped and old_columns != new_columns:
            parts.append(f"columns reordered: {', '.join(old_columns)} -> {', '.join(new_columns)}")
        note = "; ".join(parts + ([note] if note else []) + ([f"rows compared on {', '.join(common)}"] if common else []))
    return OutputChange(sink, new_rows, old.count(), only_old.count(), only_new.count(), old_columns, new_columns, samples,
                        note, retyped)


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
    from wmcheck.statestore.engine.python_engine import read_stores

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
