"""The compat matrix: query changes from Spark's guide and from what breaks in practice, each the new code of a
fixture's query (``query(spark, input_dir, checkpoint_dir, output_dir) -> DataStreamWriter``, as in
fixtures/queries.py), with the verdict Spark gives it. tests/test_compat_matrix.py runs compat and a real
restart of each (tests/compat_oracle.py) and asserts they agree.

Like fixtures/queries.py, importing this module imports no pyspark: every query imports what it needs.
"""
from __future__ import annotations

import inspect
import textwrap
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
    inputs: dict[str, str] = field(default_factory=dict)
    """Source id -> a glob (relative to the fixture) of the files holding the rows that source read in the re-run
    batch, for a source compat cannot read again (``--input``)."""
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


def longer_windows(spark, input_dir, checkpoint_dir, output_dir):
    from pyspark.sql import functions as F

    counts = _events(spark, input_dir).groupBy(F.window("ts", "20 seconds"), "id").agg(
        F.count("*").alias("n"), F.sum("v").alias("v_sum"))
    return QUERIES.file_sink(counts, checkpoint_dir, output_dir)


def rename_aggregate(spark, input_dir, checkpoint_dir, output_dir):
    from pyspark.sql import functions as F

    aggs = [F.count("*").alias("events"), F.sum("v").alias("v_sum")]
    return QUERIES.file_sink(_windowed(_events(spark, input_dir), aggregates=aggs), checkpoint_dir, output_dir)


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


def edited(fn: Callable[..., Any], *edits: tuple[str, str]) -> Callable[..., Any]:
    """Fixture query ``fn`` with each ``(old, new)`` text replaced once: new code written as a change of the old."""
    source = textwrap.dedent(inspect.getsource(fn))
    for old, new in edits:
        assert source.count(old) == 1, (fn.__name__, old)
        source = source.replace(old, new)
    namespace = {**vars(QUERIES), "__name__": f"new_{fn.__name__}"}  # not importable: pickled by value, like the fixtures'
    exec(compile(source, f"<{fn.__name__}, edited>", "exec"), namespace)  # noqa: S102 - the test's own source
    return namespace[fn.__name__]


def sessions(count_schema: str) -> Callable[..., Any]:
    """tws_pandas's query with the ValueState ``count`` declared as ``count_schema`` (its first field the count;
    a missing value, as after a rename, counts from 0)."""
    width = len(count_schema.split(","))
    return edited(QUERIES.tws_pandas,
                  ('getValueState("count", "count LONG")', f'getValueState("count", {count_schema!r})'),
                  ("count = self.count.get()[0] if self.count.exists() else 0\n            last_ms",
                   "count = (self.count.get()[0] or 0) if self.count.exists() else 0\n            last_ms"),
                  ("self.count.update((count,))", f"self.count.update((count,) + (None,) * {width - 1})"))


swap_source_path_after_data = edited(QUERIES.windowed_count, (
    "events = json_events(spark, input_dir)",
    'moved = input_dir + "_v2"\n    __import__("os").makedirs(moved, exist_ok=True)\n    events = json_events(spark, moved)'))
"""windowed_count's query reading its file source from another directory."""


remove_source = edited(QUERIES.union_two_sources, (
    'events = source("left").unionByName(source("right"))', 'events = source("left")'))
"""union_two_sources's query reading its left source only."""


later_session_timeout = edited(QUERIES.pandas_state_timeout, (
    "state.setTimeoutTimestamp(max(last_ms, state.getCurrentWatermarkMs()) + 10_000)",
    "state.setTimeoutTimestamp(max(last_ms, state.getCurrentWatermarkMs()) + 20_000)"))
"""pandas_state_timeout's query with sessions timing out 20 s (not 10 s) after their last row."""


# Output changes on compaction (its sink log compacted: the re-run batch 11 is a compaction batch, whose own file,
# one row, is what 11.compact lists beyond the batches before it) and on stalled_event_time, whose last data batch
# closed no window and wrote no rows, so its new columns are compared with those of the old code's newest output files.
rename_quiet_output = edited(QUERIES.compaction, ('.agg(F.count("*").alias("n"))', '.agg(F.count("*").alias("events"))'))
"""compaction's query with its count named ``events``."""
project_quiet_output = edited(QUERIES.compaction, ("return file_sink(counts,",
                                                   'return file_sink(counts.withColumn("n_twice", F.col("n") * 2),'))
"""compaction's query with a column computed after the aggregation."""
retype_quiet_output = edited(QUERIES.compaction, ("return file_sink(counts,",
                                                  'return file_sink(counts.withColumn("n", F.col("n").cast("int")),'))
"""compaction's query writing its count as an int (Parquet files carry the type)."""
rename_quiet_json_output = edited(QUERIES.windowed_count, ('.agg(F.count("*").alias("n"))',
                                                           '.agg(F.count("*").alias("events"))'))
"""windowed_count's query (a JSON sink) with its count named ``events``."""


KEY_SCHEMA = "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE"
VALUE_SCHEMA = "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE"
OPERATORS = "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA"

CASES: dict[str, Case] = {
    "quiet_batch_same_code": Case("compaction", QUERIES.compaction, RESTARTS, changes=False),
    "quiet_batch_rename_output": Case("compaction", rename_quiet_output, RESTARTS, changes=True),
    "quiet_batch_add_projection": Case("compaction", project_quiet_output, RESTARTS, changes=True),
    "quiet_batch_retype_output": Case("compaction", retype_quiet_output, RESTARTS, changes=True),
    "quiet_json_batch_same_code": Case("stalled_event_time", QUERIES.windowed_count, RESTARTS, changes=False),
    "quiet_json_batch_rename_output": Case("stalled_event_time", rename_quiet_json_output, RESTARTS, changes=True),
    "same_code": Case("agg_window_hdfs", same_code, RESTARTS, changes=False),
    "same_code_rocksdb": Case("agg_window_rocksdb", same_code, RESTARTS, changes=False),
    "same_code_checkpoint_v2": Case("checkpoint_v2", same_code, RESTARTS, changes=False),
    "add_filter": Case("agg_window_hdfs", add_filter, RESTARTS, changes=True),
    "add_projection": Case("agg_window_hdfs", add_projection, RESTARTS, changes=True),
    "change_grouping_keys": Case("agg_window_hdfs", change_grouping_keys, REFUSED, KEY_SCHEMA),
    "add_aggregate": Case("agg_window_hdfs", add_aggregate, REFUSED, VALUE_SCHEMA),
    "change_aggregate_type": Case("agg_window_hdfs", change_aggregate_type, REFUSED, VALUE_SCHEMA),
    "longer_watermark_delay": Case("agg_window_hdfs", longer_watermark_delay, RESTARTS, changes=True),
    "longer_windows": Case("agg_window_hdfs", longer_windows, RESTARTS, changes=True),
    "rename_aggregate": Case("agg_window_hdfs", rename_aggregate, RESTARTS, changes=True),
    "add_stateful_operator": Case("agg_window_hdfs", add_stateful_operator, REFUSED, OPERATORS),
    "remove_stateful_operator": Case("agg_window_hdfs", remove_stateful_operator, REFUSED, OPERATORS),
    "swap_source_path": Case("agg_window_hdfs", swap_source_path, RESTARTS, changes=False),
    "swap_source_path_pending": Case("agg_window_hdfs", swap_source_path, REFUSED, "java.lang.IllegalArgumentException",
                                     pending=True),
    "swap_source_path_after_data": Case("stalled_event_time", swap_source_path_after_data, REFUSED,
                                        "java.lang.IllegalArgumentException"),
    "more_files_per_trigger": Case("agg_window_hdfs", more_files_per_trigger, RESTARTS, changes=False),
    "add_source": Case("agg_window_hdfs", add_source, REFUSED, "java.lang.AssertionError"),
    "remove_source": Case("union_stall_max", remove_source, REFUSED, "java.lang.AssertionError"),
    "update_output_mode": Case("agg_window_hdfs", update_output_mode, REFUSED, "STREAMING_OUTPUT_MODE.UNSUPPORTED_DATASOURCE"),
    "change_dedup_columns": Case("dedup_watermark", change_dedup_columns, REFUSED, KEY_SCHEMA),
    "outer_join": Case("join_stream_stream", outer_join, RESTARTS),
    "wider_join_condition": Case("join_stream_stream", wider_join_condition, RESTARTS),
    "min_watermark_policy": Case("union_stall_max", min_watermark_policy, RESTARTS, changes=False,
                                 conf={"spark.sql.streaming.multipleWatermarkPolicy": "min"}),
    "avro_state_add_field": Case("avro_tws", sessions("count LONG, note STRING"), RESTARTS, changes=True),
    "avro_state_rename_field": Case("avro_tws", sessions("total LONG"), RESTARTS, changes=True),
    "avro_state_narrow_type": Case("avro_tws", sessions("count INT"), REFUSED, "STATE_STORE_INVALID_VALUE_SCHEMA_EVOLUTION"),
    "unsafe_row_state_add_field": Case("tws_pandas", sessions("count LONG, note STRING"), REFUSED, VALUE_SCHEMA),
    "later_session_timeout": Case("pandas_state_timeout", later_session_timeout, RESTARTS),
    "python_source_given_input": Case("python_source", QUERIES.python_source_count, RESTARTS, changes=False,
                                      inputs={"0": "input/run2-*.json"}),
    "python_source_add_aggregate": Case("python_source", edited(QUERIES.python_source_count, (
        '.agg(F.count("*").alias("n"), F.sum("v").alias("v_sum"))',
        '.agg(F.count("*").alias("n"), F.sum("v").alias("v_sum"), F.max("v").alias("v_max"))')), REFUSED, VALUE_SCHEMA,
        inputs={"0": "input/run2-*.json"}),
}
