"""The ``spark`` state engine: Spark's own state reader (:mod:`wmcheck.statestore.spark.reader`) read, summarised and turned
into Arrow by a running SparkSession."""
from __future__ import annotations

from datetime import timezone, tzinfo
from typing import TYPE_CHECKING, Iterator, Sequence

from wmcheck.checkpoint.model import Checkpoint
from wmcheck.checkpoint.records import dataclass
from wmcheck.statestore.output.parquet_parts import ParquetPart, encode_part
from wmcheck.statestore.plan import StatePlan, plan_state
from wmcheck.statestore.spark.reader import StoreRead, read_planned, spark_errors
from wmcheck.statestore.summary import StateSummary, StoreSummary, state_summary, summary_of_groups
from wmcheck.statestore.targets import EDGES, as_checkpoint

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, SparkSession

    from wmcheck.checkpoint.watermarks.progress import QueryProgress


def _bucket(delta: Column) -> Column:
    from pyspark.sql import functions as F

    expr = F.lit(len(EDGES))
    for i in reversed(range(len(EDGES))):
        expr = F.when(delta <= F.lit(EDGES[i]), F.lit(i)).otherwise(expr)
    return F.when(delta.isNotNull(), expr)


def store_summary(read: StoreRead, tz: tzinfo = timezone.utc) -> StoreSummary:
    """Rows per partition, the eviction rule, how many rows the watermark evicts, the oldest event time, a histogram."""
    from pyspark.sql import functions as F

    wm = read.target.watermark_ms
    rows = read.rows()
    delta = F.col("event_time_ms") - F.lit(wm)
    with spark_errors(read.store, read.target, read.location):
        stats = (rows.groupBy("partition_id", _bucket(delta).alias("bucket"))
                 .agg(F.count(F.lit(1)).alias("n"), F.sum(F.col("older").cast("long")).alias("older"),
                      F.min("event_time_ms").alias("oldest"))
                 .collect())
    groups = [(r["partition_id"], r["bucket"], r["n"], r["older"], r["oldest"]) for r in stats]
    return summary_of_groups(read.store, read.rule, read.target, groups, tz)


def summarize(spark: SparkSession, ckpt: Checkpoint | str, operator: int | None = None, store: str | None = None,
              batch: int | None = None, watermark_ms: int | None = None, tz: tzinfo = timezone.utc,
              progress: QueryProgress | None = None) -> StateSummary:
    """Every selected store of every stateful operator: rows, eviction rule, rows older than its operator's watermark."""
    return summarize_planned(spark, plan_state(as_checkpoint(ckpt), operator, store, None, batch, watermark_ms, progress,
                                               "spark"), tz)


def summarize_planned(spark: SparkSession, plan: StatePlan, tz: tzinfo = timezone.utc) -> StateSummary:
    """:func:`summarize` of the stores ``plan`` names."""
    reads = read_planned(spark, plan)
    return state_summary(plan.ckpt, plan.target, tuple(store_summary(r, tz) for r in reads), "spark", tz)


def older_tables(reads: Sequence[StoreRead], limit: int | None = None) -> list["pa.Table"]:
    """The evicted rows of each store as an Arrow table (the ``limit`` oldest of each when given).

    A store without an event-time column gives an empty table (Spark plans its read as empty)."""
    tables = []
    for read in reads:
        df = read.older()
        if limit is not None:
            df = df.orderBy("event_time_ms", "partition_id").limit(limit)
        with spark_errors(read.store, read.target, read.location):
            tables.append(df.toArrow())
    return tables


@dataclass(frozen=True)
class SparkEngine:
    """The :class:`~.engines.StateEngine` reading through ``spark``."""

    spark: "SparkSession"
    name = "spark"

    def read_stores(self, plan: StatePlan) -> list[StoreRead]:
        return read_planned(self.spark, plan)

    def summarize(self, plan: StatePlan, tz: tzinfo = timezone.utc) -> StateSummary:
        return summarize_planned(self.spark, plan, tz)

    def older_tables(self, reads: Sequence[StoreRead], limit: int | None = None) -> list["pa.Table"]:
        return older_tables(reads, limit)

    def older_batches(self, reads: Sequence[StoreRead]) -> Iterator[tuple[int, "pa.Table"]]:
        return enumerate(older_tables(reads))

    def older_parts(self, reads: Sequence[StoreRead]) -> Iterator[tuple[int, ParquetPart]]:
        return ((index, encode_part(table)) for index, table in self.older_batches(reads))
