"""``check --delta-sink PATH`` on copies of fixtures/agg_window_delta whose table was re-created at its path (WM086) or
restored below batches the query committed (WM087), and what Spark's Delta sink then really does: each copy gets one
more input file and is restarted (availableNow) by delta-spark in one child (tests/delta_restarts.py), next to an
untouched copy that gets the same input (the control run), and a restored copy that the WM087 fix repaired first.

Found by those restarts: the re-created table gets only the restart's batches 13 and 14 (their 5 rows, not the
control's 22); the restored one keeps its txn, gets 13 and 14, and misses the 6 rows of batches 9..12 for good;
the repaired one gets 9..13 and holds exactly the control's rows.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from delta_spark import delta_python, relocated_copy, restart
from test_repair_execute import tree

from wmcheck.checkpoint.sinks.delta import read_delta_log
from wmcheck.checkpoint.timeutil import format_ms

from conftest import FIXTURES, run_cli

deltalake = pytest.importorskip("deltalake")
pa = pytest.importorskip("pyarrow")

NAME = "agg_window_delta"
QUERY_ID = json.loads((FIXTURES / NAME / "checkpoint" / "metadata").read_text())["id"]
INPUT = [{"id": "a", "ts": "2024-01-01T00:02:00Z", "v": 40}, {"id": "b", "ts": "2024-01-01T00:03:00Z", "v": 41}]
"""The restart's one more input file: the watermark passes 00:02:50, so batches 13 and 14 emit 5 windows."""
NEW_ROWS = sorted(json.dumps(r, sort_keys=True) for r in [
    {"id": "a", "n": 1, "v_sum": 26, "window": {"start": "2024-01-01T00:01:20.000000Z", "end": "2024-01-01T00:01:30.000000Z"}},
    {"id": "a", "n": 1, "v_sum": 30, "window": {"start": "2024-01-01T00:01:30.000000Z", "end": "2024-01-01T00:01:40.000000Z"}},
    {"id": "a", "n": 1, "v_sum": 40, "window": {"start": "2024-01-01T00:02:00.000000Z", "end": "2024-01-01T00:02:10.000000Z"}},
    {"id": "b", "n": 2, "v_sum": 59, "window": {"start": "2024-01-01T00:01:20.000000Z", "end": "2024-01-01T00:01:30.000000Z"}},
    {"id": "c", "n": 1, "v_sum": 29, "window": {"start": "2024-01-01T00:01:30.000000Z", "end": "2024-01-01T00:01:40.000000Z"}},
])
RESTORED = ("the Delta table was restored to version 8 (version 13) below 4 batches the query committed (9..12): their "
            "6 row(s) are gone from it while its txn for the query stays at 12. The restart writes batches 13 on only "
            "and never writes 9..12 again (tested with delta-spark 4.4). The rewind restores the table to before batch "
            "9's commit with the txn lowered, so that the restart writes them again (its own restore commit counts as "
            "another writer's: --execute needs --force)")


def copy_of(root: Path) -> Path:
    return relocated_copy(NAME, root)


def recreate(root: Path) -> None:
    """Remove the table and create it empty at the same path (deltalake; the schema's Spark field metadata left out,
    which deltalake would write as text that Spark cannot read)."""
    table = str(root / "output")
    schema = pa.schema([f.remove_metadata() for f in pa.schema(deltalake.DeltaTable(table).schema().to_arrow())])
    shutil.rmtree(table)
    deltalake.write_deltalake(table, pa.Table.from_pylist([], schema=schema))


def restore_below(root: Path) -> None:
    deltalake.DeltaTable(str(root / "output")).restore(8)


def recreated_message(root: Path) -> str:
    created = format_ms(read_delta_log(str(root / "output")).commit(0).timestamp_ms)
    return (f"the Delta table holds no txn of query {QUERY_ID}, whose checkpoint committed batches up to 12: the table "
            f"was re-created at its path (its version 0 was written at {created}), or is another table. The restart "
            "writes batches 13 on only: the rows batches 0..12 wrote are not in the table and are not written again "
            "(tested with delta-spark 4.4)")


def check(root: Path, *extra: str, exit_code: int = 1):
    return run_cli("check", root / "checkpoint", "--delta-sink", root / "output", *extra, exit_code=exit_code)


def findings(root: Path) -> list[dict]:
    return json.loads(check(root, "--format", "json", exit_code=None).output)


@pytest.fixture
def copy(tmp_path) -> Path:
    return copy_of(tmp_path / NAME)


def test_the_fixtures_table_is_as_the_checkpoint_says(copy):
    assert check(copy, "--select", "WM086,WM087", exit_code=0).output == (
        f"{copy / 'checkpoint'}: ok: 0 error(s), 0 warning(s) from 2 checks\n")


def test_a_re_created_table_is_wm086(copy):
    recreate(copy)
    assert findings(copy) == [{
        "code": "WM086", "severity": "error", "checkpoint": str(copy / "checkpoint"), "path": "../output/_delta_log",
        "message": recreated_message(copy),
        "fix": {"kind": "instruction", "text": "for the table to hold the query's whole output, start the query from a "
                "new checkpoint (it writes every batch again); to keep only what comes next, nothing to do", "request": None}}]


def test_a_table_restored_below_committed_batches_is_wm087_fixed_by_a_rewind_with_the_delta_sink(copy):
    restore_below(copy)
    assert findings(copy) == [{
        "code": "WM087", "severity": "error", "checkpoint": str(copy / "checkpoint"),
        "path": "../output/_delta_log/00000000000000000013.json", "message": RESTORED,
        "fix": {"kind": "rewind", "text": f"wmcheck rewind {copy / 'checkpoint'} --to-batch 8 --delta-sink {copy / 'output'}",
                "request": {"to_batch": 8, "delta_sink": str(copy / "output")}}}]
    text = check(copy).output.splitlines()
    assert text[-2:] == [f"recommended repair: wmcheck rewind {copy / 'checkpoint'} --to-batch 8 --delta-sink "
                         f"{copy / 'output'}", f"{copy / 'checkpoint'}: FAIL: 1 error(s), 0 warning(s) from 80 checks"]
    plan = json.loads(run_cli("rewind", copy / "checkpoint", "--to-batch", "8", "--delta-sink", copy / "output",
                              "--idle", "0", "--format", "json").output)
    assert plan["notes"][1:] == ["Delta sink: restore the table from version 13 to version 8 in a commit that sets the "
                                 "query's txn from 12 to 8 (removes 0 row(s) in 0 file(s) of versions 9..13)"]
    assert plan["warnings"] == ["--execute would refuse: the Delta table has commits after version 8 that are not this "
                                "query's (no txn of its id, or no JSON file): version(s) 13; restoring removes what they "
                                "wrote (--force restores anyway)"]


def test_a_restore_back_to_the_latest_batch_is_no_finding(copy):
    restore_below(copy)
    deltalake.DeltaTable(str(copy / "output")).restore(12)
    check(copy, "--select", "WM086,WM087", exit_code=0)


def test_a_delta_sink_that_is_no_delta_table_is_one_line_exit_2(copy):
    before = tree(copy)
    result = run_cli("check", copy / "checkpoint", "--delta-sink", copy / "input", exit_code=2)
    assert result.output == (f"Error: no _delta_log/ commits in {copy / 'input'}: not a Delta table (hint: pass the "
                             "table's directory (the path the query writes to), or omit --delta-sink)\n")
    assert tree(copy) == before


CASES = ("control", "recreated", "restored", "repaired", "recreated+rewound", "rewound-twice")


@pytest.fixture(scope="module")
def restarts(tmp_path_factory):
    """Each case's copy prepared and checked, then restarted with INPUT by Spark in one child: (checks, outcomes)."""
    delta_python()
    checks, plans, jobs = {}, {}, []
    for case in CASES:
        root = copy_of(tmp_path_factory.mktemp(case.replace("+", "-")) / NAME)
        if case.startswith("recreated"):
            recreate(root)
        if case in ("restored", "repaired"):
            restore_below(root)
        if case == "repaired":
            run_cli("rewind", root / "checkpoint", "--to-batch", "8", "--delta-sink", root / "output", "--execute",
                    "--force", "--idle", "0")
        if case == "recreated+rewound":
            rewind = ("rewind", root / "checkpoint", "--to-batch", "8", "--delta-sink", root / "output", "--idle", "0")
            plans[case] = json.loads(run_cli(*rewind, "--format", "json").output)
            run_cli(*rewind, "--execute")
        if case == "rewound-twice":
            for batch in ("8", "7"):
                run_cli("rewind", root / "checkpoint", "--to-batch", batch, "--delta-sink", root / "output", "--execute",
                        "--idle", "0")
        checks[case] = (findings(root), recreated_message(root) if case.startswith("recreated") else None)
        jobs.append({"root": str(root), "input": INPUT})
    out = restart("delta_restarts.py", jobs)
    return checks, dict(zip(CASES, out["jobs"])), out["control"], plans


@pytest.mark.spark
def test_the_control_run_writes_batches_13_and_14(restarts):
    checks, outcomes, fixture_rows, _ = restarts
    assert checks["control"][0] == []
    got = outcomes["control"]
    assert (got["error"], got["batches"], got["version"], got["txn"]) == (None, [13, 14], 14, 14)
    assert got["rows"] == sorted([*fixture_rows, *NEW_ROWS]) and len(got["rows"]) == 22


@pytest.mark.spark
def test_wm086_a_re_created_table_gets_the_restarts_batches_only(restarts):
    checks, outcomes, fixture_rows, _ = restarts
    (found,), message = checks["recreated"]
    assert (found["code"], found["message"]) == ("WM086", message)
    got = outcomes["recreated"]
    assert (got["error"], got["batches"], got["version"], got["txn"]) == (None, [13, 14], 2, 14)
    assert got["rows"] == NEW_ROWS  # batches 0..12's 17 rows are not written again


@pytest.mark.spark
def test_wm087_a_restored_table_never_gets_the_lost_batches_again(restarts):
    checks, outcomes, _, _ = restarts
    (found,), _ = checks["restored"]
    assert (found["code"], found["message"]) == ("WM087", RESTORED)
    got, control = outcomes["restored"], outcomes["control"]
    assert (got["error"], got["batches"], got["version"], got["txn"]) == (None, [13, 14], 15, 14)
    assert set(got["rows"]) < set(control["rows"]) and len(got["rows"]) == 22 - 6


@pytest.mark.spark
def test_wm087s_fix_makes_the_restart_write_the_control_runs_rows(restarts):
    """The restored copy rewound to batch 8 with --delta-sink --execute --force: check finds nothing, the restart
    writes batches 9..13 (one batch fewer than the control run's 9..12 and 13, 14: the new file and what the rewound
    batches read are planned again) and the table holds exactly the control run's rows."""
    checks, outcomes, _, _ = restarts
    assert checks["repaired"][0] == []
    got, control = outcomes["repaired"], outcomes["control"]
    assert (got["error"], got["batches"], got["txn"]) == (None, [9, 10, 11, 12, 13], 13)
    assert got["rows"] == control["rows"]


def test_the_python_api_takes_the_delta_sink(copy):
    import wmcheck

    restore_below(copy)
    found = wmcheck.check(str(copy / "checkpoint"), delta_sink=str(copy / "output"))
    placeholders = RESTORED.replace("--execute", "{{execute}}").replace("--force", "{{force}}")  # as library text
    assert [(f.code, f.path, f.message) for f in found] == [
        ("WM087", "../output/_delta_log/00000000000000000013.json", placeholders)]
    assert wmcheck.check(str(copy / "checkpoint")) == []


@pytest.mark.spark
def test_a_re_created_table_gets_the_batches_a_rewind_runs_again(restarts):
    """Re-created, then rewound to batch 8 with --delta-sink: the plan says the table holds no txn of the query and
    the re-run batches 9..12 are written (nothing to restore); check still reports WM086 (batches 0..8 are not in the
    table); the restart writes the re-run batches and the new one: the 6 rows of batches 9..12 (those the restored
    table misses) and the 5 new ones."""
    checks, outcomes, _, plans = restarts
    sink = plans["recreated+rewound"]["sinks"][0]
    assert (sink["committed"], [(b["batch"], b["action"]) for b in sink["batches"]], sink["restore"]) == (
        None, [(9, "write"), (10, "write"), (11, "write"), (12, "write")], None)
    assert sink["summary"] == "the table holds no txn for this query: the re-run batches 9..12 are written"
    (found,), message = checks["recreated+rewound"]
    assert (found["code"], found["message"]) == ("WM086", message.replace("batches up to 12", "batches up to 8").replace(
        "batches 13 on", "batches 9 on").replace("batches 0..12", "batches 0..8"))
    got = outcomes["recreated+rewound"]
    lost = set(outcomes["control"]["rows"]) - set(outcomes["restored"]["rows"])
    assert (got["error"], got["batches"][0], got["txn"]) == (None, 9, got["batches"][-1])
    assert got["rows"] == sorted([*lost, *NEW_ROWS]) and len(got["rows"]) == 6 + 5


@pytest.mark.spark
def test_rewound_twice_with_the_delta_sink_the_table_holds_the_control_runs_rows(restarts):
    """rewind --to-batch 8, then --to-batch 7, each with --delta-sink --execute (the second restores to version 7,
    before batch 8's own commit, not to before the first restore): the restart writes batch 8 on once, and the table
    holds exactly the control run's rows."""
    checks, outcomes, _, _ = restarts
    assert checks["rewound-twice"][0] == []
    got, control = outcomes["rewound-twice"], outcomes["control"]
    assert (got["error"], got["batches"][0], got["txn"]) == (None, 8, got["batches"][-1])
    assert got["rows"] == control["rows"]
