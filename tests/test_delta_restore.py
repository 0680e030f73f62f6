"""The sink-side step of ``rewind --delta-sink --execute`` on copies of fixtures/agg_window_delta, without Spark
(deltalake restores, wmcheck's JVM-free log reader checks): the plan's restore, the backup manifest's version, undo
restoring the table and the txn, a kill between the checkpoint side and the table side resumed and undone, the
refusals (another writer, a table changed since the plan, no deltalake). What Spark then writes: tests/test_delta_sink.py.
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from test_repair_execute import tree

from wmcheck.checkpoint.repair._hooks import injected
from wmcheck.checkpoint.sinks.delta import read_delta_log

from conftest import FIXTURES, fixture_facts, run_cli

deltalake = pytest.importorskip("deltalake")

NAME = "agg_window_delta"
QUERY_ID = json.loads((FIXTURES / NAME / "checkpoint" / "metadata").read_text())["id"]
RESTORE = {"to_version": 8, "from_version": 12, "txn": 8, "txn_before": 12, "rows": 6, "files": 5, "other_writers": []}
RESTORE_AGAIN = {"to_version": 7, "from_version": 13, "txn": 7, "txn_before": 8, "rows": 2, "files": 2,
                 "other_writers": []}
"""After the first repair, a rewind to 7: batch 8's 2 rows of version 8 (versions 9..12's files are gone already)."""
NOTE = ("Delta sink: restore the table from version 12 to version 8 in a commit that sets the query's txn from 12 to 8 "
        "(removes 6 row(s) in 5 file(s) of versions 9..12)")


@pytest.fixture
def copy(tmp_path) -> Path:
    root = tmp_path / NAME
    shutil.copytree(FIXTURES / NAME, root)
    run_cli("relocate", root / "checkpoint", "--path-map", f"{fixture_facts(NAME)['root']}={root}", "--execute",
            "--idle", "0")
    return root


def rewind(root: Path, *extra: str, exit_code: int = 0):
    return run_cli("rewind", root / "checkpoint", "--to-batch", "8", "--delta-sink", root / "output", "--idle", "0",
                   *extra, exit_code=exit_code)


def table(root: Path) -> tuple[int, int | None, frozenset[str]]:
    """The table's version, the query's txn and its live files, as wmcheck reads them."""
    log = read_delta_log(str(root / "output"))
    return log.version, log.txn_version(QUERY_ID), log.files


def files_at(root: Path, version: int) -> frozenset[str]:
    uris = deltalake.DeltaTable(str(root / "output"), version=version).file_uris()
    return frozenset(str(Path(u).relative_to(root / "output")) for u in uris)


def test_the_plan_names_the_restore_and_changes_nothing(copy):
    before = tree(copy)
    plan = json.loads(rewind(copy, "--format", "json").output)
    assert plan["sinks"][0]["restore"] == RESTORE
    assert NOTE in plan["notes"]
    assert tree(copy) == before


def test_execute_restores_the_table_and_lowers_the_txn_undo_restores_both(copy):
    old = table(copy)
    assert old[:2] == (12, 12)
    done = json.loads(rewind(copy, "--execute", "--format", "json").output)
    manifest = json.loads((Path(done["backup"]).parent / "manifest.json").read_text())
    assert (manifest["delta_table"], manifest["delta_version_before"]) == (str(copy / "output"), 12)
    now = table(copy)
    assert now == (13, 8, files_at(copy, 8)) and len(now[2]) == 9
    assert read_delta_log(str(copy / "output")).commit(13).operation == "RESTORE"
    run_cli("undo", copy / "checkpoint", "--idle", "0")
    assert table(copy) == (14, 12, old[2])


def test_a_kill_between_the_checkpoint_and_the_table_is_resumed(copy):
    steps = len(json.loads(rewind(copy, "--format", "json").output)["steps"])
    with injected(fail_after=steps), pytest.raises(AssertionError, match="InjectedFailure"):
        rewind(copy, "--execute")
    assert table(copy)[:2] == (12, 12)  # the checkpoint rewound, the table not yet
    assert "interrupted (apply)" in run_cli("backups", copy / "checkpoint").output
    rewind(copy, "--execute")
    assert table(copy)[:2] == (13, 8)
    again = json.loads(rewind(copy, "--execute", "--format", "json").output)  # a new plan: nothing runs again
    assert (again["steps"], again["sinks"][0]["batches"], again["sinks"][0]["restore"]) == ([], [], None)
    assert table(copy)[:2] == (13, 8)


def test_a_kill_between_the_checkpoint_and_the_table_is_undone(copy):
    before = tree(copy / "checkpoint")
    steps = len(json.loads(rewind(copy, "--format", "json").output)["steps"])
    with injected(fail_after=steps), pytest.raises(AssertionError, match="InjectedFailure"):
        rewind(copy, "--execute")
    run_cli("undo", copy / "checkpoint", "--idle", "0")
    assert table(copy)[:2] == (12, 12)
    assert tree(copy / "checkpoint") == before


def test_another_writers_commit_is_refused_unless_forced(copy):
    import pyarrow as pa

    schema = deltalake.DeltaTable(str(copy / "output")).schema().to_arrow()
    deltalake.write_deltalake(str(copy / "output"), pa.Table.from_pylist([], schema=pa.schema(schema)), mode="append")
    plan = json.loads(rewind(copy, "--format", "json").output)
    assert plan["sinks"][0]["restore"]["other_writers"] == [13]
    assert any("would refuse: the Delta table has commits after version 8 that are not this query's" in w
               for w in plan["warnings"])
    before = tree(copy)
    refused = rewind(copy, "--execute", exit_code=2)
    assert refused.output == ("Error: the Delta table has commits after version 8 that are not this query's (no txn "
                              "of its id, or no JSON file): version(s) 13; restoring removes what they wrote (--force "
                              "restores anyway)\n")
    assert tree(copy) == before
    rewind(copy, "--execute", "--force")
    assert table(copy)[:2] == (14, 8)


def test_a_table_written_since_the_plan_is_refused(copy, tmp_path):
    saved = tmp_path / "plan.json"
    rewind(copy, "--plan-out", saved)
    deltalake.DeltaTable(str(copy / "output")).restore(11)
    before = tree(copy)
    refused = rewind(copy, "--execute", "--from-plan", saved, exit_code=2)
    assert refused.output == ("Error: the Delta sink changed since the plan was made: its version 12 restored to 8 "
                              "then, its version 13 restored to 8 now (hint: plan again (without --from-plan) and "
                              "review the new plan)\n")
    assert tree(copy) == before


def test_without_deltalake_one_line_names_the_extra(copy, monkeypatch):
    monkeypatch.setitem(sys.modules, "deltalake", None)
    before = tree(copy)
    refused = rewind(copy, "--execute", exit_code=2)
    assert refused.output == ("Error: restoring the Delta table needs the deltalake package, which is not installed "
                              "(hint: pip install 'wmcheck[delta]')\n")
    assert tree(copy) == before


def test_undo_after_another_writers_commit_is_refused_and_changes_nothing(copy):
    import pyarrow as pa

    rewind(copy, "--execute")
    schema = deltalake.DeltaTable(str(copy / "output")).schema().to_arrow()
    deltalake.write_deltalake(str(copy / "output"), pa.Table.from_pylist([], schema=pa.schema(schema)), mode="append")
    before = tree(copy)
    refused = run_cli("undo", copy / "checkpoint", "--idle", "0", exit_code=2)
    assert refused.output == (f"Error: {copy / 'output'}: the Delta table is at version 14: something wrote to it after "
                              "the repair's restore (version 13) (hint: nothing was changed; stop the writer: before "
                              "the repair the table was at version 12, the query's txn 12)\n")
    assert tree(copy) == before
    assert table(copy)[:2] == (14, 8)


def test_a_second_rewind_restores_before_the_batchs_own_commit_not_the_restore(copy):
    """The restore commit that sets the txn to 8 writes no batch: rewound again to 7, batch 8 is the one of version 8,
    and the table goes back to version 7 (restoring to before the restore commit would keep batch 8's rows while the
    restart writes them again)."""
    rewind(copy, "--execute")
    again = json.loads(run_cli("rewind", copy / "checkpoint", "--to-batch", "7", "--delta-sink", copy / "output",
                               "--idle", "0", "--format", "json").output)
    sink = again["sinks"][0]
    assert [(b["batch"], b["action"], b["version"]) for b in sink["batches"]] == [(8, "skip", 8)]
    assert sink["restore"] == RESTORE_AGAIN
