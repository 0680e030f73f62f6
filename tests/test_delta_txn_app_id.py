"""``--delta-txn-app-id`` on copies of fixtures/foreach_batch_delta, whose foreachBatch function writes its Delta table
with the writer options txnAppId=foreach_batch_delta and txnVersion=the batch id (so the table's txn actions are that
app id's, not the query id's), and what Delta really does on restarts by delta-spark 4.4 in one child
(tests/delta_restarts.py), compared with the control run (the fixture's table, written from scratch):

* check with the option reports nothing; without it WM086 names the other app id and the option;
* rewound to batch 8 (checkpoint only): the plan with the option says Delta skips 9..12; the restart writes nothing
  (the table keeps its 13 versions and the control run's rows), and fails at batch 9 (Spark 4.2's state store commit
  validation: the skipped write ran no job) unless that validation is off, when it re-runs 9..12;
* rewound with the option and ``--execute``: the table is restored in a commit whose txn for the app id is 8, the
  restart writes 9..12 again and the table holds exactly the control run's rows; undone: the table is restored back
  (txn 12) and the restart writes nothing to it;
* the table restored below batches 9..12 (deltalake): with the option WM087, whose txn is the app id's; restarted
  with one more input file, the function writes 13 and 14 only and the 6 rows of 9..12 never come back; after the
  finding's rewind (the option kept, ``--execute --force``) it writes 9..13 and the table holds the control run's rows.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from delta_spark import delta_python, relocated_copy, restart
from test_delta_check import INPUT, NEW_ROWS, restore_below

from conftest import FIXTURES, run_cli

NAME = "foreach_batch_delta"
APP = "foreach_batch_delta"
QUERY_ID = json.loads((FIXTURES / NAME / "checkpoint" / "metadata").read_text())["id"]
SKIPS = [(9, "skip", 9, 0, 0), (10, "skip", 10, 2, 2), (11, "skip", 11, 2, 3), (12, "skip", 12, 1, 1)]
SUMMARY = ("the table's txn for app id foreach_batch_delta is at 12: Delta skips the re-run batches 9..12 and writes "
           "nothing for them (their 6 row(s) stay as first written; restore the table to the version before batch 9's "
           "commit and lower the txn for the re-run batches to reach the table); a stateful query then fails batch 9 on "
           "Spark 4.2 unless spark.sql.streaming.stateStore.commitValidation.enabled=false: the skipped write runs no "
           "job, so its state stores never commit (tested with delta-spark 4.4)")


def copy_of(root: Path) -> Path:
    return relocated_copy(NAME, root)


@pytest.fixture
def copy(tmp_path) -> Path:
    return copy_of(tmp_path / NAME)


def _created(root: Path) -> str:
    from wmcheck.checkpoint.sinks.delta import read_delta_log
    from wmcheck.checkpoint.timeutil import format_ms

    return format_ms(read_delta_log(str(root / "output")).commit(0).timestamp_ms)


def test_check_with_the_app_id_reports_nothing(copy):
    assert run_cli("check", copy / "checkpoint", "--delta-sink", copy / "output", "--delta-txn-app-id", APP,
                   exit_code=0).output == f"{copy / 'checkpoint'}: ok: 0 error(s), 0 warning(s) from 80 checks\n"


def test_without_the_app_id_wm086_names_the_other_app_id_and_the_option(copy):
    import wmcheck

    message = (
        f"the Delta table holds no txn of query {QUERY_ID}, whose checkpoint committed batches up to 12, but one of "
        "app id foreach_batch_delta at 12: if the query's foreachBatch function writes the table with the writer "
        "options txnAppId=foreach_batch_delta and txnVersion=the batch id (Delta then skips a batch id at most that "
        "txn), pass --delta-txn-app-id foreach_batch_delta to check it by that app id; else the table was re-created "
        f"at its path (its version 0 was written at {_created(copy)}) and written by another writer, or is another "
        "table, and the restart writes batches 13 on only: the rows batches 0..12 wrote are not in the table and are "
        "not written again (tested with delta-spark 4.4)")
    found = json.loads(run_cli("check", copy / "checkpoint", "--delta-sink", copy / "output", "--format", "json",
                               exit_code=1).output)
    assert [(f["code"], f["severity"], f["path"], f["message"]) for f in found] == [
        ("WM086", "error", "../output/_delta_log", message)]
    api = wmcheck.check(str(copy / "checkpoint"), delta_sink=str(copy / "output"))
    assert [(f.code, f.message) for f in api] == [
        ("WM086", message.replace("--delta-txn-app-id foreach_batch_delta", "{{delta_txn_app_id=foreach_batch_delta}}"))]
    assert wmcheck.check(str(copy / "checkpoint"), delta_sink=str(copy / "output"), delta_txn_app_id=APP) == []


def test_with_an_app_id_the_table_lacks_wm086_names_it(copy):
    found = json.loads(run_cli("check", copy / "checkpoint", "--delta-sink", copy / "output", "--delta-txn-app-id",
                               "other", "--format", "json", exit_code=1).output)
    assert [(f["code"], f["message"]) for f in found] == [("WM086", (
        f"the Delta table holds no txn of app id other (--delta-txn-app-id) of query {QUERY_ID}, whose checkpoint "
        f"committed batches up to 12: the table was re-created at its path (its version 0 was written at "
        f"{_created(copy)}), or is another table. The restart writes batches 13 on only: the rows batches 0..12 "
        "wrote are not in the table and are not written again (tested with delta-spark 4.4)"))]


@pytest.mark.parametrize("command", [("check",), ("rewind", "--to-batch", "8", "--idle", "0")])
def test_the_app_id_without_the_delta_sink_is_one_line_exit_2(copy, command):
    result = run_cli(command[0], copy / "checkpoint", *command[1:], "--delta-txn-app-id", APP, exit_code=2)
    assert result.output == ("Error: --delta-txn-app-id names the txn app id of the Delta sink's table: it needs "
                             "--delta-sink PATH (hint: pass --delta-sink PATH (the table's directory) with it)\n")


@pytest.mark.parametrize("command", [("check",), ("rewind", "--to-batch", "8", "--idle", "0")])
def test_an_empty_app_id_is_one_line_exit_2(copy, command):
    result = run_cli(command[0], copy / "checkpoint", *command[1:], "--delta-sink", copy / "output",
                     "--delta-txn-app-id", "", exit_code=2)
    assert result.output == ("Error: --delta-txn-app-id is empty: expected the txnAppId writer option of the table's "
                             "writer (hint: pass the app id, or omit --delta-txn-app-id (the query id))\n")


def test_the_rewind_plan_judges_the_table_by_the_app_id(copy):
    import wmcheck

    plan = json.loads(run_cli("rewind", copy / "checkpoint", "--to-batch", "8", "--delta-sink", copy / "output",
                              "--delta-txn-app-id", APP, "--idle", "0", "--format", "json").output)
    (sink,) = plan["sinks"]
    assert (sink["query_id"], sink["txn_app_id"], sink["committed"], sink["summary"]) == (QUERY_ID, APP, 12, SUMMARY)
    assert [(b["batch"], b["action"], b["version"], b["files"], b["rows"]) for b in sink["batches"]] == SKIPS
    assert sink["restore"] == {"to_version": 8, "from_version": 12, "txn": 8, "txn_before": 12, "rows": 6, "files": 5,
                               "other_writers": []}
    assert plan["notes"][1:] == ["Delta sink: restore the table from version 12 to version 8 in a commit that sets the "
                                 "txn of app id foreach_batch_delta from 12 to 8 (removes 6 row(s) in 5 file(s) of "
                                 "versions 9..12)"]
    text = run_cli("rewind", copy / "checkpoint", "--to-batch", "8", "--delta-sink", copy / "output",
                   "--delta-txn-app-id", APP, "--idle", "0").output
    assert f"What the delta sink does with the re-run batches: {SUMMARY}\n" in text
    api = wmcheck.rewind(str(copy / "checkpoint"), to_batch=8, delta_sink=str(copy / "output"), delta_txn_app_id=APP)
    assert api.plan.sinks[0].to_json() == sink
    without = json.loads(run_cli("rewind", copy / "checkpoint", "--to-batch", "8", "--delta-sink", copy / "output",
                                 "--idle", "0", "--format", "json").output)["sinks"][0]
    assert (without["txn_app_id"], without["committed"], without["restore"]) == (None, None, None)
    assert without["summary"] == "the table holds no txn for this query: the re-run batches 9..12 are written"


STREAM_FAILED = f"[STREAM_FAILED] Query [id = {QUERY_ID}, runId = "
CASES = ("control", "rewound", "rewound-unvalidated", "repaired", "undone", "control+input", "restored",
         "restored-repaired")
WITH_INPUT = ("control+input", "restored", "restored-repaired")
"""The cases given test_delta_check's one more input file (batches 13 and 14 emit its 5 new windows)."""
UNVALIDATED = {"spark.sql.streaming.stateStore.commitValidation.enabled": "false"}


@pytest.fixture(scope="module")
def restarts(tmp_path_factory):
    """Each case's copy: untouched (control), rewound to batch 8 (checkpoint only), rewound with --delta-sink
    --delta-txn-app-id --execute (repaired), and that undone; then restarted by Spark in one child:
    (plans, outcomes, the control run's rows, check's findings with the app id). The WITH_INPUT cases get one more input
    file: untouched (control+input), the table restored to version 8 by deltalake (restored: WM087), and that
    restored table repaired by WM087's fix with --execute --force (restored-repaired)."""
    delta_python()
    plans, found, jobs = {}, {}, []
    for case in CASES:
        root = copy_of(tmp_path_factory.mktemp(case.replace("+", "-")) / NAME)
        sink = ("--delta-sink", root / "output", "--delta-txn-app-id", APP)
        rewind = ("rewind", root / "checkpoint", "--to-batch", "8", "--idle", "0")
        if case.startswith("restored"):
            restore_below(root)
        if case == "restored-repaired":
            run_cli(*json.loads(run_cli("check", root / "checkpoint", *sink, "--format", "json", exit_code=1).output)[0]
                    ["fix"]["text"].split()[1:], "--execute", "--force", "--idle", "0")
        elif case not in WITH_INPUT and case != "control":
            plans[case] = json.loads(run_cli(*rewind, *sink, "--format", "json").output)
            run_cli(*rewind, *(sink if case in ("repaired", "undone") else ()), "--execute")
        if case == "undone":
            run_cli("undo", root / "checkpoint", "--idle", "0")
        found[case] = json.loads(run_cli("check", root / "checkpoint", *sink, "--format", "json", exit_code=None).output)
        jobs.append({"root": str(root), "fixture": NAME, "app_id": APP, "input": INPUT if case in WITH_INPUT else None,
                     "conf": UNVALIDATED if case == "rewound-unvalidated" else {}})
    out = restart("delta_restarts.py", jobs)
    return plans, dict(zip(CASES, out["jobs"])), out["controls"][NAME], found


@pytest.mark.spark
def test_the_control_restart_writes_nothing_new(restarts):
    _, outcomes, control, _ = restarts
    got = outcomes["control"]  # one batch without input, 13, which commits no table version
    assert (got["error"], got["batches"], got["version"], got["txn"]) == (None, [13], 12, 12)
    assert got["rows"] == control


@pytest.mark.spark
def test_after_a_rewind_delta_skips_the_re_run_batches_as_the_plan_says(restarts):
    """The plan (with the app id) says skip for 9..12; Spark re-runs batch 9, the function's write is skipped by Delta
    (its DataFrame never runs): the table keeps version 12, txn 12 and the control run's rows. Found by this restart:
    pyspark 4.2 then fails the query (the batch's state stores never committed: "Not all StateStores committed for
    batch 9"), so the restart writes nothing new and does not get past batch 9 either."""
    plans, outcomes, control, _ = restarts
    sink = plans["rewound"]["sinks"][0]
    assert [(b["batch"], b["action"], b["version"], b["files"], b["rows"]) for b in sink["batches"]] == SKIPS
    got = outcomes["rewound"]
    assert (got["error"][:len(STREAM_FAILED)], got["batches"], got["version"], got["txn"]) == (STREAM_FAILED, [], 12, 12)
    assert got["error"].endswith("terminated with exception: Exception thrown in awaitResult:  SQLSTATE: XXKST")
    assert got["rows"] == control


@pytest.mark.spark
def test_after_a_rewind_without_state_commit_validation_the_restart_writes_nothing_new(restarts):
    """The same rewind, restarted with spark.sql.streaming.stateStore.commitValidation.enabled=false: Spark runs
    batches 9..11 again (12, a batch without input, is not planned again), Delta skips each write, and the table
    keeps version 12, txn 12 and the control run's rows."""
    plans, outcomes, control, _ = restarts
    assert plans["rewound-unvalidated"]["sinks"][0]["summary"] == SUMMARY
    got = outcomes["rewound-unvalidated"]
    assert (got["error"], got["batches"], got["version"], got["txn"]) == (None, [9, 10, 11], 12, 12)
    assert got["rows"] == control


@pytest.mark.spark
def test_rewind_execute_with_the_app_id_makes_the_restart_write_the_control_runs_rows(restarts):
    """The table restored to version 8 in a commit (version 13) whose txn for the app id is 8: the restart writes
    9..12 again (versions 14..17) and the table holds exactly the control run's rows."""
    _, outcomes, control, _ = restarts
    got = outcomes["repaired"]
    assert (got["error"], got["batches"], got["version"], got["txn"]) == (None, [9, 10, 11, 12], 17, 12)
    assert got["rows"] == control


@pytest.mark.spark
def test_undo_restores_the_table_back(restarts):
    """undo restores the table again (version 14, version 12's files, txn 12): the restarted query runs batch 13 as
    the control run does, which writes nothing to it, and the table holds the control run's rows."""
    _, outcomes, control, _ = restarts
    got = outcomes["undone"]
    assert (got["error"], got["batches"], got["version"], got["txn"]) == (None, [13], 14, 12)
    assert got["rows"] == control and len(control) == 17


RESTORED = ("the Delta table was restored to version 8 (version 13) below 4 batches the query committed (9..12): their "
            "6 row(s) are gone from it while its txn for app id foreach_batch_delta stays at 12. The restart writes "
            "batches 13 on only and never writes 9..12 again (tested with delta-spark 4.4). The rewind restores the "
            "table to before batch 9's commit with the txn lowered, so that the restart writes them again (its own "
            "restore commit counts as another writer's: --execute needs --force)")


def test_a_restored_table_is_wm087_by_the_app_id(copy):
    """deltalake's restore to version 8 keeps the app id's txn at 12: with the option, WM087, fixed by the rewind that
    keeps the option; without it, WM086 names the app id (the table holds no txn of the query id)."""
    restore_below(copy)
    found = json.loads(run_cli("check", copy / "checkpoint", "--delta-sink", copy / "output", "--delta-txn-app-id", APP,
                               "--format", "json", exit_code=1).output)
    assert found == [{
        "code": "WM087", "severity": "error", "checkpoint": str(copy / "checkpoint"),
        "path": "../output/_delta_log/00000000000000000013.json", "message": RESTORED,
        "fix": {"kind": "rewind", "text": f"wmcheck rewind {copy / 'checkpoint'} --to-batch 8 --delta-sink "
                f"{copy / 'output'} --delta-txn-app-id {APP}",
                "request": {"to_batch": 8, "delta_sink": str(copy / "output"), "delta_txn_app_id": APP}}}]
    without = json.loads(run_cli("check", copy / "checkpoint", "--delta-sink", copy / "output", "--format", "json",
                                 exit_code=1).output)
    assert [f["code"] for f in without] == ["WM086"]


@pytest.mark.spark
def test_wm087_by_the_app_id_the_restart_never_writes_the_lost_batches_again(restarts):
    """The restored table (txn 12, batches 9..12's 6 rows gone) restarted with one more input file: the function
    writes batches 13 and 14 (txn 14), and the table holds the control run's rows but those 6, for good."""
    _, outcomes, _, found = restarts
    assert [(f["code"], f["message"]) for f in found["restored"]] == [("WM087", RESTORED)]
    control, got = outcomes["control+input"], outcomes["restored"]
    assert (control["error"], control["batches"], control["version"], control["txn"]) == (None, [13, 14], 14, 14)
    assert found["control+input"] == [] and len(control["rows"]) == 22 and set(NEW_ROWS) < set(control["rows"])
    assert (got["error"], got["batches"], got["version"], got["txn"]) == (None, [13, 14], 15, 14)
    assert set(got["rows"]) < set(control["rows"]) and len(got["rows"]) == 22 - 6


@pytest.mark.spark
def test_wm087s_fix_by_the_app_id_makes_the_restart_write_the_control_runs_rows(restarts):
    """The restored table repaired by the finding's own rewind (with --delta-txn-app-id, --execute --force): check
    then finds nothing, the restart's function writes batches 9..13 and the table holds exactly the control run's
    rows."""
    _, outcomes, _, found = restarts
    assert found["restored-repaired"] == []
    got = outcomes["restored-repaired"]
    assert (got["error"], got["batches"], got["txn"]) == (None, [9, 10, 11, 12, 13], 13)
    assert got["rows"] == outcomes["control+input"]["rows"]
