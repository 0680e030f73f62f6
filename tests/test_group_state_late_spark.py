"""Late rows at applyInPandasWithState by its timeout (checkpoint/watermarks/late_filters.py), against Spark's own counts.

Real queries: one applyInPandasWithState after a 10 s watermark, fed three files one batch each, the last with two
rows behind the watermark; run with each timeout conf. Spark drops them only with EventTimeTimeout. The event-time
cell with an event log (the count itself) is test_operator_watermarks' fmgws_then_agg (Spark 4.x and 3.5)."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from conftest import run_cli

pytestmark = pytest.mark.spark
BASE = "2024-01-01T00:00:"
FILES = [[("a", "40"), ("b", "40")], [("b", "50")], [("a", "10"), ("c", "20"), ("d", "55")]]
"""Batch 2 drops by batch 1's watermark (40 - 10 = 30 s): a@10 and c@20 are behind it."""
EVENT_LOG_HINT = "pass Spark's event log of the query (--progress EVENTLOG)"


def run_query(spark, root: Path, timeout: str) -> dict[int, int]:
    """Run the query to the end of its input; Spark's numRowsDroppedByWatermark of its operator, per batch."""
    import pandas as pd

    src = root / "in"
    src.mkdir(parents=True)
    for i, rows in enumerate(FILES):
        (src / f"{i}.json").write_text("".join(json.dumps({"id": k, "ts": BASE + s + "Z"}) + "\n" for k, s in rows))

    def count(key, pdfs, state):
        if state.hasTimedOut:
            state.remove()
            return
        n = (state.get[0] if state.exists else 0) + sum(len(p) for p in pdfs)
        state.update((n,))
        if timeout == "EventTimeTimeout":
            state.setTimeoutTimestamp(state.getCurrentWatermarkMs() + 3_600_000)
        elif timeout == "ProcessingTimeTimeout":
            state.setTimeoutDuration(3_600_000)
        yield pd.DataFrame({"id": [key[0]], "n": [n]})

    events = spark.readStream.schema("id STRING, ts TIMESTAMP").option("maxFilesPerTrigger", 1).json(str(src))
    query = (events.withWatermark("ts", "10 seconds").groupBy("id")
             .applyInPandasWithState(count, "id STRING, n LONG", "n LONG", "update", timeout)
             .writeStream.format("noop").outputMode("update").option("checkpointLocation", str(root / "checkpoint"))
             .start())
    try:  # batches 0-2 read the files; a processing-time timeout runs empty batches after them without end
        while not (root / "checkpoint" / "commits" / "2").exists() and query.isActive:
            time.sleep(0.2)
    finally:
        query.stop()
    return {p["batchId"]: p["stateOperators"][0]["numRowsDroppedByWatermark"]
            for p in (json.loads(p.json) for p in query.recentProgress) if p["stateOperators"] and p["batchId"] <= 2}


def replayed(root: Path) -> list[dict]:
    return json.loads(run_cli("replay", root / "checkpoint", "--from", "0", "--to", "2", "--count", "--event-time", "ts", "--schema",
                              "id STRING, ts TIMESTAMP", "--source-format", "json", "--format", "json").stdout)


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory):
    out = {}
    for timeout in ("NoTimeout", "ProcessingTimeTimeout", "EventTimeTimeout"):
        root = tmp_path_factory.mktemp(timeout)
        out[timeout] = (run_query(spark, root, timeout), replayed(root))
    return out


def test_no_timeout_drops_no_late_rows_and_replay_says_so(runs):
    spark_counts, rows = runs["NoTimeout"]
    assert spark_counts == {0: 0, 1: 0, 2: 0}
    assert [(r["batch"], r["late_rows"]) for r in rows] == [(0, 0), (1, 0), (2, 2)]  # two rows behind the watermark
    assert {r["batch"]: r["operators"][0]["late_rows"] for r in rows} == spark_counts
    assert rows[2]["operators"][0]["how"] == ("0: applyInPandasWithState with NoTimeout drops no late rows (Spark "
                                              "filters them only with EventTimeTimeout)")


@pytest.mark.parametrize("timeout,dropped", [("ProcessingTimeTimeout", 0), ("EventTimeTimeout", 2)])
def test_a_set_timeout_without_the_plan_is_unknown(runs, timeout, dropped):
    """Both timeouts store a timeoutTimestamp in the state; only the plan tells which one drops late rows."""
    spark_counts, rows = runs[timeout]
    assert spark_counts == {0: 0, 1: 0, 2: dropped}
    assert [r["operators"][0]["late_rows"] for r in rows] == [None, None, None]
    assert rows[2]["operators"][0]["how"] == (
        "applyInPandasWithState drops late rows only with EventTimeTimeout; its state stores a timeout timestamp, but "
        "whether the timeout is ProcessingTimeTimeout or EventTimeTimeout only the plan shows: " + EVENT_LOG_HINT)
