"""wmcheck's JVM-free read of a Delta table's ``_delta_log`` (checkpoint/sinks/delta.py) on the table Spark's Delta
sink wrote for fixtures/agg_window_delta, and the section ``rewind --delta-sink`` adds to the plan in every format.
What Spark does with the batches the plan says it skips: tests/test_delta_sink.py."""
from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest
from test_repair_execute import tree

from wmcheck.checkpoint.errors import MalformedFileError, MissingFileError
from wmcheck.checkpoint.sinks.delta import read_delta_log, rerun_effect

from conftest import FIXTURES, run_cli

NAME = "agg_window_delta"
TABLE = FIXTURES / NAME / "output"
QUERY_ID = json.loads((FIXTURES / NAME / "checkpoint" / "metadata").read_text())["id"]
# per batch id of the rewound batches 9..12: (table version, files added, rows added), as delta-spark wrote them
WRITTEN = {9: (9, 0, 0), 10: (10, 2, 2), 11: (11, 2, 3), 12: (12, 1, 1)}
SUMMARY = ("the table's txn for this query is at 12: Spark's Delta sink skips the re-run batches 9..12 and writes "
           "nothing for them (their 6 row(s) stay as first written; restore the table to the version before batch 9's "
           "commit and lower the txn for the re-run batches to reach the table)")
# what --execute does to the table (tests/test_delta_restore.py makes it, tests/test_delta_sink.py restarts after it)
RESTORE = {"to_version": 8, "from_version": 12, "txn": 8, "txn_before": 12, "rows": 6, "files": 5, "other_writers": []}
NOTE = ("Delta sink: restore the table from version 12 to version 8 in a commit that sets the query's txn from 12 to 8 "
        "(removes 6 row(s) in 5 file(s) of versions 9..12)")


def test_the_log_gives_the_txn_and_every_batch_commit():
    log = read_delta_log(str(TABLE))
    assert (log.version, log.checkpoint, log.txn_version(QUERY_ID), log.txn_version("another query")) == (12, 10, 12, None)
    commits = log.batch_commits(QUERY_ID)
    assert sorted(commits) == list(range(13))
    assert all(commits[b].version == b and commits[b].operation == "STREAMING UPDATE" for b in commits)
    assert {b: (commits[b].version, len(commits[b].added), commits[b].rows) for b in WRITTEN} == WRITTEN
    assert sum(c.rows or 0 for c in log.commits) == 17  # the table's rows: Spark's count of the fixture's table
    assert log.files == frozenset(p for c in log.commits for p in c.added) and len(log.files) == 14
    assert log.table_id == json.loads((TABLE / "_delta_log" / "00000000000000000000.json").read_text().splitlines()[1])[
        "metaData"]["id"]


def test_the_state_comes_from_the_parquet_checkpoint_when_older_commits_are_gone(tmp_path):
    """Delta's log cleanup removes JSON commits before a checkpoint: the txn and the live files come from it."""
    table = tmp_path / "table"
    shutil.copytree(TABLE, table)
    for v in range(10):
        (table / "_delta_log" / f"{v:020d}.json").unlink()
    log = read_delta_log(str(table))
    assert (log.version, log.checkpoint, log.txn_version(QUERY_ID)) == (12, 10, 12)
    assert log.files == read_delta_log(str(TABLE)).files
    assert [c.version for c in log.commits] == [10, 11, 12]


def test_a_gap_in_the_log_is_malformed(tmp_path):
    table = tmp_path / "table"
    shutil.copytree(TABLE, table)
    (table / "_delta_log" / f"{11:020d}.json").unlink()
    with pytest.raises(MalformedFileError, match=r"the log of versions after 10 has gaps: \[12\]"):
        read_delta_log(str(table))


def test_batches_above_the_txn_are_written():
    effect = rerun_effect(read_delta_log(str(TABLE)), "another query", [3, 4])
    assert (effect.committed, [(b.batch, b.action, b.version) for b in effect.batches]) == (
        None, [(3, "write", None), (4, "write", None)])
    assert effect.summary == "the table holds no txn for this query: the re-run batches 3..4 are written"


def test_a_directory_that_is_no_delta_table_is_refused():
    with pytest.raises(MissingFileError, match="not a Delta table"):
        read_delta_log(str(FIXTURES / NAME / "input"))


@pytest.fixture
def copy(tmp_path) -> Path:
    dst = tmp_path / NAME
    shutil.copytree(FIXTURES / NAME, dst, ignore=shutil.ignore_patterns("input"))
    return dst


def rewind(copy: Path, fmt: str, sink: str = "output", exit_code: int = 0):
    return run_cli("rewind", copy / "checkpoint", "--to-batch", "8", "--delta-sink", copy / sink, "--idle", "0",
                   "--format", fmt, exit_code=exit_code)


def test_the_plan_says_what_the_delta_sink_does_in_json(copy):
    doc = json.loads(rewind(copy, "json").output)
    assert doc["sinks"] == [{"kind": "delta", "location": str(copy / "output"), "query_id": QUERY_ID, "committed": 12,
                             "batches": [{"batch": b, "action": "skip", "version": v, "files": f, "rows": r}
                                         for b, (v, f, r) in WRITTEN.items()], "summary": SUMMARY,
                             "restore": RESTORE, "txn_app_id": None}]
    assert doc["notes"] == ["target: --to-batch 8", NOTE]
    assert doc["warnings"] == []  # no "no --file-sink given": the plan says what the sink does


def test_the_plan_says_what_the_delta_sink_does_in_a_table_and_csv(copy):
    text = rewind(copy, "table").output
    assert [line for line in text.splitlines() if line.startswith("note:")] == [
        "note:           target: --to-batch 8", f"note:           {NOTE}"]
    section = text[text.index("What the delta sink"):text.index("\nSteps")].strip().splitlines()
    assert section[0] == f"What the delta sink does with the re-run batches: {SUMMARY}"
    assert [line.split() for line in section[3:]] == [["9", "skip", "9", "0", "0"], ["10", "skip", "10", "2", "2"],
                                                      ["11", "skip", "11", "2", "3"], ["12", "skip", "12", "1", "1"]]
    rows = dict(list(csv.reader(io.StringIO(rewind(copy, "csv").output)))[1:])
    assert (rows["sinks.0.committed"], rows["sinks.0.batches.1.batch"], rows["sinks.0.batches.1.action"],
            rows["sinks.0.batches.1.rows"], rows["sinks.0.summary"]) == ("12", "10", "skip", "2", SUMMARY)
    assert {k.removeprefix("sinks.0.restore."): v for k, v in rows.items() if k.startswith("sinks.0.restore.")} == {
        "to_version": "8", "from_version": "12", "txn": "8", "txn_before": "12", "rows": "6", "files": "5",
        "other_writers": ""}
    assert rows["notes"] == f"target: --to-batch 8; {NOTE}"


def test_a_delta_sink_that_is_no_delta_table_is_one_line_exit_2_and_nothing_changes(copy):
    before = tree(copy)
    result = rewind(copy, "table", sink="checkpoint/commits", exit_code=2)
    assert result.output == (f"Error: no _delta_log/ commits in {copy / 'checkpoint/commits'}: not a Delta table (hint: "
                             "pass the table's directory (the path the query writes to), or omit --delta-sink)\n")
    run_cli("rewind", copy / "checkpoint", "--to-batch", "8", "--delta-sink", copy / "checkpoint", "--idle", "0",
            "--execute", exit_code=2)
    assert tree(copy) == before
