"""State through Spark's own state reader (``format("statestore")``, Spark >= 4.0), judged against the watermark.

Which state and watermark (``batch``): :mod:`.targets`. Reader quirks handled here: a join must be
read by ``joinSide`` or ``storeName`` (the default read fails with STDS_FAILED_TO_READ_STATE_SCHEMA), transformWithState
needs ``stateVarName`` per variable and its timers ``readRegisteredTimers`` (``stateVarName`` of the
timer column family fails on RocksDB), unknown operators and stores fail with misleading errors
(so they are checked first, from the checkpoint), and HDFS-backed stores need ``spark.streams``.
"""
from __future__ import annotations

import re
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

from wmcheck.checkpoint.errors import CheckpointError, SparkUnavailableError, arg
from wmcheck.checkpoint.model import Checkpoint
from wmcheck.checkpoint.records import dataclass
from wmcheck.statestore.discovery import Store, only_one
from wmcheck.statestore.eviction import Eviction, store_eviction
from wmcheck.statestore.formats.schema import StructField, StructType
from wmcheck.statestore.plan import StatePlan, plan_state
from wmcheck.statestore.spark.relocated_view import reader_location
from wmcheck.statestore.targets import Target, as_checkpoint, require_known

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from wmcheck.checkpoint.watermarks.progress import QueryProgress

CHECKPOINT_FORMAT = "spark.sql.streaming.stateStore.checkpointFormatVersion"
ROW_COLUMNS = ["operator_id", "store", "partition_id", "key", "value", "event_time_ms"]
_CONDITION = re.compile(r"\[([A-Z][A-Z0-9_.]+)\]")
_SPARK_LOCAL = re.compile(r"(?:file:)?/\S*?/spark-[0-9a-f-]{36}/(?:[^\s/]*/)*([^\s/,]+)")
"""A file in a Spark executor's local directory (``/tmp/spark-<uuid>/StateStoreId(...)/workingDir-<uuid>/000008.sst``,
where RocksDB's files are copied to): its name is kept."""


# -- Spark errors -----------------------------------------------------------------------------


def _failure_text(exc: BaseException) -> str:
    """The most specific message: a JVM exception's root cause, else the exception's first line."""
    java = getattr(exc, "java_exception", None)
    text = str(exc)
    if java is not None:
        cause, seen = java, 0
        while cause.getCause() is not None and seen < 20:
            cause, seen = cause.getCause(), seen + 1
        text = cause.toString()
    text = text.strip()
    return text.splitlines()[0] if text else type(exc).__name__


@contextmanager
def spark_errors(store: Store, tgt: Target, location: str) -> Iterator[None]:
    """Spark's failures while reading one store as one clear CheckpointError (chained for --debug);
    paths in Spark's message are shown relative to the checkpoint ``location``."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    try:
        yield
    except (PySparkException, Py4JError) as exc:
        text = _failure_text(exc)
        for prefix in (f"file:{location}/", f"{location}/"):
            text = text.replace(prefix, "")
        text = _SPARK_LOCAL.sub(r"Spark's local copy \1", text)
        match = _CONDITION.search(text)
        condition = match[1] if match else ""
        what = f"operator {store.operator_id} {store.name!r} at batch {tgt.batch} (state of batch {tgt.state_batch_id})"
        if "STATE_STORE" in condition or "FileNotFoundException" in text or "ChecksumException" in text:
            hint = ("the state files of that version were purged (minBatchesToRetain) or are damaged: wmcheck check CKPT "
                    "names the batch to rewind to")
        elif condition.startswith(("STDS_COMMITTED_BATCH_UNAVAILABLE", "STDS_OFFSET")):
            hint = "that batch's commit or offsets file is missing: wmcheck batches CKPT"
        else:
            hint = f"{arg('debug')} shows Spark's full error"
        raise CheckpointError(f"Spark cannot read the state of {what}: {text[:400]}", hint=hint) from exc


# -- reading ----------------------------------------------------------------------------------


def _require_reader(spark: "SparkSession") -> None:
    if int(spark.version.split(".")[0]) < 4:
        raise SparkUnavailableError(f"Spark {spark.version} has no state reader (format statestore came with Spark 4.0)",
                                    hint="pip install 'wmcheck[spark]' (pyspark 4.0 or newer)")


@contextmanager
def _session_conf(spark: "SparkSession", key: str, value: str) -> Iterator[None]:
    """Set a SQL conf for a moment; the previous value (or none) comes back."""
    before = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


def load(spark: "SparkSession", ckpt: Checkpoint, store: Store, tgt: Target) -> "DataFrame":
    """Spark's state reader for one store at ``tgt`` (lazy: rows are read by the first action).

    The reader takes the checkpoint format (file names with unique ids) from the session, not the
    checkpoint: it is set, while the reader resolves, from the commit that wrote the state."""
    _require_reader(spark)
    reader = spark.read.format("statestore").option("batchId", str(tgt.state_batch_id))
    for key, value in store.options.items():
        reader = reader.option(key, value)
    version = "2" if ckpt.commit(tgt.state_batch_id).state_unique_ids else "1"
    location = reader_location(ckpt)
    with spark_errors(store, tgt, location), _session_conf(spark, CHECKPOINT_FORMAT, version):
        return reader.load(location)


def _from_spark(data_type: Any) -> Any:
    """A pyspark data type as :mod:`wmcheck.statestore.formats.schema` types (structs; others by name)."""
    from pyspark.sql.types import StructType as SparkStruct

    if isinstance(data_type, SparkStruct):
        return StructType(tuple(StructField(f.name, _from_spark(f.dataType), f.nullable, f.metadata) for f in data_type.fields))
    return data_type.simpleString()


def _field_type(schema: Any, path: tuple[str, ...]) -> str | None:
    """The simple type name at ``path`` of a pyspark schema (None when absent)."""
    current = schema
    for name in path:
        names = getattr(current, "names", None) or []
        if name not in names:
            return None
        current = current[name].dataType
    return current.simpleString()


def eviction_for(ckpt: Checkpoint, store: Store, df: "DataFrame") -> Eviction:
    """The eviction rule of ``store`` for the reader's DataFrame ``df`` (see :func:`store_eviction`)."""
    fields = {f.name: f.dataType for f in df.schema.fields}
    key, value = fields.get("key"), fields.get("value")
    return store_eviction(ckpt, store, _from_spark(key) if key else None, _from_spark(value) if value else None,
                          lambda path: _field_type(df.schema, path) is not None)


def _col(path: tuple[str, ...]) -> "Column":
    from pyspark.sql import functions as F

    return F.col(".".join(f"`{p}`" for p in path))


def time_columns(df: "DataFrame", rule: Eviction, watermark_ms: int) -> tuple["Column", "Column"]:
    """``(event_time_ms, older)``: the eviction time in ms (null when unset) and whether the watermark evicts it."""
    from pyspark.sql import functions as F

    if rule.column is None:
        return F.lit(None).cast("long"), F.lit(False)
    raw = _col(rule.column)
    native = F.unix_micros(raw) if _field_type(df.schema, rule.column) == "timestamp" else raw.cast("long")
    if rule.unset is not None:
        native = F.when(native != F.lit(rule.unset), native)
    threshold = F.lit(watermark_ms * (1000 if rule.unit == "us" else 1))
    older = F.coalesce(native < threshold if rule.strict else native <= threshold, F.lit(False))
    ms = F.floor(native / F.lit(1000)) if rule.unit == "us" else native
    return ms.cast("long"), older


def state_rows(df: "DataFrame", store: Store, rule: Eviction, watermark_ms: int) -> "DataFrame":
    """The reader's rows as ``operator_id, store, partition_id, key, value, event_time_ms, older``;
    ``value`` gathers the non-key columns when the reader has no ``value`` (transformWithState lists, maps, timers)."""
    from pyspark.sql import functions as F

    rest = [c for c in df.columns if c not in ("key", "partition_id")]
    value = F.col("value") if rest == ["value"] else F.struct(*[F.col(f"`{c}`") for c in rest])
    event_ms, older = time_columns(df, rule, watermark_ms)
    return df.select(
        F.lit(store.operator_id).alias("operator_id"), F.lit(store.name).alias("store"), "partition_id",
        F.col("key"), value.alias("value"), event_ms.alias("event_time_ms"), older.alias("older"),
    )


@dataclass(frozen=True)
class StoreRead:
    """One store read at a target: the reader's DataFrame and its eviction rule."""

    store: Store
    rule: Eviction
    raw: "DataFrame"
    target: Target
    location: str
    """The checkpoint as Spark reads it."""

    def rows(self) -> "DataFrame":
        return state_rows(self.raw, self.store, self.rule, self.target.watermark_ms)

    def older(self) -> "DataFrame":
        """The rows the watermark evicts (empty when the store has no event-time column)."""
        return self.rows().filter("older").drop("older")


def read_stores(spark: "SparkSession", ckpt: Checkpoint | str, operator: int | None = None, store: str | None = None,
                batch: int | None = None, watermark_ms: int | None = None,
                progress: "QueryProgress | None" = None) -> list[StoreRead]:
    """Every selected store (see :func:`~wmcheck.statestore.discovery.select`) read at one batch, each judged by its
    operator's own eviction watermark (``progress``: the event log, where the plan decides it)."""
    return read_planned(spark, plan_state(as_checkpoint(ckpt), operator, store, None, batch, watermark_ms, progress, "spark"))


def read_planned(spark: "SparkSession", plan: StatePlan) -> list[StoreRead]:
    """Every store of ``plan`` read by Spark's state reader at its target."""
    out = []
    for s, tgt in zip(plan.stores, plan.targets):
        raw = load(spark, plan.ckpt, s, tgt)
        out.append(StoreRead(s, eviction_for(plan.ckpt, s, raw), raw, tgt, reader_location(plan.ckpt)))
    return out


def read_state(spark: "SparkSession", ckpt: Checkpoint | str, operator: int = 0, store: str | None = None,
               batch: int | None = None) -> "DataFrame":
    """Spark's state reader for one store (a store name, join side or state variable) of ``operator``,
    as ``batch`` starts (default: the next batch)."""
    return only_one(read_stores(spark, ckpt, operator, store, batch), operator, False).raw


def older_than_watermark(spark: "SparkSession", ckpt: Checkpoint | str, operator: int = 0, store: str | None = None,
                         batch: int | None = None, watermark_ms: int | None = None,
                         progress: "QueryProgress | None" = None) -> "DataFrame":
    """The state rows whose eviction time the operator's watermark has reached, with ``event_time_ms``.

    Columns ``operator_id, store, partition_id, key, value, event_time_ms``. The watermark is the operator's own
    eviction watermark at ``batch`` (default: the next batch); ``watermark_ms`` is a what-if global watermark, from
    which the operator's own follows. Without ``store``, the operator's only store with an event-time column (e.g.
    transformWithState's timers). An operator whose watermark is unknown (a join upstream, no event log in
    ``progress``) is refused.
    """
    read = only_one(read_stores(spark, ckpt, operator, store, batch, watermark_ms, progress), operator, True)
    require_known([read.store], [read.target])
    return read.older()
