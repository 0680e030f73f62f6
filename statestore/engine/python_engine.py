"""State without a JVM: the rows Spark's state reader returns, read from the state files in Python.

Same targets, stores, eviction rules and summaries as :mod:`wmcheck.statestore.spark.reader` (which goes through Spark);
rows come as Arrow tables with Spark's column types. A plain store's partition is read in chunks
(:mod:`wmcheck.statestore.engine.store_files`) and decoded column-wise (:mod:`wmcheck.statestore.encodings.unsafe_columns`), so memory holds a chunk of
rows, not the state.
"""
from __future__ import annotations

import functools
from contextlib import closing
from typing import TYPE_CHECKING, Any, Generator, Iterator, TypeVar

from wmcheck.checkpoint.errors import MalformedFileError, UnsupportedError, arg
from wmcheck.checkpoint.model import Checkpoint, store_unique_ids
from wmcheck.checkpoint.records import dataclass
from wmcheck.statestore.discovery import Store
from wmcheck.statestore.encodings.unsafe_row import arrow_type
from wmcheck.statestore.engine.evicted_rows import evicted, rows_table
from wmcheck.statestore.engine.presentation import StorePlan, plan_store
from wmcheck.statestore.engine.store_files import Chunk, PartitionStream, load_partition
from wmcheck.statestore.eviction import Eviction, store_eviction
from wmcheck.statestore.formats.schema import StructType
from wmcheck.statestore.plan import StatePlan, plan_state
from wmcheck.statestore.targets import EDGES, Target, as_checkpoint

T = TypeVar("T")

if TYPE_CHECKING:
    import pyarrow as pa

    from wmcheck.checkpoint.watermarks.progress import QueryProgress


def _partition(ckpt: Checkpoint, plan: StorePlan, partition: int, name: str) -> tuple[Any, Any]:
    """(operator, its partition directory of store ``name``, or None when there is none)."""
    op = next(o for o in ckpt.operators if o.operator_id == plan.store.operator_id)
    return op, next((p for p in op.partitions if p.partition == partition and p.store == name), None)


def _partition_states(ckpt: Checkpoint, plan: StorePlan, partition: int, version: int) -> tuple[dict, dict[str, int]]:
    states: dict[str, dict[bytes, bytes]] = {}
    families: dict[str, int] = {}
    for name in plan.physical:
        op, part = _partition(ckpt, plan, partition, name)
        if part is None:
            states[name] = {}
            continue
        states[name], meta = load_partition(ckpt.fs, part, version, plan.codec, store_unique_ids(ckpt, op, part),
                                            plan.checksums, plan.fast)
        if meta is not None:
            families.update(meta.column_families)
    return states, families


def reader_schema(plan: StorePlan, raw: bool = False) -> "pa.Schema":
    """The reader's columns and ``partition_id`` (``raw``: timestamps and dates as integers, as decoded)."""
    import pyarrow as pa

    return pa.schema([*[pa.field(f.name, arrow_type(f.data_type, raw=raw)) for f in plan.columns.fields],
                      pa.field("partition_id", pa.int32(), False)])


def _byte_chunks(ckpt: Checkpoint, plan: StorePlan, partition: int, version: int) -> Generator[Chunk, None, None]:
    """A plain store's keys and values of one partition, chunk by chunk (none without its directory)."""
    op, part = _partition(ckpt, plan, partition, plan.physical[0])
    if part is None:
        return
    stream = PartitionStream(ckpt.fs, part, version, plan.codec, store_unique_ids(ckpt, op, part), plan.checksums,
                             plan.fast)
    with closing(stream.chunks()) as chunks:  # a row that does not decode closes the files at once
        yield from chunks


def _column_chunks(ckpt: Checkpoint, plan: StorePlan, partition: int, version: int) -> Generator[dict[str, Any], None, None]:
    """The reader's columns of one partition, chunk by chunk (plain stores) or all at once (the others)."""
    names = [f.name for f in plan.columns.fields]
    if plan.columns_of is not None:
        with closing(_byte_chunks(ckpt, plan, partition, version)) as chunks:
            for keys, values in chunks:
                yield plan.columns_of(keys, values, None)
        return
    states, families = _partition_states(ckpt, plan, partition, version)
    columns: dict[str, list[Any]] = {name: [] for name in names}
    for row in plan.rows(states, families):
        for name in names:
            columns[name].append(row[name])
    yield columns


def partition_tables(ckpt: Checkpoint, plan: StorePlan, partition: int, version: int) -> Generator["pa.Table", None, None]:
    """The reader's rows of one partition (its columns and ``partition_id``), a table per chunk; a row that
    does not decode names the partition."""
    with closing(_column_chunks(ckpt, plan, partition, version)) as chunks:
        yield from map(functools.partial(_table, plan, partition), _named(chunks, plan, partition, version))


def _named(items: Iterator[T], plan: StorePlan, partition: int, version: int) -> Iterator[T]:
    """``items``, a row that does not decode (an error without a file) named by its store, partition and version."""
    while True:
        try:
            item = next(items, None)
        except MalformedFileError as exc:
            if exc.path:
                raise
            raise MalformedFileError(f"a row of store {plan.store.name!r} at version {version}: {exc.message}",
                                     path=f"state/{plan.store.operator_id}/{partition}",
                                     hint="the state files or the state schema are not what Spark wrote") from None
        if item is None:
            return
        yield item


def _table(plan: StorePlan, partition: int, columns: dict[str, Any]) -> "pa.Table":
    """The reader's rows of decoded ``columns`` of one partition, in the reader's types."""
    import pyarrow as pa

    raw, final = reader_schema(plan, raw=True), reader_schema(plan)
    arrays = [columns[f.name] if isinstance(columns[f.name], (pa.Array, pa.ChunkedArray))
              else pa.array(columns[f.name], type=f.type) for f in raw if f.name != "partition_id"]
    arrays.append(pa.repeat(pa.scalar(partition, pa.int32()), len(arrays[0])))
    return pa.Table.from_arrays(arrays, schema=raw).cast(final)


def older_tables(read: "PythonStoreRead", partition: int) -> Generator["pa.Table", None, None]:
    """The rows of one partition the watermark evicts (:func:`state_rows` without ``older``), a table per chunk. A
    plain store decoded column-wise reads each chunk's event-time column first and decodes the rows it evicts alone
    (every row checked all the same; Arrow's compute functions not loaded: :mod:`wmcheck.statestore.engine.evicted_rows`); the others, and a
    chunk whose event-time column the column reader declines, are read whole and filtered."""
    plan, rule, version, wm = read.plan, read.rule, read.target.batch, read.target.watermark_ms
    if plan.leaf_of is None or rule.column is None:
        with closing(partition_tables(read.ckpt, plan, partition, version)) as tables:
            for raw in tables:
                yield _evicted_only(state_rows(raw, read.store, rule, wm))
        return
    import numpy as np

    key_type, value_type = (arrow_type(f.data_type) for f in plan.columns.fields)
    column, columns_of, leaf_of = rule.column, plan.columns_of, plan.leaf_of
    assert columns_of is not None

    def chosen(chunk: Chunk) -> "pa.Table":
        keys, values = chunk
        found = leaf_of(keys, values, column)
        if found is None:
            return _evicted_only(state_rows(_table(plan, partition, columns_of(keys, values, None)), read.store, rule, wm))
        times, valid = found
        event, known, older = evicted(times, valid, rule, wm)
        keep = np.flatnonzero(older)
        decoded = columns_of(keys, values, keep)
        return rows_table(read.store, partition, decoded["key"].view(key_type), decoded["value"].view(value_type),
                          (event[keep], known[keep]))

    with closing(_byte_chunks(read.ckpt, plan, partition, version)) as chunks:
        yield from _named(map(chosen, chunks), plan, partition, version)


def _evicted_only(rows: "pa.Table") -> "pa.Table":
    """The rows ``older`` marks, without that column."""
    return rows.filter(rows.column("older")).drop_columns(["older"])


def reader_batches(ckpt: Checkpoint, plan: StorePlan, tgt: Target) -> Iterator["pa.Table"]:
    """The reader's rows (its columns and ``partition_id``), partition by partition, a table per chunk."""
    for partition in range(plan.store.num_partitions or 0):
        yield from partition_tables(ckpt, plan, partition, tgt.batch)


@dataclass(frozen=True)
class PythonStoreRead:
    """One store to read at a target with the python engine, and its eviction rule. Rows are read on each
    call, partition by partition and chunk by chunk (this process; :class:`wmcheck.statestore.engine.python_jobs.PythonEngine` spreads
    the partitions over worker processes)."""

    store: Store
    rule: Eviction
    plan: StorePlan
    target: Target
    ckpt: Checkpoint
    fast: bool = True
    """Rows decoded column-wise where possible (else row by row only)."""

    def batches(self) -> Iterator["pa.Table"]:
        """The reader's rows, a table per chunk of a partition."""
        return reader_batches(self.ckpt, self.plan, self.target)

    def row_batches(self) -> Iterator["pa.Table"]:
        """:func:`state_rows` of each chunk (one empty table when there is no partition)."""
        empty = True
        for raw in self.batches():
            empty = False
            yield state_rows(raw, self.store, self.rule, self.target.watermark_ms)
        if empty:
            yield state_rows(reader_schema(self.plan).empty_table(), self.store, self.rule, self.target.watermark_ms)

    @property
    def raw(self) -> "pa.Table":
        """All the reader's rows (``key``, the value columns, ``partition_id``)."""
        import pyarrow as pa

        return pa.concat_tables([reader_schema(self.plan).empty_table(), *self.batches()])

    def rows(self) -> "pa.Table":
        import pyarrow as pa

        return pa.concat_tables(list(self.row_batches()))

    def older(self) -> "pa.Table":
        """The rows the watermark evicts (:func:`older_tables` of every partition)."""
        import pyarrow as pa

        empty = _evicted_only(state_rows(reader_schema(self.plan).empty_table(), self.store, self.rule, 0))
        return pa.concat_tables([empty, *(t for p in range(self.store.num_partitions or 0) for t in older_tables(self, p))])


def _column(table: "pa.Table", path: tuple[str, ...]):
    import pyarrow.compute as pc

    col = table.column(path[0])
    for name in path[1:]:
        col = pc.struct_field(col, name)
    return col


def _has(columns: StructType, path: tuple[str, ...]) -> bool:
    current: Any = columns
    for name in path:
        fields = {f.name: f.data_type for f in getattr(current, "fields", ())}
        if name not in fields:
            return False
        current = fields[name]
    return True


def time_columns(table: "pa.Table", rule: Eviction, watermark_ms: int) -> tuple[Any, Any]:
    """``(event_time_ms, older)`` arrays, as :func:`wmcheck.statestore.spark.reader.time_columns` computes them in Spark."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = table.num_rows
    if rule.column is None:
        return pa.nulls(n, pa.int64()), pa.repeat(pa.scalar(False), n)
    native = _column(table, rule.column)
    native = native.cast(pa.int64())  # timestamps: epoch microseconds
    if rule.unset is not None:
        native = pc.if_else(pc.equal(native, rule.unset), pa.scalar(None, pa.int64()), native)
    threshold = watermark_ms * (1000 if rule.unit == "us" else 1)
    older = pc.fill_null(pc.less(native, threshold) if rule.strict else pc.less_equal(native, threshold), False)
    if rule.unit == "us":
        quotient = pc.divide(native, 1000)
        exact = pc.equal(pc.multiply(quotient, 1000), native)
        native = pc.if_else(pc.and_(pc.less(native, 0), pc.invert(exact)), pc.subtract(quotient, 1), quotient)
    return native, older


def state_rows(raw: "pa.Table", store: Store, rule: Eviction, watermark_ms: int) -> "pa.Table":
    """The reader's rows as ``operator_id, store, partition_id, key, value, event_time_ms, older``
    (``value`` gathers the non-key columns when the reader has no ``value``), like :func:`wmcheck.statestore.spark.reader.state_rows`."""
    import pyarrow as pa

    rest = [c for c in raw.column_names if c not in ("key", "partition_id")]
    if rest == ["value"]:
        value = raw.column("value")
    else:
        value = pa.StructArray.from_arrays([raw.column(c).combine_chunks() for c in rest], names=rest) if raw.num_rows \
            else pa.array([], pa.struct([raw.schema.field(c) for c in rest]))
    event_ms, older = time_columns(raw, rule, watermark_ms)
    return rows_table(store, raw.column("partition_id"), raw.column("key"), value, event_ms, older)


def read_store(ckpt: Checkpoint, store: Store, tgt: Target, fast: bool = True, plan: StorePlan | None = None) -> PythonStoreRead:
    """``store`` read at ``tgt`` (``fast``: rows decoded column-wise where possible, else row by row only; ``plan``:
    its plan when already made)."""
    plan = plan or plan_store(ckpt, store, fast)
    fields = {f.name: f.data_type for f in plan.columns.fields}
    key, value = fields.get("key"), fields.get("value")
    rule = store_eviction(ckpt, store, key if isinstance(key, StructType) else None,
                          value if isinstance(value, StructType) else None, lambda path: _has(plan.columns, path))
    return PythonStoreRead(store, rule, plan, tgt, ckpt, fast)


def read_planned(plan: StatePlan) -> list[PythonStoreRead]:
    """Every store of ``plan`` (planned for the python engine) read at its target, lazily."""
    if len(plan.store_plans) != len(plan.stores):
        raise UnsupportedError(f"this read was planned for the {plan.engine} engine", hint=f"use {arg('engine', plan.engine)}")
    return [read_store(plan.ckpt, s, t, plan=p) for s, t, p in zip(plan.stores, plan.targets, plan.store_plans)]


def read_stores(ckpt: Checkpoint | str, operator: int | None = None, store: str | None = None,
                batch: int | None = None, watermark_ms: int | None = None,
                progress: "QueryProgress | None" = None) -> list[PythonStoreRead]:
    """Every selected store read at one batch, each at its operator's own eviction watermark (``progress``: Spark's
    event log, where the plan decides it)."""
    return read_planned(plan_state(as_checkpoint(ckpt), operator, store, None, batch, watermark_ms, progress, "python"))


def _bucket(delta: Any):
    import pyarrow as pa
    import pyarrow.compute as pc

    index = pa.repeat(pa.scalar(0, pa.int64()), len(delta))
    for edge in EDGES:
        index = pc.add(index, pc.greater(delta, edge).cast(pa.int64()))
    return pc.if_else(pc.is_null(delta), pa.scalar(None, pa.int64()), index)


def partition_groups(rows: "pa.Table", wm: int) -> list[tuple[int, int | None, int, int | None, int | None]]:
    """:func:`.summary.summary_of_groups`'s groups of one partition's rows (a loop over its few buckets:
    a group-by would load Arrow's query engine, a tenth of a second)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    partition = rows.column("partition_id")[0].as_py()
    event, older = rows.column("event_time_ms"), rows.column("older").cast(pa.int64())
    bucket = _bucket(pc.subtract(event, wm).combine_chunks())
    groups = []
    for b in pc.unique(bucket).to_pylist():
        mask = pc.is_null(bucket) if b is None else pc.fill_null(pc.equal(bucket, b), False)
        groups.append((partition, b, pc.sum(mask.cast(pa.int64())).as_py(), pc.sum(pc.filter(older, mask)).as_py(),
                       pc.min(pc.filter(event, mask)).as_py()))
    return groups
