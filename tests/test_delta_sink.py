"""What Spark's Delta sink does with the batches a rewind makes the query run again, proven by real restarts of
copies of fixtures/agg_window_delta (pyspark 4.2.0, delta-spark 4.4.0) in one child process
(tests/delta_restarts.py), compared with the control run (the fixture's table, written from scratch):

* rewind only: the restart re-runs the batches, and the sink writes nothing (the plan's "skip");
* the table restored (deltalake) to the version before the first re-run batch: the txn stays, the restart writes
  nothing either, and the table has lost the rows of those batches for good;
* restored with a txn for the query id lowered to the rewind's batch, which ``rewind --delta-sink --execute`` does: the
  restart writes the re-run batches and the table holds exactly the control run's rows;
* that repair undone (the table restored again to version 12, the txn back at 12): the restart writes nothing to it and the
  table holds the control run's rows.

The environment is the Delta one of tests/delta_spark.py: without it these tests skip, and fail under CI.
"""
from __future__ import annotations

import json

import pytest
from delta_spark import delta_python, relocated_copy, restart

from conftest import run_cli

NAME = "agg_window_delta"
CONTROL_ROWS = 17
CASES = {"rewound": None, "restored": {"version": 8}, "repaired": None, "undone": None}
SINK_STEP = ("repaired", "undone")
"""The cases rewound with --delta-sink --execute (wmcheck restores the table); the others without it."""


@pytest.fixture(scope="module")
def restarts(tmp_path_factory):
    """Every case's copy rewound to batch 8 by wmcheck (the table restored by it in SINK_STEP, and undone in
    ``undone``), then restarted by Spark in one child: (plans, outcomes, the control run's rows)."""
    delta_python()
    plans, jobs = {}, []
    for case, restore in CASES.items():
        root = relocated_copy(NAME, tmp_path_factory.mktemp(case.replace("+", "-")) / NAME)
        rewind = ("rewind", root / "checkpoint", "--to-batch", "8", "--idle", "0", "--format", "json")
        plans[case] = json.loads(run_cli(*rewind, "--delta-sink", root / "output").output)
        run_cli(*rewind, *(("--delta-sink", root / "output") if case in SINK_STEP else ()), "--execute")
        if case == "undone":
            run_cli("undo", root / "checkpoint", "--idle", "0")
        jobs.append({"root": str(root), "restore": restore})
    out = restart("delta_restarts.py", jobs)
    return plans, dict(zip(CASES, out["jobs"])), out["control"]


@pytest.mark.spark
def test_after_a_rewind_the_delta_sink_writes_nothing_for_the_re_run_batches(restarts):
    """The plan says skip for 9..12; Spark re-runs them and the table keeps its 13 versions, txn 12 and 17 rows."""
    plans, outcomes, control = restarts
    assert [(b["batch"], b["action"]) for b in plans["rewound"]["sinks"][0]["batches"]] == [
        (9, "skip"), (10, "skip"), (11, "skip"), (12, "skip")]
    got = outcomes["rewound"]
    assert (got["error"], got["batches"][0], got["version"], got["txn"]) == (None, 9, 12, 12)
    assert got["rows"] == control and len(control) == CONTROL_ROWS


@pytest.mark.spark
def test_a_restored_table_keeps_the_txn_and_loses_the_re_run_batches_rows(restarts):
    """deltalake's restore to version 8 leaves the query's txn at 12: the re-run batches are skipped, their 6 rows
    are gone (the plan's count)."""
    plans, outcomes, control = restarts
    lost = sum(b["rows"] for b in plans["restored"]["sinks"][0]["batches"])
    got = outcomes["restored"]
    assert (got["error"], got["batches"][0], got["version"], got["txn"]) == (None, 9, 13, 12)
    assert (lost, len(got["rows"])) == (6, CONTROL_ROWS - 6)
    assert set(got["rows"]) < set(control)


@pytest.mark.spark
def test_rewind_with_the_delta_sink_step_writes_the_control_runs_rows(restarts):
    """rewind --delta-sink --execute restores the table to version 8 in a commit whose txn for the query id is 8
    (version 13): Spark writes batches 9..12 again (versions 14..17) and the table holds exactly what the control run
    from scratch holds."""
    plans, outcomes, control = restarts
    assert plans["repaired"]["sinks"][0]["restore"] == {"to_version": 8, "from_version": 12, "txn": 8, "txn_before": 12,
                                                        "rows": 6, "files": 5, "other_writers": []}
    got = outcomes["repaired"]
    assert (got["error"], got["batches"], got["version"], got["txn"]) == (None, [9, 10, 11, 12], 17, 12)
    assert got["rows"] == control


@pytest.mark.spark
def test_the_delta_sink_step_undone_leaves_the_table_as_it_was(restarts):
    """undo restores the table again (version 14, the files of version 12) with the txn at 12: the restarted query
    (at batch 12 again) runs one batch, 13, without input, which writes nothing to the table, and the table holds the
    control run's rows."""
    _, outcomes, control = restarts
    got = outcomes["undone"]
    assert (got["error"], got["batches"], got["version"], got["txn"]) == (None, [13], 14, 12)
    assert got["rows"] == control
