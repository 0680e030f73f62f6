"""``wmcheck replay --delta-source TABLE`` on fixtures/delta_source_agg: each batch's data files from the source
table's ``_delta_log`` (the starting snapshot one file per batch, then one appended version per batch), read as Parquet
by real Spark, against what the query itself recorded when it read them: its rows per batch (``numInputRows``), the
rows its watermark dropped, the watermark each batch's rows moved it to, and every input row read exactly once.

Then the fixture's query run from new checkpoints by delta-spark 4.4 (tests/delta_source_restarts.py, one child): with
``startingVersion`` 5 (its first batch reads the commits from version 5 on: ``--delta-starting-version 5``), with
``maxFilesPerTrigger`` 1000 (its first batch reads the whole snapshot at version 9, its end offset past it), and over a
table of the same appends partitioned by ``id`` (its files hold no ``id``: replay gives it from each file's partition
values); each replayed against the query's own rows per batch and every input row."""
from __future__ import annotations

import json
import shutil
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest
from delta_spark import delta_python, restart
from test_repair_execute import tree

from conftest import FIXTURES, fixture_facts, run_cli

NAME = "delta_source_agg"
CKPT = FIXTURES / NAME / "checkpoint"
TABLE = FIXTURES / NAME / "source"
DELAY_MS = 10_000
CALLS: list[tuple[int, list[tuple]]] = []


def collect(df, batch_id):
    """A --foreach-batch sink: records (batch_id, sorted (id, event time ms, v) rows)."""
    rows = df.selectExpr("id", "unix_millis(ts) AS ts", "v").collect()
    CALLS.append((batch_id, sorted(tuple(r) for r in rows)))


def file_rows(path: Path) -> list[tuple]:
    out = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        out.append((row["id"], int(datetime.fromisoformat(row["ts"].replace("Z", "+00:00")).timestamp() * 1000), row["v"]))
    return out


def test_the_plan_names_each_batchs_data_files():
    doc = json.loads(run_cli("replay", CKPT, "--from", "0", "--plan", "--delta-source", TABLE, "--format", "json").output)
    versions = {v["version"]: v for v in fixture_facts(NAME)["source_versions"]}
    logged = {}
    for version in versions:
        for line in (TABLE / "_delta_log" / f"{version:020d}.json").read_text().splitlines():
            if '"add"' in line:
                logged[version] = json.loads(line)["add"]["path"]
    got = [(b["batch_id"], [(f["log_batch"], f["path"]) for f in b["sources"][0]["files"]]) for b in doc["batches"]]
    # the snapshot at version 3 (versions 0..3's files, by modification time) one file per batch, then one version each
    reads = [[0], [1], [2], [3], [], [4], [5], [6], [], [7], [8], [9], []]
    snapshot = {0: 3, 1: 3, 2: 3, 3: 3}
    assert got == [(b, [(snapshot.get(v, v), logged[v]) for v in vs]) for b, vs in enumerate(reads)]
    assert all(s["replayable"] and s["missing_files"] == 0 for b in doc["batches"] for s in b["sources"])
    text = run_cli("replay", CKPT, "--from", "3", "--to", "3", "--plan", "--delta-source", TABLE).output
    assert ("{'reservoirVersion': 3, 'index': 2, 'isStartingVersion': True} -> {'reservoirVersion': 4, 'index': -1, "
            "'isStartingVersion': False}: 1 file(s)") in text


@pytest.mark.spark
def test_replayed_rows_are_the_rows_the_query_read(spark):
    facts = fixture_facts(NAME)
    CALLS.clear()
    summary = json.loads(run_cli("replay", CKPT, "--from", "0", "--delta-source", TABLE, "--foreach-batch",
                                 "test_delta_replay:collect", "--event-time", "ts", "--window", "10 seconds",
                                 "--format", "json").stdout)
    batches = facts["batches"]
    assert [c[0] for c in CALLS] == [b["batch"] for b in batches]
    assert [len(rows) for _, rows in CALLS] == [b["num_input_rows"] for b in batches]
    assert [s["late_rows"] for s in summary] == [b["num_rows_dropped_by_watermark"] for b in batches]
    for (batch_id, rows), after in zip(CALLS, batches[1:]):
        if rows:  # the watermark the batch's rows moved the query to (never back)
            assert after["watermark_ms"] == max(batches[batch_id]["watermark_ms"], max(r[1] for r in rows) - DELAY_MS)
    every = Counter(r for v in facts["source_versions"] for r in file_rows(FIXTURES / NAME / v["file"]))
    assert Counter(r for _, rows in CALLS for r in rows) == every and sum(every.values()) == 31
    for (batch_id, rows), version in zip([c for c in CALLS if c[1]], facts["source_versions"]):
        assert rows == sorted(file_rows(FIXTURES / NAME / version["file"])), batch_id


@pytest.mark.spark
def test_the_python_api_replays_with_the_delta_source(spark):
    import wmcheck

    facts = fixture_facts(NAME)
    got = [(batch, sorted(tuple(r) for r in df.selectExpr("id", "unix_millis(ts) AS ts", "v").collect()), watermark)
           for batch, df, watermark in wmcheck.replay_batches(spark, str(CKPT), 0, delta_source=str(TABLE))]
    assert [(b, len(rows), w) for b, rows, w in got] == [
        (b["batch"], b["num_input_rows"], b["watermark_ms"]) for b in facts["batches"]]
    for (batch_id, rows), version in zip([(b, r) for b, r, _ in got if r], facts["source_versions"]):
        assert rows == sorted(file_rows(FIXTURES / NAME / version["file"])), batch_id


def test_a_path_that_is_no_delta_table_is_one_line_exit_2(tmp_path):
    before = tree(FIXTURES / NAME)
    result = run_cli("replay", CKPT, "--from", "0", "--plan", "--delta-source", FIXTURES / NAME / "input", exit_code=2)
    assert result.output == (f"Error: no _delta_log/ commits in {FIXTURES / NAME / 'input'}: not a Delta table (hint: "
                             "pass the table's directory (the path the query reads), or omit --delta-source)\n")
    assert tree(FIXTURES / NAME) == before


def test_a_table_that_is_not_the_querys_source_is_one_line_exit_2():
    other = FIXTURES / "agg_window_delta" / "output"
    before = tree(FIXTURES / NAME)
    other_id = next(json.loads(line)["metaData"]["id"] for line in (other / "_delta_log" / f"{0:020d}.json").read_text()
                    .splitlines() if '"metaData"' in line)
    result = run_cli("replay", CKPT, "--from", "0", "--plan", "--delta-source", other, exit_code=2)
    assert result.output == (f"Error: offsets/0: the table at {other} (id {other_id}) is not the table batch 0 read "
                             "(reservoirId a6a17f96-e4c0-4560-b206-45cdc3dd9f80) (hint: pass the path of the table the "
                             "query reads as --delta-source)\n")
    assert tree(FIXTURES / NAME) == before


def test_the_python_api_plans_with_the_delta_source():
    import wmcheck

    plan = wmcheck.replay_plan(str(CKPT), 5, 5, delta_source=str(TABLE))
    (src,) = plan.batches[0].sources
    assert (src.kind, src.replayable, [f.log_batch for f in src.files]) == ("delta", True, [4])
    assert not wmcheck.replay_plan(str(CKPT), 5, 5).batches[0].sources[0].replayable
    from wmcheck.checkpoint.errors import UnsupportedError

    with pytest.raises(UnsupportedError, match=r"inside the starting snapshot of version 3 \(isStartingVersion\): the "
                       "query had no startingVersion"):
        wmcheck.replay_plan(str(CKPT), 0, 0, delta_source=str(TABLE), delta_starting_version=0)


FRESH = {"starting-version": {"startingVersion": "5"}, "whole-snapshot": {"maxFilesPerTrigger": "1000"},
         "partitioned": {}}
"""The fresh runs: case -> the query's extra Delta source options."""


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    """Each FRESH case's query run once from a new checkpoint over a copy of the fixture's source table (partitioned:
    the same appends written partitioned by id): case -> (its directory, what Spark did)."""
    delta_python()
    roots, jobs = {}, []
    inputs = [str(FIXTURES / NAME / v["file"]) for v in fixture_facts(NAME)["source_versions"]]
    for case, options in FRESH.items():
        roots[case] = root = tmp_path_factory.mktemp(case)
        if case == "partitioned":
            jobs.append({"root": str(root), "build": inputs, "partition_by": ["id"]})
        else:
            shutil.copytree(TABLE, root / "source")
            jobs.append({"root": str(root), "options": options})
    out = restart("delta_source_restarts.py", jobs)
    return {case: (roots[case], got) for case, got in zip(FRESH, out["jobs"])}


def replayed(root: Path, *extra: str) -> list[tuple[int, list[tuple]]]:
    CALLS.clear()
    run_cli("replay", root / "checkpoint", "--from", "0", "--delta-source", root / "source", *extra, "--foreach-batch",
            "test_delta_replay:collect", "--format", "json")
    return list(CALLS)


def version_rows(first: int = 0) -> list[list[tuple]]:
    """Each appended version's rows (its input file's), from version ``first`` on."""
    return [sorted(file_rows(FIXTURES / NAME / v["file"])) for v in fixture_facts(NAME)["source_versions"]
            if v["version"] >= first]


def first_end(root: Path) -> dict:
    return json.loads((root / "checkpoint" / "offsets" / "0").read_text().splitlines()[2])


@pytest.mark.spark
def test_a_first_batch_from_starting_version_replays_the_commits_from_it(fresh, spark):
    """startingVersion 5, one file per batch: batch 0 reads version 5's file and ends past it (version 6, index -1;
    not the starting snapshot); replayed with --delta-starting-version 5 each batch holds the rows the query counted,
    version 5's on."""
    root, got = fresh["starting-version"]
    assert got["error"] is None
    end = first_end(root)
    assert (end["reservoirVersion"], end["index"], end["isStartingVersion"]) == (6, -1, False)
    calls = replayed(root, "--delta-starting-version", "5")
    assert [[b, len(rows)] for b, rows in calls] == got["batches"]
    assert [rows for _, rows in calls if rows] == version_rows(5)


def test_the_starting_version_decides_the_first_batchs_files(fresh):
    """The plan of that batch 0: with the option, version 5's one file; without it, as Delta plans a first batch
    without startingVersion: the snapshot at version 5 (the version before the end's: versions 0..5's six files)."""
    root, _ = fresh["starting-version"]
    args = ("replay", root / "checkpoint", "--from", "0", "--to", "0", "--plan", "--delta-source", root / "source",
            "--format", "json")
    with_option = json.loads(run_cli(*args, "--delta-starting-version", "5").output)["batches"][0]["sources"][0]
    without = json.loads(run_cli(*args).output)["batches"][0]["sources"][0]
    assert [f["log_batch"] for f in with_option["files"]] == [5]
    assert [f["log_batch"] for f in without["files"]] == [5] * 6
    later = run_cli(*args[:-2], "--delta-starting-version", "7", exit_code=2).output
    assert later == ("Error: the first batch ended at version 6, before the startingVersion 7: that is not the query's "
                     "startingVersion (hint: pass the query's startingVersion option as --delta-starting-version)\n")


def test_the_starting_version_without_the_delta_source_is_one_line_exit_2():
    before = tree(FIXTURES / NAME)
    alone = run_cli("replay", CKPT, "--from", "0", "--plan", "--delta-starting-version", "5", exit_code=2)
    assert alone.output == ("Error: --delta-starting-version needs --delta-source PATH (the table the query reads) "
                            "(hint: see wmcheck replay --help)\n")
    assert tree(FIXTURES / NAME) == before


@pytest.mark.spark
def test_a_first_batch_that_read_the_whole_snapshot_replays_it(fresh, spark):
    """maxFilesPerTrigger 1000: batch 0 reads the snapshot at version 9 whole and ends past it (version 10, index -1);
    replayed without the option, as Delta re-plans it (the snapshot at the version before the end's), it holds all 31
    rows."""
    root, got = fresh["whole-snapshot"]
    end = first_end(root)
    assert (got["error"], end["reservoirVersion"], end["index"], end["isStartingVersion"]) == (None, 10, -1, False)
    calls = replayed(root)
    assert [[b, len(rows)] for b, rows in calls] == got["batches"] and got["batches"][0] == [0, 31]
    assert calls[0][1] == sorted(r for rows in version_rows() for r in rows)


@pytest.mark.spark
def test_a_partitioned_source_table_replays_with_its_partition_values(fresh, spark):
    """The appends partitioned by id (a file per id a version; the files hold no id column): each batch reads one
    file, and its replayed rows are the query's count, all of one id, and every input row once."""
    root, got = fresh["partitioned"]
    assert got["error"] is None
    plan = json.loads(run_cli("replay", root / "checkpoint", "--from", "0", "--plan", "--delta-source",
                              root / "source", "--format", "json").output)
    files = [f for b in plan["batches"] for f in b["sources"][0]["files"]]
    assert {tuple(f["partition"]) for f in files} == {("id",)} and all(f["path"].startswith(f"id={f['partition']['id']}/")
                                                                      for f in files)
    calls = replayed(root)
    assert [[b, len(rows)] for b, rows in calls] == got["batches"]
    assert all(len({r[0] for r in rows}) == 1 for _, rows in calls if rows)
    assert Counter(r for _, rows in calls for r in rows) == Counter(r for rows in version_rows() for r in rows)
