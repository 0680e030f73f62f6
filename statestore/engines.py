"""Choosing the state engine: ``python`` (the state files read in Python, no JVM) or ``spark``
(Spark's own state reader); ``auto`` takes python when it reads every selected store.

The Python API of both, by ``engine=``: the python engine returns Arrow tables, Spark DataFrames.
"""
from __future__ import annotations

from datetime import timezone, tzinfo
from typing import TYPE_CHECKING, Any

from wmcheck.checkpoint.errors import CheckpointError, UnsupportedError
from wmcheck.checkpoint.model import Checkpoint

from .reader import as_checkpoint

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from .summary import StateSummary

ENGINES = ("auto", "python", "spark")


def choose(ckpt: Checkpoint, operator: int | None, store: str | None, kind: str | None, engine: str) -> tuple[str, str | None]:
    """``(engine, note)``: the engine to read the selection with and, when ``auto`` falls back to
    Spark, why (the python engine's first unsupported store). Nothing is read here."""
    if engine not in ENGINES:
        raise CheckpointError(f"unknown state engine {engine!r}", hint=f"use one of {', '.join(ENGINES)}")
    if engine == "spark":
        return "spark", None
    from .python_engine import plans

    try:
        plans(ckpt, operator, store, kind)
    except UnsupportedError as exc:
        if engine == "python":
            raise
        return "spark", f"reading with Spark: {exc.message}"
    return "python", None


def _spark_for(engine: str, spark: "SparkSession | None") -> "SparkSession":
    if spark is None:
        raise CheckpointError(f"the {engine} engine needs a SparkSession here", hint="pass spark=..., or engine='python'")
    return spark


def summarize(ckpt: Checkpoint | str, operator: int | None = None, store: str | None = None, batch: int | None = None,
              watermark_ms: int | None = None, tz: tzinfo = timezone.utc, engine: str = "auto",
              spark: "SparkSession | None" = None) -> "StateSummary":
    """What ``wmcheck state`` prints (``engine`` names the engine that read it)."""
    ckpt = as_checkpoint(ckpt)
    chosen, _ = choose(ckpt, operator, store, None, engine)
    if chosen == "python":
        from . import python_engine

        return python_engine.summarize(ckpt, operator, store, batch, watermark_ms, tz)
    from . import summary

    return summary.summarize(_spark_for(chosen, spark), ckpt, operator, store, batch, watermark_ms, tz)


def read_state(ckpt: Checkpoint | str, operator: int = 0, store: str | None = None, batch: int | None = None,
               engine: str = "auto", spark: "SparkSession | None" = None) -> Any:
    """The reader's rows of one store (a store name, join side or state variable) of ``operator``:
    an Arrow table (python engine) or Spark's DataFrame."""
    ckpt = as_checkpoint(ckpt)
    chosen, _ = choose(ckpt, operator, store, None, engine)
    from . import reader

    if chosen == "spark":
        return reader.read_state(_spark_for(chosen, spark), ckpt, operator, store, batch)
    from . import python_engine

    return reader.only_one(python_engine.read_stores(ckpt, operator, store, batch), operator, False).raw


def older_than_watermark(ckpt: Checkpoint | str, operator: int = 0, store: str | None = None, batch: int | None = None,
                         watermark_ms: int | None = None, engine: str = "auto", spark: "SparkSession | None" = None) -> Any:
    """The rows the watermark evicts, with ``event_time_ms`` (see :func:`.reader.older_than_watermark`)."""
    ckpt = as_checkpoint(ckpt)
    chosen, _ = choose(ckpt, operator, store, None, engine)
    from . import reader

    if chosen == "spark":
        return reader.older_than_watermark(_spark_for(chosen, spark), ckpt, operator, store, batch, watermark_ms)
    from . import python_engine

    return reader.only_one(python_engine.read_stores(ckpt, operator, store, batch, watermark_ms), operator, True).older()
