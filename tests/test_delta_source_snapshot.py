"""``check --delta-source PATH`` when the next batch goes on inside the query's starting snapshot: copies of
fixtures/delta_source_agg rewound to batch 1 (its end offset: version 3, index 1, isStartingVersion; the next batch
reads the snapshot of version 3 from index 2, then versions 4..9), their source table then changed, each restarted by
delta-spark 4.4 (tests/delta_source_restarts.py, one child) next to an untouched rewound copy (the control run).

Found by those restarts: a snapshot file after the index deleted fails the batch that reads it with
FAILED_READ_FILE.FILE_NOT_EXIST, also with failOnDataLoss=false, and with spark.sql.files.ignoreMissingFiles=true that
batch reads nothing and the rest read on (WM091); one before the index (read already) changes nothing (no finding);
the JSON commits before version 9 removed after a checkpoint at 9, so that no checkpoint at or before version 3 is
there, fails the restart with DELTA_LOG_FILE_NOT_FOUND_FOR_STREAMING_SOURCE, also with failOnDataLoss=false (WM090);
the JSON commits before version 3 removed after a checkpoint at 3 change nothing (Delta rebuilds the snapshot from
it: no finding).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from delta_spark import delta_python, relocated_copy, restart
from test_delta_source_check import error_class

from wmcheck.checkpoint.sources.delta_files import DeltaSourceLog

from conftest import run_cli

deltalake = pytest.importorskip("deltalake")

NAME = "delta_source_agg"
CONTROL = [[2, 3], [3, 3], [4, 3], [5, 4], [6, 3], [7, 3], [8, 3], [9, 3], [10, 0]]
"""The control run's batches (id, input rows): the snapshot's files 2 and 3, then versions 4..9."""
SNAPSHOT = "the snapshot of version 3 that Delta source 0's next batch goes on reading (batch 1's end offset: index 1 " \
           "of its files, isStartingVersion)"
FILES = (f"1 data file(s) of {SNAPSHOT}, after that index (not read yet), are gone from the table's directory "
         "(vacuumed or deleted): the batch that reads them fails with FAILED_READ_FILE.FILE_NOT_EXIST, also with the "
         "source option failOnDataLoss=false; with spark.sql.files.ignoreMissingFiles=true it reads on without their "
         "rows (tested with delta-spark 4.4)")
LOST = (f"the table's log can no longer rebuild {SNAPSHOT}: its JSON commits start at version 9 and no checkpoint at "
        "or before version 3 is there. The restart fails with DELTA_LOG_FILE_NOT_FOUND_FOR_STREAMING_SOURCE, also with "
        "the source option failOnDataLoss=false (tested with delta-spark 4.4)")
LOST_FIX = ("restore the table's log files up to version 3 (its JSON commits, or a checkpoint at or before it) from a "
            "backup; else start the query from a new checkpoint")


def rewound(root: Path) -> Path:
    relocated_copy(NAME, root, "--file-sink", root / "output")
    run_cli("rewind", root / "checkpoint", "--to-batch", "1", "--file-sink", root / "output", "--execute", "--idle", "0")
    return root


def snapshot_file(root: Path, index: int) -> str:
    """The path of the snapshot of version 3's file at ``index`` (the order DeltaSource serves them in)."""
    return DeltaSourceLog(str(root / "source")).snapshot(3)[index].path


def delete_snapshot_file(root: Path, index: int) -> None:
    (root / "source" / snapshot_file(root, index)).unlink()


def checkpoint_and_clean(root: Path, version: int) -> None:
    """A Parquet checkpoint at ``version`` (deltalake), the JSON commits (and .crc) before it removed."""
    deltalake.DeltaTable(str(root / "source"), version=version).create_checkpoint()
    log = root / "source" / "_delta_log"
    for name in os.listdir(log):
        if name[:20].isdigit() and int(name[:20]) < version and name.endswith((".json", ".crc")):
            (log / name).unlink()


CASES = {
    "control": (None, {}, {}),
    "unread-gone": (lambda r: delete_snapshot_file(r, 2), {}, {}),
    "unread-gone-nofail": (lambda r: delete_snapshot_file(r, 2), {"failOnDataLoss": "false"}, {}),
    "unread-gone-ignore": (lambda r: delete_snapshot_file(r, 2), {}, {"spark.sql.files.ignoreMissingFiles": "true"}),
    "read-gone": (lambda r: delete_snapshot_file(r, 0), {}, {}),
    "log-gone": (lambda r: checkpoint_and_clean(r, 9), {}, {}),
    "log-gone-nofail": (lambda r: checkpoint_and_clean(r, 9), {"failOnDataLoss": "false"}, {}),
    "log-checkpointed": (lambda r: checkpoint_and_clean(r, 3), {}, {}),
}
"""case -> (what is done to the rewound copy's source table, the restart's source options, its Spark conf)."""


def findings(root: Path) -> list[dict]:
    return json.loads(run_cli("check", root / "checkpoint", "--delta-source", root / "source", "--format", "json",
                              exit_code=None).output)


@pytest.fixture(scope="module")
def restarts(tmp_path_factory):
    """Each case's copy prepared and checked, then restarted in one child: (roots, findings, outcomes)."""
    delta_python()
    roots, checks, jobs = {}, {}, []
    for case, (damage, options, conf) in CASES.items():
        roots[case] = root = rewound(tmp_path_factory.mktemp(case) / NAME)
        if damage is not None:
            damage(root)
        checks[case] = findings(root)
        jobs.append({"root": str(root), "options": options, "conf": conf})
    out = restart("delta_source_restarts.py", jobs)
    return roots, checks, dict(zip(CASES, out["jobs"]))


@pytest.mark.spark
def test_the_control_run_reads_the_rest_of_the_snapshot_then_versions_4_to_9(restarts):
    _, checks, outcomes = restarts
    assert checks["control"] == []
    assert (error_class(outcomes["control"]), outcomes["control"]["batches"]) == (None, CONTROL)


@pytest.mark.spark
@pytest.mark.parametrize("case", ["unread-gone", "unread-gone-nofail"])
def test_wm091_a_snapshot_file_not_read_yet_gone_fails_the_batch_that_reads_it(restarts, case):
    roots, checks, outcomes = restarts
    path = snapshot_file(roots["control"], 2)
    assert [(f["code"], f["path"], f["message"], f["fix"]["text"]) for f in checks[case]] == [
        ("WM091", f"../source/{path}", FILES, "restore the files from a backup; to go on without their rows, restart "
         "the query with spark.sql.files.ignoreMissingFiles=true")]
    got = outcomes[case]
    assert (error_class(got), got["batches"]) == ("FAILED_READ_FILE.FILE_NOT_EXIST", [])
    assert path in got["error"]


@pytest.mark.spark
def test_wm091s_fix_ignore_missing_files_reads_on_without_its_rows(restarts):
    got, control = restarts[2]["unread-gone-ignore"], restarts[2]["control"]
    assert (error_class(got), got["batches"]) == (None, [[2, 0], *CONTROL[1:]])
    assert set(got["rows"]) != set(control["rows"])


@pytest.mark.spark
@pytest.mark.parametrize("case", ["read-gone", "log-checkpointed"])
def test_a_snapshot_file_read_already_or_a_log_rebuilt_from_a_checkpoint_is_no_finding(restarts, case):
    """The snapshot's file at index 0 (batch 0's) deleted, or the JSON commits before version 3 removed after a
    checkpoint at 3: no finding, and the restart is the control run's."""
    _, checks, outcomes = restarts
    assert checks[case] == []
    got, control = outcomes[case], outcomes["control"]
    assert (error_class(got), got["batches"], got["rows"]) == (None, CONTROL, control["rows"])


@pytest.mark.spark
@pytest.mark.parametrize("case", ["log-gone", "log-gone-nofail"])
def test_wm090_a_snapshot_the_log_cannot_rebuild_fails_the_restart(restarts, case):
    _, checks, outcomes = restarts
    assert [(f["code"], f["path"], f["message"], f["fix"]["text"]) for f in checks[case]] == [
        ("WM090", "../source/_delta_log", LOST, LOST_FIX)]
    got = outcomes[case]
    assert (error_class(got), got["batches"]) == ("DELTA_LOG_FILE_NOT_FOUND_FOR_STREAMING_SOURCE", [])
