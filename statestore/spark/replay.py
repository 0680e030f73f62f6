"""Replaying recorded batches with Spark: each batch's exact input, or only the rows it dropped as late.

The input of a batch comes from :mod:`wmcheck.checkpoint.batch_inputs` (no Spark); this module reads
it the way the source did and applies Spark's late-row rule (see docs/replay.md): a row is late in
batch N when its event time, or with ``window`` its window's end, is ``<=`` the late-events watermark
(``batchWatermarkMs`` of batch N-1 on Spark 3.4+).
"""
from __future__ import annotations

import json
from dataclasses import field, replace
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

from wmcheck.checkpoint.batch_inputs import BatchInput, InputFile, SourceInput, plan
from wmcheck.checkpoint.errors import (
    CheckpointError,
    MissingFileError,
    SparkUnavailableError,
    UnsupportedError,
    arg,
)
from wmcheck.checkpoint.kafka_retention import check_retained
from wmcheck.checkpoint.model import Checkpoint, open_checkpoint
from wmcheck.checkpoint.records import dataclass
from wmcheck.checkpoint.sources.delta import DELTA
from wmcheck.checkpoint.sources.file import FILE
from wmcheck.checkpoint.sources.kafka import KAFKA
from wmcheck.checkpoint.sources.other import NONE
from wmcheck.checkpoint.sources.protocol import SourceKind
from wmcheck.checkpoint.sources.registry import kind_named
from wmcheck.statestore.spark.late_rule import parse_window, with_lateness
from wmcheck.statestore.spark.sinks import Sink
from wmcheck.statestore.spark.spark_errors import condition, spark_errors

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from wmcheck.checkpoint.sources.delta_files import DeltaSourceLog
    from wmcheck.checkpoint.watermarks.progress import QueryProgress
    from wmcheck.statestore.spark.operator_late import OperatorLate

KEEP = ("all", "late", "on_time")
KAFKA_PACKAGE = "org.apache.spark:spark-sql-kafka-0-10_2.13:{version}"
KAFKA_JARS = "spark-sql-kafka-0-10_2.13-{version}.jar, spark-token-provider-kafka-0-10_2.13-{version}.jar, kafka-clients, commons-pool2"
SHOWN_MISSING = 5
KAFKA_NOT_FOUND = ("KAFKA_DATA_SOURCE_NOT_ENABLED", "DATA_SOURCE_NOT_FOUND")

@dataclass(frozen=True)
class ReplayOptions:
    """How the query read its input (``source_format``, ``schema``, ``options``) and what to keep."""

    source: str | None = None
    source_format: str | None = None
    schema: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    path_map: Mapping[str, str] = field(default_factory=dict)
    skip_missing: bool = False
    include_pending: bool = False
    event_time: str | None = None
    window: str | None = None
    keep: str = "all"
    late_watermark: str = "previous"
    fs_options: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ReplayBatch:
    """One replayed batch: its plan, its input, and (with an event time) the late-row predicate."""

    plan: BatchInput
    input: "DataFrame"
    data: "DataFrame"  # ``input``, with a ``window`` column (one row per window) when windowed
    late: "Column | None"
    missing: tuple[InputFile, ...] = ()

    @property
    def batch_id(self) -> int:
        return self.plan.batch_id

    def kept(self, keep: str) -> "DataFrame":
        """``all`` rows, only the ``late`` ones, or only the ``on_time`` ones."""
        if keep == "all":
            return self.data
        if self.late is None:
            raise CheckpointError(f"keeping {keep.replace('_', '-')} rows needs the event-time column",
                                  hint=f"pass {arg('event_time', 'COL')} (the column the query's withWatermark used)",
                              param="event_time")
        return self.data.filter(self.late if keep == "late" else ~self.late)


# -- reading one source ------------------------------------------------------------------------------


def _empty(spark: "SparkSession", schema: Any) -> "DataFrame":
    from pyspark.sql.types import StructType

    return spark.createDataFrame([], schema if schema is not None else StructType([]))


def _read_files(spark: "SparkSession", locations: list[str], opts: ReplayOptions, schema: Any,
               kind: SourceKind = FILE) -> "DataFrame":
    if not locations:
        return _empty(spark, schema)
    if kind is DELTA:  # a Delta table's data files, as its log names them
        return (spark.read.schema(schema) if schema is not None else spark.read).parquet(*locations)
    assert opts.source_format is not None  # prepare() requires it for file sources
    reader = spark.read.format(opts.source_format).options(**opts.options)
    if schema is not None:
        reader = reader.schema(schema)
    return reader.load(locations)


def _table_schema(spec: str | None) -> Any:
    """A Delta table's schema (its ``metaData.schemaString``) as a StructType."""
    from pyspark.sql.types import StructType

    if spec is None:
        raise CheckpointError("the Delta table's log holds no schema for its partition columns",
                              hint=f"pass {arg('schema')} (the table's columns)", param="schema")
    return StructType.fromJson(json.loads(spec))


def _read_delta(spark: "SparkSession", files: list[InputFile], opts: ReplayOptions, schema: Any) -> "DataFrame":
    """A Delta source's data files; a partitioned table's read per partition, each given its partition values as
    columns of the table's types (``schema``: the table's, or the user's, with the partition columns)."""
    if not any(f.partition for f in files):
        return _read_files(spark, [f.location for f in files], opts, schema, DELTA)
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    if isinstance(schema, str):  # the user's DDL
        schema = spark.createDataFrame([], schema).schema
    parts = {name for f in files for name in f.partition}
    data = StructType([c for c in schema.fields if c.name not in parts])
    groups: dict[tuple[tuple[str, str | None], ...], list[str]] = {}
    for f in files:
        groups.setdefault(tuple(sorted(f.partition.items())), []).append(f.location)
    frames = []
    for values, locations in groups.items():
        df = spark.read.schema(data).parquet(*locations)
        for name, value in values:
            df = df.withColumn(name, F.lit(value).cast(schema[name].dataType))
        frames.append(df.select(*schema.fieldNames()))
    return _union(frames)


def _read_kafka(spark: "SparkSession", src: SourceInput, opts: ReplayOptions) -> "DataFrame":
    assert src.ending_offsets is not None  # a replayable Kafka source has its range
    assign = {topic: sorted(int(p) for p in parts) for topic, parts in src.ending_offsets.items()}
    reader = (
        spark.read.format("kafka")
        .options(**opts.options)
        .option("assign", json.dumps(assign))
        .option("startingOffsets", json.dumps(src.starting_offsets))
        .option("endingOffsets", json.dumps(src.ending_offsets))
    )
    try:
        return reader.load()
    except Exception as exc:
        if condition(exc) in KAFKA_NOT_FOUND or "find data source: kafka" in str(exc).lower():
            raise SparkUnavailableError(
                f"reading a Kafka source needs Spark's Kafka connector, which is not on the classpath of Spark {spark.version}",
                hint=f"add {arg('packages', KAFKA_PACKAGE.format(version=spark.version))}, or {arg('jars')} (or "
                     f"{arg('conf', 'spark.jars=...')}) with {KAFKA_JARS.format(version=spark.version)}",
            ) from None
        raise


def _check_sources(batches: list[BatchInput], opts: ReplayOptions) -> None:
    """Fail before any Spark work: several sources without --source, unreplayable kinds, missing files."""
    ids = sorted({s.source_id for b in batches for s in b.sources})
    if len(ids) > 1:
        raise CheckpointError(f"the query has {len(ids)} sources ({', '.join(ids)}): replay reads one at a time",
                              hint=f"pass {arg('source', 'ID')}; {arg('plan')} shows every source", param="source")
    for batch in batches:
        for src in batch.sources:
            if not src.replayable:
                hint = (f"install delta-spark and read the range {arg('plan')} shows" if kind_named(src.kind) is DELTA
                        else f"{arg('plan')} shows the recorded offsets")
                raise UnsupportedError(f"batch {batch.batch_id}: source {src.source_id} cannot be replayed ({src.note})",
                                       path=f"offsets/{batch.batch_id}", hint=hint)
            if kind_named(src.kind) is FILE and src.files and not opts.source_format:
                raise CheckpointError(f"replaying a file source needs {arg('source_format')} (json, csv, parquet, text, ...)",
                                      hint=f"pass the format, {arg('schema')} and {arg('options')} settings the query's "
                                           "readStream used", param="source_format")
    missing = [(b.batch_id, s.source_id, f) for b in batches for s in b.sources for f in s.missing]
    if missing and not opts.skip_missing:
        shown = ", ".join(f.location for _, _, f in missing[:SHOWN_MISSING])
        more = f" and {len(missing) - SHOWN_MISSING} more" if len(missing) > SHOWN_MISSING else ""
        first_batch, source, first = missing[0]
        raise MissingFileError(
            f"{len(missing)} input file(s) of batches {first_batch}..{missing[-1][0]} no longer exist: {shown}{more}",
            path=f"sources/{source}/{first.log_batch}",
            hint=f"{arg('path_map', 'FROM=TO')} if the data moved (another directory or bucket), or {arg('skip_missing')} to "
                 "replay without them",
        )


def _infer_schema(spark: "SparkSession", batches: list[BatchInput], opts: ReplayOptions) -> Any:
    """The user's --schema, or one schema inferred from every file of the range (the same for each batch)."""
    if opts.schema is not None:
        return opts.schema
    kinds = {kind_named(s.kind) for b in batches for s in b.sources if s.files}
    kind = DELTA if kinds == {DELTA} else FILE
    partitioned = [s for b in batches for s in b.sources
                   if kind is DELTA and kind_named(s.kind) is DELTA and any(f.partition for f in s.files)]
    if partitioned:  # the files hold no partition column: the table's schema has them
        return _table_schema(partitioned[0].table_schema)
    locations = [f.location for b in batches for s in b.sources if kind_named(s.kind) is kind for f in s.files
                 if f.exists is not False]
    if not locations:
        return None
    with spark_errors("inferring the input schema"):
        return _read_files(spark, locations, opts, None, kind).schema


# -- the batches -------------------------------------------------------------------------------------


def _open(ckpt: Checkpoint | str, fs_options: Mapping[str, str]) -> Checkpoint:
    return ckpt if isinstance(ckpt, Checkpoint) else open_checkpoint(str(ckpt), fs_options)


def prepare(ckpt: Checkpoint | str, start: int, end: int | None = None,
            opts: ReplayOptions = ReplayOptions(), delta_source: "DeltaSourceLog | None" = None) -> list[BatchInput]:
    """The plan of batches ``start..end``, checked before any Spark work: options, sources, missing files;
    ``delta_source``: the Delta source's table, whose log gives each batch's data files (read as Parquet)."""
    if opts.keep not in KEEP:
        raise CheckpointError(f"unknown keep {opts.keep!r}", hint=f"one of {', '.join(KEEP)}")
    if opts.keep != "all" and opts.event_time is None:
        raise CheckpointError(f"keeping {opts.keep.replace('_', '-')} rows needs the event-time column",
                              hint=f"pass {arg('event_time', 'COL')} (the column the query's withWatermark used)",
                              param="event_time")
    if opts.window is not None:
        parse_window(opts.window)
    ckpt = _open(ckpt, opts.fs_options)
    batches = plan(ckpt, start, end, source=opts.source, include_pending=opts.include_pending,
                   path_map=opts.path_map, late_rule=opts.late_watermark, fs_options=opts.fs_options,
                   delta_source=delta_source)
    _check_sources(batches, opts)
    check_retained(batches, opts.options)
    return batches


def read_batches(spark: "SparkSession", batches: list[BatchInput], opts: ReplayOptions) -> Iterator[ReplayBatch]:
    """Each prepared batch, in order, with its exact input read by Spark."""
    schema = _infer_schema(spark, batches, opts)
    for batch in batches:
        src = batch.sources[0] if batch.sources else None
        missing = tuple(src.missing) if src else ()
        with spark_errors(f"reading batch {batch.batch_id}"):
            if src is None or kind_named(src.kind) is NONE:
                df = _empty(spark, schema)
            elif kind_named(src.kind) is KAFKA:
                df = _read_kafka(spark, src, opts)
            elif kind_named(src.kind) is DELTA:
                df = _read_delta(spark, [f for f in src.files if f.exists is not False], opts, schema)
            else:
                df = _read_files(spark, [f.location for f in src.files if f.exists is not False], opts, schema, kind_named(src.kind))
            data, late = df, None
            if opts.event_time is not None:
                if batch.late_watermark_ms is None:
                    raise CheckpointError(
                        f"offsets/{batch.batch_id - 1} is gone, so the watermark batch {batch.batch_id} dropped late rows by "
                        "is unknown", hint=f"replay from a later batch, or without {arg('event_time')}")
                data, late = with_lateness(df, opts.event_time, batch.late_watermark_ms, opts.window)
        yield ReplayBatch(batch, df, data, late, missing)


def replay_batches(spark: "SparkSession", ckpt: Checkpoint | str, start: int, end: int | None = None,
                   opts: ReplayOptions = ReplayOptions()) -> Iterator[ReplayBatch]:
    """Batches ``start..end`` in order, each with its exact input read by Spark."""
    yield from read_batches(spark, prepare(ckpt, start, end, opts), opts)


def batch_inputs(spark: "SparkSession", ckpt: Checkpoint | str, start: int, end: int | None = None, *,
                 delta_source: "DeltaSourceLog | None" = None, **options: Any) -> Iterator[tuple[int, "DataFrame", int]]:
    """``(batch_id, DataFrame, watermark_ms)`` for batches ``start..end`` in order (a Delta source's files from
    ``delta_source``, its table).

    ``options`` are :class:`ReplayOptions` fields (``source_format``, ``schema``, ``options``,
    ``path_map``, ``event_time``, ``window``, ``keep="late"`` ...); ``watermark_ms`` is the batch's
    ``batchWatermarkMs`` (what its progress report shows as ``eventTime.watermark``).
    """
    opts = replace(ReplayOptions(), **options)
    for rb in read_batches(spark, prepare(ckpt, start, end, opts, delta_source), opts):
        yield rb.batch_id, rb.kept(opts.keep), rb.plan.watermark_ms


def _union(frames: list["DataFrame"]) -> "DataFrame":
    union = frames[0]
    for df in frames[1:]:
        union = union.union(df)
    return union


def count_batches(batches: list[ReplayBatch], group_by: tuple[str, ...] = (),
                  grouped: bool = False) -> dict[int, dict[str, int | None]]:
    """Per batch: its rows and, with an event time, its late and on-time rows (and distinct late groups: with
    ``group_by``, or ``grouped`` for a query grouped by its window alone).

    One Spark job for all batches (two with ``group_by``): every batch tagged with its id, then grouped.
    With a window, late and on-time count (row, window) pairs, as Spark's window() expands them.
    """
    from pyspark.sql import functions as F

    out: dict[int, dict[str, int | None]] = {
        rb.batch_id: {"rows": 0, "late_rows": None, "on_time_rows": None, "late_groups": None} for rb in batches
    }
    if not batches:
        return out
    parts = []
    for rb in batches:
        batch = F.lit(rb.batch_id).alias("batch")
        late = (rb.late.cast("int") if rb.late is not None else F.lit(0)).alias("late")
        if rb.data is rb.input:
            parts.append(rb.data.select(batch, F.lit(1).alias("input"), F.lit(1).alias("data"), late))
        else:
            parts.append(rb.input.select(batch, F.lit(1).alias("input"), F.lit(0).alias("data"), F.lit(0).alias("late")))
            parts.append(rb.data.select(batch, F.lit(0).alias("input"), F.lit(1).alias("data"), late))
    totals = _union(parts).groupBy("batch").agg(*(F.sum(c).alias(c) for c in ("input", "data", "late"))).collect()
    timed = batches[0].late is not None
    for row in totals:
        out[row["batch"]].update({"rows": row["input"]} if not timed else
                                 {"rows": row["input"], "late_rows": row["late"], "on_time_rows": row["data"] - row["late"]})
    if timed:
        for counts in out.values():
            counts["late_rows"] = counts["late_rows"] or 0
            counts["on_time_rows"] = counts["on_time_rows"] or 0
    if timed and (group_by or grouped):
        keys = (["window"] if batches[0].data is not batches[0].input else []) + list(group_by)
        groups = _union([rb.data.filter(rb.late).select(F.lit(rb.batch_id).alias("batch"), *keys).distinct()
                         for rb in batches if rb.late is not None]).groupBy("batch").count().collect()
        for counts in out.values():
            counts["late_groups"] = 0
        for row in groups:
            out[row["batch"]]["late_groups"] = row["count"]
    return out


@dataclass(frozen=True)
class ReplaySummary:
    """One replayed batch: its watermarks, what it read, its late and on-time rows (with an event time), the rows
    handed on, and each stateful operator's late rows (:mod:`wmcheck.statestore.spark.operator_late`)."""

    batch: int
    committed: bool
    watermark_ms: int
    late_watermark_ms: int | None
    source_id: str | None
    files: int | None
    missing_files: int
    rows: int | None
    late_rows: int | None
    on_time_rows: int | None
    late_groups: int | None
    kept_rows: int | None
    operators: "tuple[OperatorLate, ...]" = ()


def replay(spark: "SparkSession", prepared: list[BatchInput], opts: ReplayOptions, sink: Sink,
           group_by: tuple[str, ...] = (), on_batch: Callable[[int, int, int], None] | None = None,
           ckpt: Checkpoint | None = None, progress: "QueryProgress | None" = None,
           grouped: bool = False) -> list[ReplaySummary]:
    """Hand each prepared batch's kept rows to ``sink(df, batch_id)`` in batch order (then ``sink.close()``
    if it has one); one summary row per batch, with ``ckpt`` each stateful operator's late rows (``operators``,
    :mod:`wmcheck.statestore.spark.operator_late`; Spark's own counts from ``progress``). ``on_batch(k, n, batch_id)`` is called as the k-th
    of n starts; ``grouped``: count late groups (the window's) without ``group_by`` columns."""
    batches = list(read_batches(spark, prepared, opts))
    with spark_errors("counting the rows of the batches"):
        counts = count_batches(batches, group_by, grouped)
    out: list[ReplaySummary] = []
    for index, rb in enumerate(batches, start=1):
        if on_batch is not None:
            on_batch(index, len(batches), rb.batch_id)
        sink(rb.kept(opts.keep), rb.batch_id)
        got = counts[rb.batch_id]
        src = rb.plan.sources[0] if rb.plan.sources else None
        late, on_time = got["late_rows"], got["on_time_rows"]
        windowed = None if late is None or on_time is None else late + on_time
        kept = {"all": got["rows"] if windowed is None else windowed, "late": got["late_rows"],
                "on_time": got["on_time_rows"]}[opts.keep]
        out.append(ReplaySummary(
            batch=rb.batch_id,
            committed=rb.plan.committed,
            watermark_ms=rb.plan.watermark_ms,
            late_watermark_ms=rb.plan.late_watermark_ms,
            source_id=src.source_id if src else None,
            files=len(src.files) - len(rb.missing) if src and kind_named(src.kind) in (FILE, DELTA) else None,
            missing_files=len(rb.missing),
            rows=got["rows"], late_rows=got["late_rows"], on_time_rows=got["on_time_rows"], late_groups=got["late_groups"],
            kept_rows=kept,
        ))
    close = getattr(sink, "close", None)
    if close is not None:
        close()
    if ckpt is not None and ckpt.operators:
        from wmcheck.statestore.spark.operator_late import operator_late_rows

        out = [replace(row, operators=ops) for row, ops in zip(out, operator_late_rows(ckpt, out, progress))]
    return out
