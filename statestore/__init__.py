"""Spark-backed features: the state reader and batch replay (need pyspark).

``read_state`` and ``older_than_watermark`` are loaded on first use, so importing this package
does not import pyspark.
"""
from __future__ import annotations

from typing import Any

__all__ = ["read_state", "older_than_watermark"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from wmcheck.statestore.spark import reader

        return getattr(reader, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
