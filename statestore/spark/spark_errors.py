"""Spark's failures during a replay as one clear CheckpointError (Spark's own error stays chained for --debug)."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from wmcheck.checkpoint.errors import CheckpointError, arg
from wmcheck.checkpoint.kafka_retention import data_lost


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def condition(exc: BaseException) -> str:
    for name in ("getCondition", "getErrorClass"):
        getter = getattr(exc, name, None)
        if getter is not None:
            try:
                return getter() or ""
            except Exception:  # noqa: BLE001 - a JVM-less error has no class
                return ""
    return ""


@contextmanager
def spark_errors(what: str) -> Iterator[None]:
    """Turn a Spark failure into one clear CheckpointError (the original stays chained for --debug)."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    try:
        yield
    except CheckpointError:
        raise
    except (PySparkException, Py4JError) as exc:
        lost = data_lost(exc)
        if lost is not None:
            raise lost from exc
        raise CheckpointError(f"Spark failed {what}: {first_line(exc)}",
                              hint=f"check {arg('source_format')}, {arg('schema')} and {arg('options')}; {arg('debug')} shows Spark's error") from exc
