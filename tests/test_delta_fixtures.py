"""Every command on the two Delta fixtures whose source or sink is Delta Lake beyond Spark's Delta sink:
``delta_source_agg`` (a Delta table as the streaming source: its offsets are ``reservoirId``/``reservoirVersion``/
``index``/``isStartingVersion``) and ``foreach_batch_delta`` (a foreachBatch function appending each batch to a Delta table
with ``txnAppId``/``txnVersion``): show, batches, check, timeline, replay --plan and rewind (dry run, execute, undo)
read each as the fixture's own facts (fixture.json, written by the generator from the real query) say."""
from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest
from test_repair_execute import tree

from conftest import FIXTURES, fixture_checkpoint, fixture_facts, run_cli

SOURCE, FOREACH = "delta_source_agg", "foreach_batch_delta"
TABLE_ID = "a6a17f96-e4c0-4560-b206-45cdc3dd9f80"
"""delta_source_agg's source table id (its _delta_log's metaData.id), the reservoirId of every offsets file."""


def positions(name: str) -> list[tuple[int, int, int, bool]]:
    """(batch, reservoirVersion, index, isStartingVersion) per batch as the generator read them from offsets/N."""
    return [(b["batch"], b["reservoirVersion"], b["index"], b["isStartingVersion"])
            for b in fixture_facts(name)["source_batches"]]


def test_the_source_fixture_reads_the_snapshot_then_one_version_per_batch():
    """The generator's own record: versions 0..3 appended before the first run, read as the starting snapshot one file
    per batch (index 0..2, then the snapshot's end: version 4 index -1), then one appended version per data batch."""
    assert [(v["version"], v["file"]) for v in fixture_facts(SOURCE)["source_versions"]] == [
        (v, f"input/run{r}-{i:03d}.json") for v, (r, i) in enumerate(
            [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)])]
    assert positions(SOURCE) == [(0, 3, 0, True), (1, 3, 1, True), (2, 3, 2, True), (3, 4, -1, False),
                                 (4, 4, -1, False), (5, 5, -1, False), (6, 6, -1, False), (7, 7, -1, False),
                                 (8, 7, -1, False), (9, 8, -1, False), (10, 9, -1, False), (11, 10, -1, False),
                                 (12, 10, -1, False)]


def test_show_names_the_delta_source_by_its_table_id():
    doc = json.loads(run_cli("show", fixture_checkpoint(SOURCE), "--format", "json").output)
    assert (doc["last_committed_batch"], doc["next_batch"], doc["watermark_ms"]) == (12, 13, 1704067285000)
    assert doc["sources"] == [{"source_id": "0", "kind": "delta", "offset": (
        f'{{"sourceVersion":1,"reservoirId":"{TABLE_ID}","reservoirVersion":10,"index":-1,"isStartingVersion":false}}'),
        "summary": "delta version 10 index -1", "location": f"table {TABLE_ID}"}]
    text = run_cli("show", fixture_checkpoint(SOURCE)).output
    assert f"0            delta   table {TABLE_ID}  delta version 10 index -1" in text.splitlines()


def test_show_the_foreach_batch_fixture():
    doc = json.loads(run_cli("show", fixture_checkpoint(FOREACH), "--format", "json").output)
    assert (doc["last_committed_batch"], doc["next_batch"], doc["watermark_ms"]) == (12, 13, 1704067285000)
    assert [(s["kind"], s["summary"]) for s in doc["sources"]] == [("file", "file log batch 9")]


def test_batches_give_each_batchs_delta_offsets():
    rows = json.loads(run_cli("batches", fixture_checkpoint(SOURCE), "--format", "json").output)
    got = []
    for row in rows:
        (offset,) = row["sources"]
        value = json.loads(offset)
        assert value["reservoirId"] == TABLE_ID
        got.append((row["batch"], value["reservoirVersion"], value["index"], value["isStartingVersion"]))
    assert got == positions(SOURCE)
    facts = {b["batch"]: b for b in fixture_facts(SOURCE)["batches"]}
    assert [(r["batch"], r["kind"], r["next_batch_watermark_ms"]) for r in rows] == [
        (b, "data" if facts[b]["num_input_rows"] else "no-data", facts[b + 1]["watermark_ms"] if b < 12 else 1704067285000)
        for b in range(13)]
    table = run_cli("batches", fixture_checkpoint(SOURCE), "--format", "csv").output
    listed = list(csv.DictReader(io.StringIO(table)))
    assert [r["batch"] for r in listed] == [str(b) for b in range(13)]


DELTA_OFFLINE = ("note: WM089-WM091 compare a Delta source's offsets with its table's log and files as they are now: not "
                 "verified without the table (pass --delta-source PATH)\n")


@pytest.mark.parametrize("name", [SOURCE, FOREACH])
def test_check_finds_nothing(name):
    """A Delta source's offsets are not compared with its table without --delta-source: one note says so."""
    assert run_cli("check", fixture_checkpoint(name), exit_code=0).output == (
        (DELTA_OFFLINE if name == SOURCE else "") + f"{fixture_checkpoint(name)}: ok: 0 error(s), 0 warning(s) from 80 checks\n")


def test_check_with_the_delta_source_finds_nothing():
    ckpt = fixture_checkpoint(SOURCE)
    assert run_cli("check", ckpt, "--delta-source", FIXTURES / SOURCE / "source", exit_code=0).output == (
        f"{ckpt}: ok: 0 error(s), 0 warning(s) from 80 checks\n")


@pytest.mark.parametrize("name, lane", [(SOURCE, f"0 delta table {TABLE_ID}"), (FOREACH, "0 file …/foreach_batch_delta/input")])
def test_timeline_draws_every_batch_and_the_source_lane(tmp_path, name, lane):
    out = tmp_path / "timeline.svg"
    doc = json.loads(run_cli("timeline", fixture_checkpoint(name), "--output", out, "--format", "json").output)
    assert doc == {"output": str(out), "batches": 13, "stall": None}
    assert lane in out.read_text(encoding="utf-8")


def test_replay_plan_gives_each_batchs_delta_range():
    doc = json.loads(run_cli("replay", fixture_checkpoint(SOURCE), "--from", "0", "--to", "12", "--plan", "--format",
                             "json").output)
    got, before = [], None
    for batch in doc["batches"]:
        (src,) = batch["sources"]
        assert (src["kind"], src["start_version"]) == ("delta", before)
        end = src["end_version"]
        got.append((batch["batch_id"], end["reservoirVersion"], end["index"], end["isStartingVersion"]))
        before = end
    assert got == positions(SOURCE)
    facts = {b["batch"]: b["watermark_ms"] for b in fixture_facts(SOURCE)["batches"]}
    assert [(b["batch_id"], b["watermark_ms"]) for b in doc["batches"]] == sorted(facts.items())


def test_replay_plan_of_the_foreach_batch_fixture_names_its_input_files():
    doc = json.loads(run_cli("replay", fixture_checkpoint(FOREACH), "--from", "0", "--to", "12", "--plan", "--format",
                             "json").output)
    root = Path(fixture_facts(FOREACH)["root"])  # the logs name the files where the fixture was generated
    got = [(b["batch_id"], sorted(str(Path(f["path"].removeprefix("file://")).relative_to(root)) for s in b["sources"]
                                  for f in s.get("files", []))) for b in doc["batches"]]
    assert got == [(b["batch"], b["input_files"]) for b in fixture_facts(FOREACH)["batches"]]


@pytest.fixture(params=[SOURCE, FOREACH])
def copied(request, tmp_path) -> tuple[str, Path]:
    root = tmp_path / request.param
    shutil.copytree(FIXTURES / request.param, root)
    return request.param, root


def test_rewind_dry_run_execute_and_undo(copied):
    name, root = copied
    ckpt = root / "checkpoint"
    before = tree(ckpt)
    rewind = ("rewind", ckpt, "--to-batch", "8", "--idle", "0", "--format", "json")
    plan = json.loads(run_cli(*rewind).output)
    assert (plan["before"], plan["after"]) == (
        {"last_batch": 12, "last_committed_batch": 12, "watermark_ms": 1704067285000},
        {"last_batch": 8, "last_committed_batch": 8, "next_batch": 9, "watermark_ms": 1704067253000,
         "next_state_version": 9})
    if name == SOURCE:
        assert plan["sources"] == [{"source_id": "0", "kind": "delta", "position": "version", "before": "10 index -1",
                                    "after": "7 index -1"}]
        assert plan["counts"] == {"remove": 32, "write": 0}
    else:
        assert plan["sources"] == [{"source_id": "0", "kind": "file", "position": "log batch", "before": "9",
                                    "after": "6"}]
        assert plan["counts"] == {"remove": 38, "write": 0}
    assert tree(ckpt) == before
    done = json.loads(run_cli(*rewind, "--execute").output)
    assert done["executed"] is True
    shown = json.loads(run_cli("show", ckpt, "--format", "json").output)
    assert (shown["last_committed_batch"], shown["next_batch"], shown["watermark_ms"]) == (8, 9, 1704067253000)
    if name == SOURCE:
        assert shown["sources"][0]["summary"] == "delta version 7 index -1"
    run_cli("undo", ckpt, "--idle", "0")
    assert tree(ckpt) == before  # wmcheck's own _wmcheck/ (the backup's record) left out
