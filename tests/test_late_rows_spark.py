"""``replay --count`` / ``--lateness`` with the window inferred from the state, against Spark's own counts."""
from __future__ import annotations

import json

import pytest

from wmcheck.statestore.spark.late_rows import lateness_of, window_from_bounds

from conftest import fixture_checkpoint, fixture_facts, root_map, run_cli

pytestmark = pytest.mark.spark
READ = ("--event-time", "ts", "--schema", "id STRING, ts TIMESTAMP, v INT", "--source-format", "json")


def count(name: str, *args: str, fmt: str = "json"):
    return run_cli("replay", fixture_checkpoint(name), "--from", "0", "--count", *READ, *args, "--format", fmt,
                   "--path-map", root_map(name)).stdout


@pytest.mark.parametrize("name", ["agg_window_hdfs", "sliding_window"])  # tumbling and sliding windows
def test_late_only_count_without_window_equals_spark_dropped_rows(spark, name):
    rows = json.loads(count(name, "--late-only"))
    spark_dropped = {b["batch"]: b["num_rows_dropped_by_watermark"] for b in fixture_facts(name)["batches"]}
    assert {r["batch"]: r["late_groups"] for r in rows} == spark_dropped
    assert {r["batch"]: r["rows"] for r in rows} == {b["batch"]: b["num_input_rows"] for b in fixture_facts(name)["batches"]}
    assert [r["kept_rows"] for r in rows] == [r["late_rows"] for r in rows]
    assert sum(spark_dropped.values()) > 0


def test_count_table_names_the_inferred_window(spark):
    table = count("sliding_window", "--late-only", fmt="table")
    assert table.splitlines()[0] == "window: 10s every 5s, grouped by id (inferred from state/0)"


def test_the_window_comes_from_the_operator_reading_the_input(spark):
    """chained_aggs: operator 1 (10 s windows) reads the input; operator 0 (20 s windows over window_time, empty at the
    last batch) is further down the query, so its windows are not the replayed rows'."""
    table = count("chained_aggs", "--late-only", fmt="table").splitlines()
    assert table[0] == "window: 10s every 10s, grouped by id (inferred from state/1)"
    rows = json.loads(count("chained_aggs", "--late-only"))
    spark_dropped = {b["batch"]: b["state_operators"][1]["num_rows_dropped_by_watermark"]
                     for b in fixture_facts("chained_aggs")["batches"]}
    assert {r["batch"]: r["late_groups"] for r in rows} == spark_dropped and sum(spark_dropped.values()) == 4


def test_window_that_cannot_be_inferred_is_one_line(spark, tmp_path):
    """agg_window_hdfs rewound to batch 0 (a real rewind): its state holds one window, which tells no size and slide."""
    import shutil

    root = tmp_path / "agg"
    shutil.copytree(fixture_checkpoint("agg_window_hdfs").parent, root)
    run_cli("rewind", str(root / "checkpoint"), "--to-batch", "0", "--execute", "--idle", "0")
    out = run_cli("replay", root / "checkpoint", "--from", "0", "--count", "--late-only", *READ,
                  "--path-map", f"{fixture_facts('agg_window_hdfs')['root']}={root}", exit_code=2).output
    assert out.strip() == ("Error: the state of operator 0 is keyed by a window, but its 1 stored window does not tell its "
                           "size and slide (hint: pass --window DURATION[,SLIDE] (the query's window(), e.g. --window "
                           "'10 seconds,5 seconds'))")


def test_lateness_of_the_known_late_rows(spark):
    """agg_window_hdfs drops b@12 (batch 5), a@15 (6), b@25 (7) and c@44 (10): their windows end at 20, 20, 30 and 50 s,
    judged by the previous batch's watermark 23, 23, 35 and 53 s: 3, 3, 5 and 3 s late."""
    doc = json.loads(run_cli("replay", fixture_checkpoint("agg_window_hdfs"), "--from", "0", "--lateness", *READ,
                             "--path-map", root_map("agg_window_hdfs"), "--format", "json").stdout)
    assert doc == {"late_rows": 4, "min_ms": 3000, "median_ms": 3000, "p90_ms": 5000, "max_ms": 5000,
                   "keep_ms": {"99%": 5001, "99.9%": 5001, "100%": 5001}}


def test_window_from_stored_bounds():
    s = 1000
    assert window_from_bounds([(80 * s, 90 * s), (90 * s, 100 * s)]) == (10 * s, 10 * s)
    assert window_from_bounds([(80 * s, 90 * s), (85 * s, 95 * s), (95 * s, 105 * s)]) == (10 * s, 5 * s)
    assert window_from_bounds([(80 * s, 90 * s)]) is None  # one window: tumbling or sliding?
    assert window_from_bounds([(81 * s, 91 * s), (91 * s, 101 * s)]) is None  # a startTime offset
    assert window_from_bounds([(0, 10 * s), (0, 20 * s)]) is None


def test_lateness_quantiles_by_nearest_rank():
    got = lateness_of(list(range(1, 1001)))
    assert (got.late_rows, got.min_ms, got.median_ms, got.p90_ms, got.max_ms) == (1000, 1, 500, 900, 1000)
    assert dict(got.keep_ms) == {"99%": 991, "99.9%": 1000, "100%": 1001}
    assert lateness_of([]).keep_ms == ()
