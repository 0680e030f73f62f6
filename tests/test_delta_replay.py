"""``wmcheck replay --delta-source TABLE`` on fixtures/delta_source_agg: each batch's data files from the source
table's ``_delta_log`` (the starting snapshot one file per batch, then one appended version per batch), read as Parquet
by real Spark, against what the query itself recorded when it read them: its rows per batch (``numInputRows``), the
rows its watermark dropped, the watermark each batch's rows moved it to, and every input row read exactly once."""
from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest
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
