"""A VACUUM of the query's Delta sink table changes nothing for the restart (no check code): copies of
fixtures/agg_window_delta given one more input file, vacuumed with retention 0 (deltalake) and restarted by delta-spark
4.4 (tests/delta_restarts.py, one child), next to an untouched copy (the control run). Spark's Delta sink keys on the
table's ``txn`` action, which a VACUUM keeps (it removes only data files no live version needs): an untouched table loses
no file and gets batches 13 and 14; one that ``rewind --delta-sink --execute --force`` restored below batches 9..12
(WM087's fix) loses the files of those batches' first writes, and the restart writes them again all the same."""
from __future__ import annotations

import json

import pytest
from delta_spark import delta_python, restart
from test_delta_check import INPUT, NEW_ROWS, copy_of, restore_below

from conftest import run_cli

NAME = "agg_window_delta"
CASES = ("control", "vacuumed", "repaired-vacuumed")


def written_files(root, versions) -> list[str]:
    """The data files the table's commits of ``versions`` added."""
    log = root / "output" / "_delta_log"
    return sorted(json.loads(line)["add"]["path"] for v in versions for line in (log / f"{v:020d}.json").read_text()
                  .splitlines() if '"add"' in line)


@pytest.fixture(scope="module")
def restarts(tmp_path_factory):
    delta_python()
    jobs, first_writes = [], {}
    for case in CASES:
        root = copy_of(tmp_path_factory.mktemp(case) / NAME)
        first_writes[case] = written_files(root, range(9, 13))
        if case == "repaired-vacuumed":
            restore_below(root)
            run_cli("rewind", root / "checkpoint", "--to-batch", "8", "--delta-sink", root / "output", "--execute",
                    "--force", "--idle", "0")
        jobs.append({"root": str(root), "input": INPUT, "vacuum": case != "control"})
    out = restart("delta_restarts.py", jobs)
    return dict(zip(CASES, out["jobs"])), out["control"], first_writes


@pytest.mark.spark
def test_a_vacuum_of_the_sink_table_removes_nothing_and_the_restart_is_the_control_runs(restarts):
    outcomes, fixture_rows, _ = restarts
    control, got = outcomes["control"], outcomes["vacuumed"]
    assert (control["error"], control["batches"], control["txn"]) == (None, [13, 14], 14)
    assert control["rows"] == sorted([*fixture_rows, *NEW_ROWS])
    assert got["vacuumed"] == []
    assert (got["error"], got["batches"], got["version"], got["txn"], got["rows"]) == (
        None, [13, 14], 14, 14, control["rows"])


@pytest.mark.spark
def test_a_vacuum_after_the_delta_sink_repair_does_not_stop_the_rewrite(restarts):
    """The restored-and-repaired table's VACUUM deletes the files of batches 9..12's first writes (no live version
    holds them); the restart writes 9..13 and the table holds exactly the control run's rows."""
    outcomes, _, first_writes = restarts
    got = outcomes["repaired-vacuumed"]
    assert set(first_writes["repaired-vacuumed"]) <= set(got["vacuumed"]) and first_writes["repaired-vacuumed"]
    assert (got["error"], got["batches"], got["txn"], got["rows"]) == (
        None, [9, 10, 11, 12, 13], 13, outcomes["control"]["rows"])
