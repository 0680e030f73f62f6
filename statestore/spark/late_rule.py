"""Spark's late-row rule for a replay: a row is late when its event time (its window's end, when windowed) is
at or before the watermark (``WatermarkSupport.watermarkExpression``)."""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from wmcheck.checkpoint.errors import CheckpointError, arg
from wmcheck.checkpoint.timeutil import parse_duration_ms

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def parse_window(text: str) -> tuple[int, int]:
    """``DURATION[,SLIDE]`` -> (duration ms, slide ms)."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) > 2 or not all(parts):
        raise CheckpointError(f"cannot read {arg('window')} {text!r}", param="window",
                              hint='write DURATION[,SLIDE], e.g. "10 minutes" or "10 minutes,5 minutes"')
    duration = parse_duration_ms(parts[0])
    slide = parse_duration_ms(parts[1]) if len(parts) == 2 else duration
    if duration <= 0 or slide <= 0 or slide > duration:
        raise CheckpointError(f"{arg('window', repr(text))}: need 0 < slide <= duration", hint="as Spark's window() requires",
                              param="window")
    return duration, slide


def watermark_literal(watermark_ms: int, type_name: str) -> "Column":
    """The watermark as a literal of the event-time type (Spark compares the internal microseconds)."""
    from pyspark.sql import functions as F

    if type_name == "timestamp_ntz":
        wall = datetime(1970, 1, 1) + timedelta(milliseconds=watermark_ms)
        return F.expr(f"TIMESTAMP_NTZ '{wall.isoformat(sep=' ', timespec='microseconds')}'")
    return F.expr(f"timestamp_millis({int(watermark_ms)})")


def with_lateness(df: "DataFrame", event_time: str, watermark_ms: int, window: str | None = None) -> tuple["DataFrame", "Column"]:
    """``df`` (with a ``window`` column when windowed) and the predicate of Spark's late rows.

    Late means ``event_time <= watermark`` (``window.end <= watermark`` when windowed), exactly
    ``WatermarkSupport.watermarkExpression``; a null event time is never late.
    """
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    try:
        field_type = df.select(F.col(event_time)).schema.fields[0].dataType.typeName()
    except AnalysisException:
        raise CheckpointError(f"{arg('event_time')} column {event_time!r} is not in the input ({', '.join(df.columns) or 'no columns'})",
                              hint=f"pass the column the query's withWatermark used, and {arg('schema')} if it was declared",
                              param="event_time") from None
    if field_type not in ("timestamp", "timestamp_ntz"):
        raise CheckpointError(f"{arg('event_time')} column {event_time!r} is {field_type}, not a timestamp", param="event_time",
                              hint=f"pass {arg('schema')} with the query's schema (e.g. 'id STRING, ts TIMESTAMP') so it is read as one")
    bound = F.col(event_time)
    if window is not None:
        if "window" in df.columns:
            raise CheckpointError("the input already has a column named 'window'", hint=f"replay without {arg('window')}", param="window")
        duration, slide = parse_window(window)
        df = df.withColumn("window", F.window(bound, f"{duration} milliseconds", f"{slide} milliseconds"))
        bound = F.col("window.end")
    return df, F.coalesce(bound <= watermark_literal(watermark_ms, field_type), F.lit(False))
