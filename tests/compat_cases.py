"""The compat matrix: query changes from Spark's guide and from what breaks in practice, each the new code of a
fixture's query (``query(spark, input_dir, checkpoint_dir, output_dir) -> DataStreamWriter``, as in
fixtures/queries.py), with the verdict Spark gives it. tests/test_compat_matrix.py runs compat and a real
restart of each (tests/compat_oracle.py) and asserts they agree.

Like fixtures/queries.py, importing this module imports no pyspark: every query imports what it needs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from fixture_modules import fixture_module

QUERIES = fixture_module("queries.py")
RESTARTS, REFUSED = "restarts", "refused"


@dataclass(frozen=True)
class Case:
    """One change: the fixture written by the old code, the new code, and what Spark does with it."""

    fixture: str
    query: Callable[..., Any]
    verdict: str
    error_class: str | None = None
    changes: bool | None = None
    """Whether compat reports changes (output, state, schemas, watermark) for the re-run batch."""
    conf: dict[str, str] = field(default_factory=dict)
    """SQL confs of the new code's session, on top of the fixture's."""
    pending: bool = False
    """Start from the fixture as a crash in its last data batch leaves it (planned, not committed), so that a
    restart re-runs that batch."""


def _events(spark, input_dir, delay="10 seconds", files=1):
    events = (spark.readStream.format("json").schema(QUERIES.SCHEMA).option("maxFilesPerTrigger", files)
              .load(input_dir))
    return events.withWatermark("ts", delay)


def _windowed(events, *extra_keys, aggregates=None):
    from pyspark.sql import functions as F

    aggs = aggregates or [F.count("*").alias("n"), F.sum("v").alias("v_sum")]
    return events.groupBy(F.window("ts", "10 seconds"), "id", *extra_keys).agg(*aggs)


def same_code(spark, input_dir, checkpoint_dir, output_dir):
    return QUERIES.agg_window_hdfs(spark, input_dir, checkpoint_dir, output_dir)


def add_filter(spark, input_dir, checkpoint_dir, output_dir):
    return QUERIES.file_sink(_windowed(_events(spark, input_dir).filter("v % 2 = 0")), checkpoint_dir, output_dir)


def add_projection(spark, input_dir, checkpoint_dir, output_dir):
    from pyspark.sql import functions as F

    counts = _windowed(_events(spark, input_dir)).withColumn("n_twice", F.col("n") * 2)
    return QUERIES.file_sink(counts, checkpoint_dir, output_dir)


def change_grouping_keys(spark, input_dir, checkpoint_dir, output_dir):
    return QUERIES.file_sink(_windowed(_events(spark, input_dir), "v"), checkpoint_dir, output_dir)


def add_aggregate(spark, input_dir, checkpoint_dir, output_dir):
    from pyspark.sql import functions as F

    aggs = [F.count("*").alias("n"), F.sum("v").alias("v_sum"), F.max("v").alias("v_max")]
    return QUERIES.file_sink(_windowed(_events(spark, input_dir), aggregates=aggs), checkpoint_dir, output_dir)


def change_aggregate_type(spark, input_dir, checkpoint_dir, output_dir):
    from pyspark.sql import functions as F

    aggs = [F.count("*").alias("n"), F.sum(F.col("v").cast("double")).alias("v_sum")]
    return QUERIES.file_sink(_windowed(_events(spark, input_dir), aggregates=aggs), checkpoint_dir, output_dir)


def longer_watermark_delay(spark, input_dir, checkpoint_dir, output_dir):
    return QUERIES.file_sink(_windowed(_events(spark, input_dir, "20 seconds")), checkpoint_dir, output_dir)


def add_stateful_operator(spark, input_dir, checkpoint_dir, output_dir):
    events = _events(spark, input_dir).dropDuplicates(["id", "ts"])
    return QUERIES.file_sink(_windowed(events), checkpoint_dir, output_dir)


def remove_stateful_operator(spark, input_dir, checkpoint_dir, output_dir):
    return QUERIES.file_sink(_events(spark, input_dir), checkpoint_dir, output_dir)


def swap_source_path(spark, input_dir, checkpoint_dir, output_dir):
    import os

    moved = os.path.join(os.path.dirname(input_dir), "input_v2")
    os.makedirs(moved, exist_ok=True)
    return QUERIES.file_sink(_windowed(_events(spark, moved)), checkpoint_dir, output_dir)


def more_files_per_trigger(spark, input_dir, checkpoint_dir, output_dir):
    return QUERIES.file_sink(_windowed(_events(spark, input_dir, files=3)), checkpoint_dir, output_dir)


def add_source(spark, input_dir, checkpoint_dir, output_dir):
    import os

    other = os.path.join(os.path.dirname(input_dir), "input_other")
    os.makedirs(other, exist_ok=True)
    events = _events(spark, input_dir).unionByName(_events(spark, other))
    return QUERIES.file_sink(_windowed(events), checkpoint_dir, output_dir)


def update_output_mode(spark, input_dir, checkpoint_dir, output_dir):
    return QUERIES.agg_window_hdfs(spark, input_dir, checkpoint_dir, output_dir).outputMode("update")


def change_dedup_columns(spark, input_dir, checkpoint_dir, output_dir):
    unique = _events(spark, input_dir).dropDuplicates(["id", "ts", "v"])
    return QUERIES.file_sink(unique, checkpoint_dir, output_dir)


def _join(spark, input_dir, checkpoint_dir, output_dir, how="inner", seconds=5):
    from pyspark.sql import functions as F

    def side(sub, prefix):
        return (QUERIES.json_events(spark, f"{input_dir}/{sub}")
                .select(F.col("id").alias(f"{prefix}_id"), F.col("ts").alias(f"{prefix}_ts"), F.col("v").alias(f"{prefix}_v"))
                .withWatermark(f"{prefix}_ts", "10 seconds"))

    condition = (f"l_id = r_id AND r_ts >= l_ts - INTERVAL {seconds} SECONDS "
                 f"AND r_ts <= l_ts + INTERVAL {seconds} SECONDS")
    joined = side("left", "l").join(side("right", "r"), F.expr(condition), how)
    return QUERIES.file_sink(joined, checkpoint_dir, output_dir)


def outer_join(spark, input_dir, checkpoint_dir, output_dir):
    return _join(spark, input_dir, checkpoint_dir, output_dir, how="left_outer")


def wider_join_condition(spark, input_dir, checkpoint_dir, output_dir):
    return _join(spark, input_dir, checkpoint_dir, output_dir, seconds=15)


def min_watermark_policy(spark, input_dir, checkpoint_dir, output_dir):
    return QUERIES.union_two_sources(spark, input_dir, checkpoint_dir, output_dir)


def _sessions(count_schema):
    """tws_pandas's query with the ValueState ``count`` declared as ``count_schema`` (its first field the count)."""

    def query(spark, input_dir, checkpoint_dir, output_dir):
        import pandas as pd
        from pyspark.sql.streaming.stateful_processor import StatefulProcessor

        width = len(count_schema.split(","))

        class SessionProcessor(StatefulProcessor):
            def init(self, handle):
                self.handle = handle
                self.count = handle.getValueState("count", count_schema)
                self.events = handle.getListState("events", "ts TIMESTAMP, v INT")
                self.last = handle.getMapState("last_by_v", "v INT", "ts TIMESTAMP")

            def handleInputRows(self, key, rows, timerValues):
                count = (self.count.get()[0] or 0) if self.count.exists() else 0
                last_ms = 0
                for pdf in rows:
                    for ts, v in zip(pdf["ts"], pdf["v"]):
                        ts = pd.Timestamp(ts)
                        self.events.appendValue((ts.to_pydatetime(), int(v)))
                        self.last.updateValue((int(v) % 2,), (ts.to_pydatetime(),))
                        count += 1
                        last_ms = max(last_ms, int(ts.value // 1_000_000))
                self.count.update((count,) + (None,) * (width - 1))
                for t in list(self.handle.listTimers()):
                    self.handle.deleteTimer(t)
                self.handle.registerTimer(max(last_ms, timerValues.getCurrentWatermarkInMs()) + 10_000)
                return iter([])

            def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
                events = list(self.events.get())
                count = (self.count.get()[0] or 0) if self.count.exists() else 0
                self.count.clear()
                self.events.clear()
                self.last.clear()
                yield pd.DataFrame({"id": [key[0]], "count": [count], "first_ts": [min(e[0] for e in events)],
                                    "last_ts": [max(e[0] for e in events)],
                                    "expired_at_ms": [expiredTimerInfo.getExpiryTimeInMs()]})

        sessions = QUERIES.json_events(spark, input_dir).withWatermark("ts", "10 seconds").groupBy("id") \
            .transformWithStateInPandas(statefulProcessor=SessionProcessor(),
                                        outputStructType="id STRING, count LONG, first_ts TIMESTAMP, last_ts TIMESTAMP, "
                                                         "expired_at_ms LONG",
                                        outputMode="Append", timeMode="EventTime")
        return QUERIES.file_sink(sessions, checkpoint_dir, output_dir)

    return query


def later_session_timeout(spark, input_dir, checkpoint_dir, output_dir):
    """pandas_state_timeout's query with sessions timing out 20 s (not 10 s) after their last row."""
    import os

    import pandas as pd

    def track(key, pdfs, state):
        if state.hasTimedOut:
            count, last_ms = state.get
            state.remove()
            yield pd.DataFrame({"id": [key[0]], "count": [count], "last_ts": [pd.Timestamp(last_ms, unit="ms")],
                                "timed_out": [True]})
            return
        count, last_ms = state.get if state.exists else (0, 0)
        for pdf in pdfs:
            count += len(pdf)
            last_ms = max(last_ms, int(pd.Timestamp(pdf["ts"].max()).value // 1_000_000))
        state.update((count, last_ms))
        state.setTimeoutTimestamp(max(last_ms, state.getCurrentWatermarkMs()) + 20_000)
        yield pd.DataFrame({"id": [key[0]], "count": [count], "last_ts": [pd.Timestamp(last_ms, unit="ms")],
                            "timed_out": [False]})

    def write_batch(df, batch_id):
        lines = sorted(df.toJSON().collect())
        os.makedirs(output_dir, exist_ok=True)
        with open(os.path.join(output_dir, f"batch-{batch_id:06d}.json"), "w") as f:
            f.writelines(line + "\n" for line in lines)

    sessions = QUERIES.json_events(spark, input_dir).withWatermark("ts", "10 seconds").groupBy("id").applyInPandasWithState(
        track, outputStructType="id STRING, count LONG, last_ts TIMESTAMP, timed_out BOOLEAN",
        stateStructType="count LONG, last_ms LONG", outputMode="update", timeoutConf="EventTimeTimeout")
    return (sessions.writeStream.foreachBatch(write_batch).outputMode("update")
            .option("checkpointLocation", checkpoint_dir).trigger(availableNow=True))


KEY_SCHEMA = "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE"
VALUE_SCHEMA = "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE"
OPERATORS = "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA"

CASES: dict[str, Case] = {
    "same_code": Case("agg_window_hdfs", same_code, RESTARTS, changes=False),
    "add_filter": Case("agg_window_hdfs", add_filter, RESTARTS, changes=True),
    "add_projection": Case("agg_window_hdfs", add_projection, RESTARTS, changes=True),
    "change_grouping_keys": Case("agg_window_hdfs", change_grouping_keys, REFUSED, KEY_SCHEMA),
    "add_aggregate": Case("agg_window_hdfs", add_aggregate, REFUSED, VALUE_SCHEMA),
    "change_aggregate_type": Case("agg_window_hdfs", change_aggregate_type, REFUSED, VALUE_SCHEMA),
    "longer_watermark_delay": Case("agg_window_hdfs", longer_watermark_delay, RESTARTS, changes=True),
    "add_stateful_operator": Case("agg_window_hdfs", add_stateful_operator, REFUSED, OPERATORS),
    "remove_stateful_operator": Case("agg_window_hdfs", remove_stateful_operator, REFUSED, OPERATORS),
    "swap_source_path": Case("agg_window_hdfs", swap_source_path, RESTARTS, changes=False),
    "swap_source_path_pending": Case("agg_window_hdfs", swap_source_path, REFUSED, "java.lang.IllegalArgumentException",
                                     pending=True),
    "more_files_per_trigger": Case("agg_window_hdfs", more_files_per_trigger, RESTARTS, changes=False),
    "add_source": Case("agg_window_hdfs", add_source, REFUSED, "java.lang.AssertionError"),
    "update_output_mode": Case("agg_window_hdfs", update_output_mode, REFUSED, "STREAMING_OUTPUT_MODE.UNSUPPORTED_DATASOURCE"),
    "change_dedup_columns": Case("dedup_watermark", change_dedup_columns, REFUSED, KEY_SCHEMA),
    "outer_join": Case("join_stream_stream", outer_join, RESTARTS),
    "wider_join_condition": Case("join_stream_stream", wider_join_condition, RESTARTS),
    "min_watermark_policy": Case("union_stall_max", min_watermark_policy, RESTARTS, changes=False,
                                 conf={"spark.sql.streaming.multipleWatermarkPolicy": "min"}),
    "avro_state_add_field": Case("avro_tws", _sessions("count LONG, note STRING"), RESTARTS, changes=True),
    "avro_state_rename_field": Case("avro_tws", _sessions("total LONG"), RESTARTS, changes=True),
    "avro_state_narrow_type": Case("avro_tws", _sessions("count INT"), REFUSED, "STATE_STORE_INVALID_VALUE_SCHEMA_EVOLUTION"),
    "unsafe_row_state_add_field": Case("tws_pandas", _sessions("count LONG, note STRING"), REFUSED, VALUE_SCHEMA),
    "later_session_timeout": Case("pandas_state_timeout", later_session_timeout, RESTARTS),
}
