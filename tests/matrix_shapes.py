"""The chained stateful shapes of the per-operator acceptance matrix (tests/test_matrix_spark.py), run in the test
session's own Spark (tests/conftest.py's ``spark``, whose event log records every batch's plan).

Each shape is small: json files of ``id STRING, ts TIMESTAMP, v INT`` (one file a batch from every source, read with
``maxFilesPerTrigger`` 1 under an availableNow trigger), 2 shuffle partitions, a 10 s watermark (20 s on a second
source), a few rows behind the watermark in the later batches.
"""
from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

BASE_S = 1704067200  # 2024-01-01T00:00:00Z
SCHEMA = "id STRING, ts TIMESTAMP, v INT"
ONE = [[("a", 5), ("b", 8)], [("a", 25), ("c", 22)], [("b", 3), ("a", 40)], [("c", 12), ("d", 45)],
       [("a", 60), ("b", 20)]]
"""One source, a file a batch (seconds after BASE): b@3 (batch 2), c@12 (3) and b@20 (4) are behind the watermark."""
LEFT = [[("a", 5), ("b", 8)], [("a", 25)], [("b", 3), ("a", 40)], [("c", 50)], [("a", 62), ("b", 20)]]
RIGHT = [[("a", 6)], [("a", 27), ("b", 9)], [("a", 41), ("c", 2)], [("c", 51)], [("a", 61), ("d", 30)]]


@dataclass(frozen=True)
class Shape:
    name: str
    description: str
    query: Callable  # (spark, input_dir) -> streaming DataFrame
    inputs: dict[str, list[list[tuple[str, int]]]]
    conf: dict[str, str] = field(default_factory=dict)
    output_mode: str = "append"


@dataclass(frozen=True)
class ShapeRun:
    shape: Shape
    root: Path
    checkpoint: Path
    query_id: str
    reports: list[dict]
    """Spark's progress reports (``StreamingQueryProgress.json``), in order."""


def _events(spark, location: str, delay: str = "10 seconds", prefix: str = ""):
    from pyspark.sql import functions as F

    df = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(location)
    if prefix:
        df = df.select(F.col("id").alias(f"{prefix}_id"), F.col("ts").alias(f"{prefix}_ts"), F.col("v").alias(f"{prefix}_v"))
    return df.withWatermark(f"{prefix}_ts" if prefix else "ts", delay)


def _window_count(df, column: str = "ts"):
    from pyspark.sql import functions as F

    return df.groupBy(F.window(column, "10 seconds")).agg(F.count("*").alias("n"))


def _interval_join(spark, input_dir: str, how: str):
    from pyspark.sql import functions as F

    return _events(spark, f"{input_dir}/left", prefix="l").join(
        _events(spark, f"{input_dir}/right", prefix="r"),
        F.expr("l_id = r_id AND r_ts >= l_ts - INTERVAL 5 SECONDS AND r_ts <= l_ts + INTERVAL 5 SECONDS"), how)


def inner_join_dedup(spark, input_dir):
    return _interval_join(spark, input_dir, "inner").select("l_id", "l_ts").dropDuplicates(["l_id", "l_ts"])


def outer_join_agg(spark, input_dir):
    return _window_count(_interval_join(spark, input_dir, "leftOuter"), "l_ts")


def _pandas_state(spark, input_dir, timeout: str):
    import pandas as pd

    def passthrough(key, pdfs, state):
        if state.hasTimedOut:
            state.remove()
            return
        last_ms = state.get[0] if state.exists else 0
        for pdf in pdfs:
            last_ms = max(last_ms, int(pd.Timestamp(pdf["ts"].max()).value // 1_000_000))
            yield pdf[["id", "ts"]]
        state.update((last_ms,))
        if timeout == "EventTimeTimeout":
            state.setTimeoutTimestamp(max(last_ms, state.getCurrentWatermarkMs()) + 10_000)

    return _events(spark, f"{input_dir}/in").groupBy("id").applyInPandasWithState(
        passthrough, outputStructType="id STRING, ts TIMESTAMP", stateStructType="last_ms LONG", outputMode="append",
        timeoutConf=timeout)


def pandas_no_timeout_agg(spark, input_dir):
    # applyInPandasWithState passes no watermark on: an aggregation in append mode after it needs a withWatermark
    return _window_count(_pandas_state(spark, input_dir, "NoTimeout").withWatermark("ts", "10 seconds"))


def pandas_event_timeout_agg(spark, input_dir):
    return _window_count(_pandas_state(spark, input_dir, "EventTimeTimeout").withWatermark("ts", "10 seconds"))


def tws_timers_agg(spark, input_dir):
    import pandas as pd
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    class Expiring(StatefulProcessor):
        """Passes rows on; event-time timers at the watermark and 10 s after each row of an id forget the id."""

        def init(self, handle):
            self.handle = handle
            self.rows = handle.getValueState("rows", "rows LONG")

        def handleInputRows(self, key, rows, timerValues):
            count = self.rows.get()[0] if self.rows.exists() else 0
            out = [pdf[["id", "ts"]] for pdf in rows]
            count += sum(len(pdf) for pdf in out)
            self.rows.update((count,))
            wm = timerValues.getCurrentWatermarkInMs()
            for pdf in out:
                for ts in pdf["ts"]:
                    # one at exactly the watermark (it fires in this batch) and one 10 s after the row, whole seconds
                    # like every watermark: some equal a later batch's eviction watermark, which fires them
                    self.handle.registerTimer(wm)
                    self.handle.registerTimer(max(int(pd.Timestamp(ts).value // 1_000_000), wm) + 10_000)
            yield pd.concat(out)

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            self.rows.clear()
            return iter([])

    tagged = _events(spark, f"{input_dir}/in").groupBy("id").transformWithStateInPandas(
        statefulProcessor=Expiring(), outputStructType="id STRING, ts TIMESTAMP", outputMode="Append",
        timeMode="EventTime", eventTimeColumnName="ts")
    return _window_count(tagged)


def union_dedup_agg(spark, input_dir):
    both = _events(spark, f"{input_dir}/left").unionByName(_events(spark, f"{input_dir}/right", "20 seconds"))
    return _window_count(both.dropDuplicates(["id", "ts"]))


TWO = {"left": LEFT, "right": RIGHT}
TWS_CONF = {"spark.sql.streaming.stateStore.providerClass":
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"}
SHAPES = [
    Shape("inner_join_dedup", "inner interval join (r_ts within 5 s of l_ts) -> dropDuplicates(l_id, l_ts)",
          inner_join_dedup, TWO),
    Shape("outer_join_agg", "left outer interval join -> count per 10 s window of l_ts", outer_join_agg, TWO),
    Shape("pandas_no_timeout_agg", "applyInPandasWithState (NoTimeout) -> withWatermark -> count per 10 s window", pandas_no_timeout_agg,
          {"in": ONE}),
    Shape("pandas_event_timeout_agg", "applyInPandasWithState (EventTimeTimeout) -> withWatermark -> count per 10 s window",
          pandas_event_timeout_agg, {"in": ONE}, {"spark.sql.streaming.statefulOperator.checkCorrectness.enabled": "false"}),
    Shape("tws_timers_agg", "transformWithStateInPandas (EventTime, timers at the watermark and 10 s after each row) -> count per 10 s window",
          tws_timers_agg, {"in": ONE}, TWS_CONF),
    Shape("union_min_dedup_agg", "union of two sources (10 s and 20 s watermarks, policy min) -> dropDuplicates -> "
          "count per 10 s window", union_dedup_agg, TWO, {"spark.sql.streaming.multipleWatermarkPolicy": "min"}),
    Shape("union_max_dedup_agg", "the same under multipleWatermarkPolicy max", union_dedup_agg, TWO,
          {"spark.sql.streaming.multipleWatermarkPolicy": "max"}),
]


def write_inputs(shape: Shape, input_dir: Path) -> None:
    """One file a batch per source, modification times in batch order (the file source reads the oldest first)."""
    for sub, files in shape.inputs.items():
        (input_dir / sub).mkdir(parents=True)
        for i, rows in enumerate(files):
            path = input_dir / sub / f"{i:02d}.json"
            path.write_text("".join(json.dumps({"id": k, "ts": dt.datetime.fromtimestamp(BASE_S + s, dt.timezone.utc)
                                                .strftime("%Y-%m-%dT%H:%M:%SZ"), "v": n})
                                    + "\n" for n, (k, s) in enumerate(rows)))
            os.utime(path, (BASE_S + i, BASE_S + i))


def run_shape(spark, shape: Shape, root: Path) -> ShapeRun:
    """Run the shape's query over all its input (availableNow) and keep Spark's progress reports."""
    write_inputs(shape, root / "input")
    conf = {"spark.sql.shuffle.partitions": "2", **shape.conf}
    before = {k: spark.conf.get(k, None) for k in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        query = (shape.query(spark, str(root / "input")).writeStream.format("json").outputMode(shape.output_mode)
                 .option("checkpointLocation", str(root / "checkpoint")).option("path", str(root / "output"))
                 .trigger(availableNow=True).start())
        query.awaitTermination(300)
    finally:
        for key, value in before.items():
            spark.conf.unset(key) if value is None else spark.conf.set(key, value)
    if query.exception() is not None:
        raise RuntimeError(f"{shape.name}: {query.exception()}")
    reports = [json.loads(p.json) for p in query.recentProgress]
    return ShapeRun(shape, root, root / "checkpoint", query.id, reports)
