"""The state engines behind one protocol: ``python`` (the state files read in Python, no JVM) and
``spark`` (Spark's own state reader); ``auto`` takes python when it reads every selected store.

The command (``wmcheck state``) and the Python API below both plan the read once (:func:`.plan.plan_state`: the
stores, their targets and the engine) and then only talk to :class:`StateEngine`: the python engine returns Arrow
tables, Spark DataFrames.
"""
from __future__ import annotations

from datetime import timezone, tzinfo
from typing import TYPE_CHECKING, Any, Iterator, Protocol, Sequence

from wmcheck.checkpoint.errors import CheckpointError
from wmcheck.checkpoint.model import Checkpoint

from .discovery import Store, only_one
from .plan import EngineChoice, EngineName, StatePlan, plan_state
from .targets import Target, as_checkpoint, require_known

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

    from wmcheck.checkpoint.watermarks.progress import QueryProgress
    from wmcheck.statestore.output.parquet_parts import ParquetPart

    from .eviction import Eviction
    from .summary import StateSummary

class StoreReadLike(Protocol):
    """One store read at a target by an engine: its rows (``raw``: the reader's columns, ``older()``: the
    rows the watermark evicts) as the engine's tables."""

    @property
    def store(self) -> Store: ...

    @property
    def rule(self) -> "Eviction": ...

    @property
    def target(self) -> Target: ...

    @property
    def raw(self) -> Any: ...

    def older(self) -> Any: ...


class StateEngine(Protocol):
    """What reads state: both engines answer the same calls with the same results (``summarize`` differs
    only in its ``engine`` field)."""

    @property
    def name(self) -> str: ...

    def read_stores(self, plan: StatePlan) -> Sequence[StoreReadLike]:
        """Every store of ``plan`` read at its target, lazily: rows are read when asked for."""

    def summarize(self, plan: StatePlan, tz: tzinfo = timezone.utc) -> "StateSummary":
        """What ``wmcheck state`` prints of ``plan``'s stores."""

    def older_tables(self, reads: Sequence[Any], limit: int | None = None) -> list["pa.Table"]:
        """The evicted rows of each of ``reads`` as an Arrow table (the ``limit`` oldest of each when given)."""

    def older_batches(self, reads: Sequence[Any]) -> Iterator[tuple[int, "pa.Table"]]:
        """The evicted rows as ``(index in reads, Arrow table)`` batches, in any order, as they are read (each
        store's schema comes at least once, in a table that may be empty)."""

    def older_parts(self, reads: Sequence[Any]) -> Iterator[tuple[int, "ParquetPart"]]:
        """:meth:`older_batches` encoded as Parquet (:func:`wmcheck.statestore.output.rows.write_parts` writes them as one file)."""


def engine_for(name: EngineName, spark: "SparkSession | None" = None, jobs: int | None = None,
               max_memory: int | None = None) -> StateEngine:
    """The engine called ``name`` (``python`` or ``spark``; Spark's needs the session). The python engine
    reads with ``jobs`` worker processes (default: in this process) within ``max_memory`` bytes (default: no budget)."""
    if name == "python":
        from wmcheck.statestore.engine.python_jobs import PythonEngine

        return PythonEngine(jobs, max_memory)
    if spark is None:
        raise CheckpointError(f"the {name} engine needs a SparkSession here", hint="pass spark=..., or engine='python'")
    from wmcheck.statestore.spark.spark_engine import SparkEngine

    return SparkEngine(spark)


def _planned(ckpt: Checkpoint, operator: int | None, store: str | None, batch: int | None, watermark_ms: int | None,
             progress: "QueryProgress | None", engine: EngineChoice, spark: "SparkSession | None",
             older: bool = False) -> tuple[StatePlan, StateEngine]:
    plan = plan_state(ckpt, operator, store, None, batch, watermark_ms, progress, engine, older)
    return plan, engine_for(plan.engine, spark)


def summarize(ckpt: Checkpoint | str, operator: int | None = None, store: str | None = None, batch: int | None = None,
              watermark_ms: int | None = None, tz: tzinfo = timezone.utc, engine: EngineChoice = "auto",
              spark: "SparkSession | None" = None, progress: "QueryProgress | None" = None) -> "StateSummary":
    """What ``wmcheck state`` prints (``engine`` names the engine that read it); ``progress`` (Spark's event log)
    gives operators downstream of a join their own watermarks."""
    plan, eng = _planned(as_checkpoint(ckpt), operator, store, batch, watermark_ms, progress, engine, spark)
    return eng.summarize(plan, tz)


def read_state(ckpt: Checkpoint | str, operator: int = 0, store: str | None = None, batch: int | None = None,
               engine: EngineChoice = "auto", spark: "SparkSession | None" = None) -> Any:
    """The reader's rows of one store (a store name, join side or state variable) of ``operator``:
    an Arrow table (python engine) or Spark's DataFrame."""
    plan, eng = _planned(as_checkpoint(ckpt), operator, store, batch, None, None, engine, spark)
    return only_one(list(eng.read_stores(plan)), operator, False).raw


def older_than_watermark(ckpt: Checkpoint | str, operator: int = 0, store: str | None = None, batch: int | None = None,
                         watermark_ms: int | None = None, engine: EngineChoice = "auto", spark: "SparkSession | None" = None,
                         progress: "QueryProgress | None" = None) -> Any:
    """The rows the operator's own watermark evicts, with ``event_time_ms`` (see :func:`wmcheck.statestore.spark.reader.older_than_watermark`)."""
    plan, eng = _planned(as_checkpoint(ckpt), operator, store, batch, watermark_ms, progress, engine, spark)
    read = only_one(list(eng.read_stores(plan)), operator, True)
    require_known([read.store], [read.target])
    return read.older()
