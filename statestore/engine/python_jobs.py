"""The python engine as a :class:`~.engines.StateEngine`: its reads split in tasks, a range of a store's
partitions each, run by :mod:`wmcheck.statestore.engine.workers` in ``jobs`` processes (decoded, judged against the watermark and filtered
where they are read), their outputs streamed back: the rows the watermark evicts as Arrow tables, or a
summary's groups. For a Parquet file the evicted rows are encoded where they are read, a part per
:data:`PART_ROWS` of a task (:mod:`wmcheck.statestore.output.parquet_parts`): the process writing the file only copies bytes.
"""
from __future__ import annotations

import functools
from contextlib import closing
from datetime import timezone, tzinfo
from typing import TYPE_CHECKING, Any, Generator, Iterator, Sequence

from wmcheck.checkpoint.fs import LocalFileSystem
from wmcheck.statestore.engine.evicted_rows import rows_table
from wmcheck.statestore.engine.python_engine import (
    PythonStoreRead,
    older_tables,
    partition_groups,
    partition_tables,
    read_planned,
    read_store,
    reader_schema,
    state_rows,
)
from wmcheck.statestore.engine.workers import run
from wmcheck.statestore.output.parquet_parts import ParquetPart, encode_part
from wmcheck.statestore.plan import StatePlan
from wmcheck.statestore.summary import StateSummary, state_summary, summary_of_groups

if TYPE_CHECKING:
    import pyarrow as pa

OLDER, PARTS, GROUPS = "older", "parts", "groups"
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
"""mallopt's parameters (glibc's malloc.h)."""
TASKS_PER_JOB = 4
"""Tasks per worker a store's partitions are split in: a worker that ends early finds more to do."""
PART_ROWS = 1 << 17
"""Evicted rows a worker encodes as one Parquet part (a row group): few parts for the writing process to copy, row
groups of the size Parquet readers prefer, a few chunks held."""


class _Job:
    """What every task needs, sent once to each worker: the checkpoint and the stores read; the reads
    (with their decoding plans, which do not pickle) are rebuilt where they are used."""

    def __init__(self, reads: Sequence[PythonStoreRead]) -> None:
        self.ckpt = reads[0].ckpt if reads else None
        self.stores = [(r.store, r.target, r.fast) for r in reads]
        self.reads: list[PythonStoreRead] | None = list(reads)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "reads": None}

    def read(self, index: int) -> PythonStoreRead:
        if self.reads is None:
            assert self.ckpt is not None
            self.reads = [read_store(self.ckpt, store, tgt, fast) for store, tgt, fast in self.stores]
        return self.reads[index]


def _work(job: _Job, task: tuple[str, int, range]) -> Generator[tuple[int, Any], None, None]:
    """A range of one store's partitions, in order: ``(store index, evicted rows)`` per chunk (an Arrow table),
    per :data:`PART_ROWS` of them (a Parquet part, whichever partitions they come from), or ``(store index, their
    groups)``."""
    mode, index, partitions = task
    _keep_freed_memory()
    read = job.read(index)
    wm = read.target.watermark_ms
    pending: list[pa.Table] = []
    for partition in partitions:
        if mode == GROUPS:
            with closing(partition_tables(read.ckpt, read.plan, partition, read.target.batch)) as tables:
                for raw in tables:
                    rows = state_rows(raw, read.store, read.rule, wm)
                    if rows.num_rows:
                        yield index, partition_groups(rows, wm)
            continue
        with closing(older_tables(read, partition)) as tables:
            for older in tables:
                if mode == OLDER:
                    yield index, older
                elif older.num_rows:
                    pending.append(older)
                    if sum(t.num_rows for t in pending) >= PART_ROWS:
                        yield index, _part(pending)
                        pending = []
    if pending:
        yield index, _part(pending)


@functools.cache
def _keep_freed_memory() -> None:
    """glibc's malloc told to keep up to 128 MiB it was given back and to serve blocks up to 64 MiB from it: each
    chunk frees arrays the next allocates again, and returning them to the system each time costs a page fault
    per page touched again (half the minor faults of the 1M-key bench read). Elsewhere: nothing."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(M_TRIM_THRESHOLD, 128 << 20)
    mallopt(M_MMAP_THRESHOLD, 64 << 20)


def _tasks(mode: str, reads: Sequence[PythonStoreRead], jobs: int) -> list[tuple[str, int, range]]:
    """Each store's partitions in consecutive ranges, :data:`TASKS_PER_JOB` of them per job at most (enough to
    keep every worker busy to the end; one task per store with one job): a store of hundreds of small
    partitions is read in a few tasks, its evicted rows in a few Parquet parts."""
    tasks = []
    for index, read in enumerate(reads):
        count = read.store.num_partitions or 0
        size = -(-count // (jobs * TASKS_PER_JOB)) if jobs > 1 else count
        tasks += [(mode, index, range(first, min(first + size, count))) for first in range(0, count, max(size, 1))]
    return tasks


def _part(tables: list["pa.Table"]) -> ParquetPart:
    import pyarrow as pa

    return encode_part(pa.concat_tables(tables))


class PythonEngine:
    """The :class:`~.engines.StateEngine` reading the state files in Python (no JVM), with ``jobs`` worker
    processes (default and 1: none, this process reads) under a ``max_memory`` budget in bytes (default: none)."""

    name = "python"

    def __init__(self, jobs: int | None = None, max_memory: int | None = None) -> None:
        self.jobs = jobs or 1
        self.max_memory = max_memory

    def _run(self, mode: str, reads: Sequence[PythonStoreRead]) -> Iterator[tuple[int, Any]]:
        tasks = _tasks(mode, reads, self.jobs)
        local = bool(reads) and isinstance(reads[0].ckpt.fs, LocalFileSystem)
        return run(_work, _Job(reads), tasks, self.jobs, self.max_memory, fork=local)

    def read_stores(self, plan: StatePlan) -> list[PythonStoreRead]:
        return read_planned(plan)

    def summarize(self, plan: StatePlan, tz: tzinfo = timezone.utc) -> StateSummary:
        reads = read_planned(plan)
        groups: list[list] = [[] for _ in reads]
        for index, found in self._run(GROUPS, reads):
            groups[index] += found
        summaries = tuple(summary_of_groups(r.store, r.rule, r.target, g, tz) for r, g in zip(reads, groups))
        return state_summary(plan.ckpt, plan.target, summaries, "python", tz)

    def older_batches(self, reads: Sequence[PythonStoreRead]) -> Iterator[tuple[int, "pa.Table"]]:
        """``(store index, evicted rows)`` as the workers read them; an empty table for each store first (its schema)."""
        yield from enumerate(_empty_older(r) for r in reads)
        yield from self._run(OLDER, reads)

    def older_parts(self, reads: Sequence[PythonStoreRead]) -> Iterator[tuple[int, ParquetPart]]:
        """:meth:`older_batches` encoded as Parquet by the workers."""
        yield from ((i, encode_part(_empty_older(r))) for i, r in enumerate(reads))
        yield from self._run(PARTS, reads)

    def older_tables(self, reads: Sequence[PythonStoreRead], limit: int | None = None) -> list["pa.Table"]:
        """The evicted rows of each store (the ``limit`` oldest of each when given), like :func:`wmcheck.statestore.spark.spark_engine.older_tables`."""
        import pyarrow as pa

        parts: list[list[pa.Table]] = [[] for _ in reads]
        for index, table in self.older_batches(reads):
            parts[index].append(table)
            if limit is not None and sum(t.num_rows for t in parts[index]) > limit:
                parts[index] = [_oldest(pa.concat_tables(parts[index]), limit)]
        tables = [pa.concat_tables(p) for p in parts]
        return [_oldest(t, limit) for t in tables] if limit is not None else tables


def _empty_older(read: PythonStoreRead) -> "pa.Table":
    """No rows, in the columns of the evicted rows of ``read`` (those :func:`wmcheck.statestore.engine.python_engine.state_rows` gives, without
    ``older``), built without Arrow's compute functions: the process that writes the Parquet file loads none."""
    import numpy as np
    import pyarrow as pa

    schema = reader_schema(read.plan)
    rest = [f for f in schema if f.name not in ("key", "partition_id")]
    value = rest[0].type if [f.name for f in rest] == ["value"] else pa.struct(rest)
    return rows_table(read.store, pa.nulls(0, pa.int32()), pa.nulls(0, schema.field("key").type), pa.nulls(0, value),
                      (np.zeros(0, np.int64), np.zeros(0, bool)))


def _oldest(table: "pa.Table", limit: int) -> "pa.Table":
    return table.sort_by([("event_time_ms", "ascending"), ("partition_id", "ascending")]).slice(0, limit)
