"""State rows for output: Arrow tables of the rows older than the watermark, as one table (Parquet) or as
JSON-ready records (oldest first)."""
from __future__ import annotations

import base64
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any, Iterator, Sequence

from wmcheck.checkpoint.errors import CheckpointError, arg
from wmcheck.statestore.output.parquet_parts import ParquetPart, PartsWriter


def jsonable(value: Any) -> Any:
    """Arrow/Python values as JSON values: timestamps ISO-8601 UTC with microseconds, day-time intervals as
    microseconds, maps as key/value lists."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
            return [{"key": jsonable(k), "value": jsonable(v)} for k, v in value]
        return [jsonable(v) for v in value]
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc).replace(tzinfo=None)
        return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, timedelta):
        return value // timedelta(microseconds=1)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, float) and value != value:
        return None
    return value


def one_table(reads: Sequence[Any], tables: list, limit: int | None = None):
    """The tables of :func:`older_tables` as one (for parquet): their key/value schemas must agree."""
    import pyarrow as pa

    filled = [(r, t) for r, t in zip(reads, tables) if t.num_rows] or list(zip(reads, tables))[:1]
    try:
        table = pa.concat_tables([t for _, t in filled])
    except pa.ArrowInvalid:
        raise _different_schemas([r for r, _ in filled]) from None
    if limit is not None and table.num_rows > limit:
        table = table.sort_by([("event_time_ms", "ascending"), ("partition_id", "ascending")]).slice(0, limit)
    return table


def _different_schemas(reads: Sequence[Any]) -> CheckpointError:
    names = ", ".join(dict.fromkeys(f"operator {r.store.operator_id} {r.store.name}" for r in reads))
    return CheckpointError(f"{names} have different key/value schemas and cannot share one table",
                           hint=f"select one with {arg('operator')} and {arg('store')}/{arg('join_side')}/{arg('state_var')}",
                           param="store")


def write_parts(path: str, reads: Sequence[Any], parts: Iterator[tuple[int, ParquetPart]]) -> int:
    """Write ``(index in reads, part)`` encoded batches of evicted rows to one Parquet file as they come (what
    :func:`one_table` would hold, never all at once); their key/value schemas must agree. Returns the rows
    written; a failure leaves no file."""
    filled: list[Any] = []
    with PartsWriter(path, lambda: _different_schemas(filled)) as writer:
        for index, part in parts:
            if part.rows:
                filled.append(reads[index])
            writer.add(part)
    return writer.rows


def _last_of_each_name(array: Any) -> Any:
    """A struct array (nested structs too) keeping the last field of each name, as Spark's
    ``Row.asDict`` does: aggregation buffers repeat names (``first``, ``valueSet``)."""
    import pyarrow as pa

    if not pa.types.is_struct(array.type):
        return array
    fields = list(array.type)
    keep = {f.name: i for i, f in enumerate(fields)}
    children = [_last_of_each_name(array.field(i)) for i in keep.values()]
    return pa.StructArray.from_arrays(children, names=list(keep), mask=array.is_null() if array.null_count else None)


def pylist(table: Any) -> list[dict[str, Any]]:
    """An Arrow table's rows as Python dicts; a struct with repeated field names keeps the last of each."""
    import pyarrow as pa

    try:
        return table.to_pylist()
    except ValueError:
        columns = {name: pa.chunked_array([_last_of_each_name(c) for c in table.column(name).chunks],
                                          type=_last_of_each_name(table.column(name).chunk(0)).type) if table.num_rows
                   else table.column(name) for name in table.column_names}
        return pa.table(columns).to_pylist()


def table_rows(tables: list, limit: int | None = None) -> list[dict[str, Any]]:
    """Arrow tables of state rows as JSON-ready dicts: oldest first (the ``limit`` oldest when given),
    then by store, partition and key."""
    import json

    rows = [jsonable(r) for t in tables for r in pylist(t)]
    rows.sort(key=lambda r: (r["event_time_ms"] is None, r["event_time_ms"] or 0, r["operator_id"], r["store"],
                             r["partition_id"], json.dumps(r["key"], sort_keys=True)))
    return rows if limit is None else rows[:limit]
