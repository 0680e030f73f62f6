"""Each watermarked input's old delay from the old query's plan in Spark's event log (``EventTimeWatermark``'s
column and delay), compared by ``wmcheck compat`` with that input's new delay: the plans Spark printed parsed as
Spark computed the delays, and a union of two inputs with different delays under ``multipleWatermarkPolicy=max``
judged against real restarts of the old code (the control) and of the new."""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from wmcheck.checkpoint.timeutil import parse_duration_ms
from wmcheck.checkpoint.watermarks.plans import BatchPlan, PlanWatermark, interval_ms, plan_watermark
from wmcheck.checkpoint.watermarks.progress import query_progress
from wmcheck.checkpoint.watermarks.progress_files import load_progress, read_records

from conftest import FIXTURES, run_cli
from restart_oracle import add_input, prepare


def _plans(name: str) -> dict[int, BatchPlan]:
    query_id = json.loads((FIXTURES / name / "checkpoint" / "metadata").read_text())["id"]
    return dict(load_progress(query_id, str(FIXTURES / name / "eventlog")).plans)


@pytest.mark.parametrize(("name", "expected"), [
    ("union_stall_max", [("ts", 10_000), ("ts", 10_000)]),  # Spark 4.3 prints the node id first
    ("union_stall_min_spark35", [("ts", 10_000), ("ts", 10_000)]),  # 3.5 does not
    ("join_then_agg", [("l_ts", 10_000), ("r_ts", 10_000)]),  # the join's left input first
    ("agg_then_agg", [("ts", 10_000)]),
])
def test_every_plan_gives_each_watermark_nodes_column_and_delay(name, expected):
    plans = _plans(name)
    assert plans
    for batch, plan in plans.items():
        assert [(w.column, w.delay_ms) for w in plan.watermarks if w is not None] == expected, batch


def test_a_watermark_node_spark_did_not_print_as_expected_is_unreadable_not_guessed():
    assert plan_watermark("EventTimeWatermark ts#1: timestamp, 10 seconds") == PlanWatermark("ts", 10_000, "10 seconds")
    assert plan_watermark("EventTimeWatermark ts#1: timestamp, 10 fortnights") is None
    assert plan_watermark("EventTimeWatermark ts: timestamp, 10 seconds") is None  # no expression id
    assert interval_ms("-1.5 seconds") == -1500 and interval_ms("0 seconds") == 0 and interval_ms("") is None


DELAYS = ("1 minute 30 seconds", "1.5 seconds", "2 days 3 hours", "1 month", "1 year 2 months 3 days 0.0015 seconds",
          "250 milliseconds")


@pytest.mark.spark
def test_plan_delays_are_the_delays_spark_computed(spark, spark_event_log, tmp_path):
    """A union of six inputs, each with its own delay: the delays parsed from the batch's plan in the event log are,
    input by input and in the order of the inputs, Spark's own ``spark.watermarkDelayMs`` of the new query's plan."""
    from pyspark.sql import functions as F

    from wmcheck.statestore.spark.compat.query import build

    for i in range(len(DELAYS)):
        (tmp_path / "in" / str(i)).mkdir(parents=True)
        (tmp_path / "in" / str(i) / "a.json").write_text('{"id": "a", "ts": "2024-01-01T00:00:10Z"}\n')

    def query(s):
        inputs = [s.readStream.format("json").schema("id STRING, ts TIMESTAMP").load(str(tmp_path / "in" / str(i)))
                  .withWatermark("ts", d) for i, d in enumerate(DELAYS)]
        union = inputs[0]
        for other in inputs[1:]:
            union = union.unionByName(other)
        return (union.dropDuplicates(["id", "ts"]).select("id", F.col("ts")).writeStream.format("noop")
                .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True))

    new = build(spark, query, "delays")
    handle = new.writer.start()
    handle.awaitTermination(300)
    plan = _await_plan(spark_event_log, str(handle.id), 0)
    assert [(w.column, w.delay_ms) for w in plan.watermarks if w] == [(w.column, w.delay_ms) for w in new.watermarks]
    assert [w.sources for w in new.watermarks] == [(str(i),) for i in range(len(DELAYS))]
    assert [w.delay for w in plan.watermarks if w] == ["1 minutes 30 seconds", "1.5 seconds", "2 days 3 hours", "1 months",
                                                       "1 years 2 months 3 days 0.0015 seconds", "0.25 seconds"]
    assert [w.delay_ms for w in new.watermarks] == [90_000, 1_500, 183_600_000, 31 * 86_400_000,
                                                    (14 * 31 + 3) * 86_400_000 + 1, 250]  # a month 31 days


def _await_plan(event_log: Path, query_id: str, batch: int, timeout_s: float = 120) -> BatchPlan:
    """The plan of ``batch`` in the session's event log, once Spark's listener has written it (the log is written
    apart from the query's thread)."""
    deadline = time.monotonic() + timeout_s
    while True:
        records = read_records(str(event_log))
        plan = query_progress(query_id, records.reports, records.plans).plans.get(batch)
        if plan is not None or time.monotonic() > deadline:
            assert plan is not None, f"no plan of batch {batch} of {query_id} in {event_log}"
            return plan
        time.sleep(0.5)


UNION = """import sys
from pyspark.sql import functions as F


def query(spark):
    def source(sub, delay):
        return (spark.readStream.format("json").schema("id STRING, ts TIMESTAMP, v INT").option("maxFilesPerTrigger", 1)
                .load({root!r} + "/input/" + sub).withWatermark("ts", delay))

    events = source("left", {left!r}).unionByName(source("right", {right!r}))
    counts = events.groupBy(F.window("ts", "10 seconds"), "id").agg(F.count("*").alias("n"), F.sum("v").alias("v_sum"))
    return (counts.writeStream.format("json").outputMode("append").option("path", {root!r} + "/output")
            .option("checkpointLocation", {root!r} + "/checkpoint").trigger(availableNow=True))
"""
OLD = ("10 seconds", "20 seconds")
BATCH = 8
"""The batch the old code runs after multi_watermark_max's eight: one new file of each input (the right one 40 s
later, so the right input sets the watermark under max: its 20 s delay is 10 s more than the left's, 40 s later)."""


def _copy(tmp_path: Path, name: str) -> Path:
    root = prepare("multi_watermark_max", tmp_path / name, extra=1)  # zz-extra-0 in left: a@101 b@105 c@134
    add_input(root / "input" / "right", 1)  # a@141 b@145 c@174
    return root


def _module(tmp_path: Path, root: Path, name: str, left: str, right: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(UNION.format(root=str(root), left=left, right=right))
    return f"{path}:query"


def _start(spark, spec: str, root: Path, event_log: Path) -> tuple[int, BatchPlan]:
    """Run the query of ``spec`` on ``root`` (a real restart) and return the watermark Spark computed after batch 8
    and the plan of batch 8."""
    from wmcheck.statestore.spark.user_code import load_callable

    handle = load_callable(spec, "query", "m:f")(spark).start()
    handle.awaitTermination(300)
    commit = json.loads((root / "checkpoint" / "commits" / str(BATCH)).read_text().splitlines()[1])
    return commit["nextBatchWatermarkMs"], _await_plan(event_log, str(handle.id), BATCH)


@pytest.fixture(scope="module")
def old_run(spark, spark_event_log, tmp_path_factory):
    """multi_watermark_max restarted by its own code (10 s left, 20 s right) with one new file per input: the
    control, whose event log (a copy, taken before compat runs the new code under the same query id) records the
    plan of batch 8."""
    tmp = tmp_path_factory.mktemp("delays")
    root = _copy(tmp, "old")
    watermark, plan = _start(spark, _module(tmp, root, "old_code", *OLD), root, spark_event_log)
    log = tmp / "eventlog"
    shutil.copytree(spark_event_log, log)
    return root, watermark, plan, log


def _delays(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("delay of ")]


@pytest.mark.spark
def test_the_unchanged_union_reports_no_change_of_delay(spark, old_run, tmp_path):
    root, watermark, plan, log = old_run
    assert [(w.column, w.delay_ms) for w in plan.watermarks if w] == [("ts", 10_000), ("ts", 20_000)]
    lines = run_cli("compat", root / "checkpoint", "--query", _module(tmp_path, root, "same", *OLD),
                    "--progress", log).stdout.splitlines()
    assert _delays(lines) == ["delay of ts (source 0): 10s -> 10s (old: the plan of batch 8)",
                              "delay of ts (source 1): 20s -> 20s (old: the plan of batch 8)"]
    assert not [line for line in lines if "old delay is unknown" in line]
    assert lines[-1] == f"restarts: batch {BATCH} gives the same output and state (exit 0)"
    # without the event log the state's one delay is not each input's (the fixture's note), and nothing is compared
    bare = run_cli("compat", root / "checkpoint", "--query", _module(tmp_path, root, "same", *OLD)).stdout.splitlines()
    assert _delays(bare) == ["delay of ts (source 0): unknown -> 10s", "delay of ts (source 1): unknown -> 20s"]


@pytest.mark.spark
@pytest.mark.parametrize(("left", "right", "changed", "moves"), [
    ("10 seconds", "5 seconds", "delay of ts (source 1) 20s -> 5s", 15_000),  # the right input sets the watermark
    ("15 seconds", "20 seconds", "delay of ts (source 0) 10s -> 15s", 0),  # the left does not: the same watermark
])
def test_one_inputs_changed_delay_is_that_input_against_a_real_restart(spark, spark_event_log, old_run, tmp_path, left,
                                                                      right, changed, moves):
    """Exactly the changed input is reported, with its old delay (the control's plan) and its new one (the plan of a
    real restart of the new code); the watermark after the batch, old and new, is the control's and the restart's."""
    root, old_watermark, old_plan, log = old_run
    fresh = _copy(tmp_path, "new")
    new_watermark, new_plan = _start(spark, _module(tmp_path, fresh, "restart", left, right), fresh,
                                       spark_event_log)
    assert new_watermark - old_watermark == moves
    doc = json.loads(run_cli("compat", root / "checkpoint", "--query", _module(tmp_path, root, "changed", left, right),
                             "--progress", log, "--format", "json", exit_code=1).stdout)
    wm = doc["watermark"]
    assert [(d["sources"], d["old_ms"], d["new_ms"], d["old_from"]) for d in wm["delays"]] == [
        ([str(i)], o.delay_ms, n.delay_ms, "the plan of batch 8")
        for i, (o, n) in enumerate(zip(old_plan.watermarks, new_plan.watermarks))]
    assert [(w.column, w.delay_ms) for w in new_plan.watermarks if w] == [("ts", parse_duration_ms(d)) for d in (left, right)]
    assert (wm["old_next_ms"], wm["new_next_ms"]) == (old_watermark, new_watermark)
    summary = run_cli("compat", root / "checkpoint", "--query", _module(tmp_path, root, "changed", left, right),
                      "--progress", log, "--format", "github", exit_code=1).stdout.rstrip("\n").split("\n")[-1]
    moved = f"; watermark after batch {BATCH} {old_watermark} -> {new_watermark}" if moves else ""
    assert summary == f"restarts, with changes: {changed}{moved} (exit 1)"
