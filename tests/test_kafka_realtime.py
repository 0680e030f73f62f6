"""Every command on kafka_realtime, a checkpoint a real Spark 4.2 query wrote in real-time mode
(``trigger(realTime="5 seconds")``: Kafka source -> upper-cased value -> Kafka sink) against a real broker (no broker
needed here): show, batches, check, timeline, replay --plan, rewind (dry run, then executed and undone), each asserted
with the exact batches and offsets the fixture holds.

Real-time mode writes a batch's offsets at its end, as far as the batch read (a micro-batch writes them before it runs,
as far as it plans to read), and its commit right after; the logs read the same way: offsets/N is where batch N ended.
The first run was stopped after its batch 0 had read one record per partition (offsets 1, 1); the second run's batch 1
read the other 14 records (both runs' rest), and its batch 2, stopped once all input was processed, read none."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from test_kafka_fixtures import OFFLINE, digest, facts, off, planned, relocated, summary

from conftest import FIXTURES, run_cli

NAME = "kafka_realtime"
CKPT = FIXTURES / NAME / "checkpoint"
TOPIC = "wmcheck-kafka-realtime"
BATCHES = {0: off(kafka_realtime={0: 1, 1: 1}), 1: off(kafka_realtime={0: 8, 1: 8}),
           2: off(kafka_realtime={0: 8, 1: 8})}
LAST = f"{TOPIC}[0]=8, {TOPIC}[1]=8"


def test_the_fixture_is_a_real_time_query_whose_last_offsets_are_every_record_sent():
    doc = facts(NAME)
    assert (doc["spark_version"], doc["runs"], doc["batches"]) == ("4.2.0", [10, 6], [[], [1]])
    assert '.trigger(realTime="5 seconds")' in doc["query"] and '.outputMode("update")' in doc["query"]
    sent = Counter(r["partition"] for r in json.loads((FIXTURES / NAME / "records.json").read_text()))
    assert json.loads(BATCHES[2]) == {TOPIC: {str(p): n for p, n in sent.items()}} == {TOPIC: {"0": 8, "1": 8}}
    assert sorted(p.name for p in CKPT.iterdir()) == [".metadata.crc", "commits", "metadata", "offsets", "sources"]


def test_show_json_and_table():
    doc = json.loads(run_cli("show", CKPT, "--format", "json").stdout)
    assert doc["verdict"] == {"restarts": True, "next_batch": 3, "watermark_ms": 0,
                              "watermark": "1970-01-01T00:00:00.000Z", "errors": 0, "warnings": 0, "worst": None}
    assert (doc["first_batch"], doc["last_batch"], doc["last_committed_batch"], doc["pending_batch"],
            doc["next_batch"], doc["watermark_ms"], doc["findings"], doc["operators"]) == (0, 2, 2, None, 3, 0, [], [])
    assert [(s["source_id"], s["kind"], s["summary"], s["location"], json.loads(s["offset"])) for s in doc["sources"]] \
        == [("0", "kafka", LAST, f"topics {TOPIC}", json.loads(BATCHES[2]))]
    lines = run_cli("show", CKPT).stdout.splitlines()
    assert lines[0] == ("restarts:                   yes: Spark runs batch 3 next, with watermark 0 "
                        "(1970-01-01T00:00:00.000Z); state file contents not decoded (wmcheck check decodes them)")
    assert lines[1] == "worst finding:              none"
    for line in ("batches:                    0..2", "last committed:             2", "pending batch:              none",
                 "next batch:                 3", "watermark stall:            none"):
        assert line in lines
    assert lines[-4:] == [f"0            kafka   topics {TOPIC}  {LAST}", "", "Stateful operators", "(none)"]


def test_batches_json_and_table():
    rows = json.loads(run_cli("batches", CKPT, "--format", "json").stdout)
    assert [(r["batch"], r["committed"], r["kind"], r["batch_watermark_ms"], r["next_batch_watermark_ms"],
             r["sources"]) for r in rows] == [
        (0, True, "data", 0, 0, [BATCHES[0]]), (1, True, "data", 0, 0, [BATCHES[1]]),
        (2, True, "no-data", 0, 0, [BATCHES[2]])]  # batch 2 ran its 5 s and read nothing: it ends where 1 ended
    table = run_cli("batches", CKPT).stdout.splitlines()
    assert [(line.split()[:3], line.split(": ", 1)[1]) for line in table[2:]] == [
        (["0", "yes", "data"], f"{summary(BATCHES[0])} (new data)"),
        (["1", "yes", "data"], f"{LAST} (new data)"),
        (["2", "yes", "no-data"], f"{LAST} (no new data)")]


def test_check_passes():
    assert json.loads(run_cli("check", CKPT, "--format", "json").stdout) == []
    table = run_cli("check", CKPT).output.splitlines()
    assert table == [OFFLINE, f"{CKPT}: ok: 0 error(s), 0 warning(s) from 80 checks"]


def test_timeline_draws_every_batch(tmp_path):
    out = tmp_path / "rt.svg"
    assert json.loads(run_cli("timeline", CKPT, "--output", out, "--format", "json").stdout) == {
        "output": str(out), "batches": 3, "stall": None}
    assert out.read_text().startswith('<?xml version="1.0" encoding="utf-8" standalone="no"?>')
    assert run_cli("timeline", CKPT, "--output", out).stdout.splitlines() == [
        f"wrote:   {out}", "batches: 3", "stall:   none"]


def test_replay_plan_reads_each_batch_from_where_the_one_before_ended():
    zero = off(kafka_realtime={0: 0, 1: 0})
    assert planned(NAME) == [(0, zero, BATCHES[0], 2, None), (1, BATCHES[0], BATCHES[1], 14, None),
                             (2, BATCHES[1], BATCHES[2], 0, None)]
    table = run_cli("replay", CKPT, "--from", "0", "--plan").stdout.splitlines()
    assert table[1:3] == ["batches:           0..2", "oldest replayable: 0"]
    rows = table[table.index("Batches") + 3:table.index("Files") - 1]
    assert [(r.split()[0], r.split()[-3:]) for r in rows] == [
        ("0", [zero, "->", BATCHES[0]]), ("1", [BATCHES[0], "->", BATCHES[1]]), ("2", [BATCHES[1], "->", BATCHES[2]])]
    kafka = table[table.index("Kafka offsets") + 3:]
    assert [r.split() for r in kafka] == [
        [b, "0", TOPIC, p, start, end, n] for b, start, end, n in
        [("0", "0", "1", "1"), ("1", "1", "8", "7"), ("2", "8", "8", "0")] for p in ("0", "1")]


def rewind(root: Path, *more: str) -> list[str]:
    return run_cli("rewind", root / "checkpoint", "--to-batch", "0", "--idle", "0", *more).stdout.splitlines()


def test_rewind_dry_run_then_executed_then_undone_restores_every_byte(tmp_path):
    root = relocated(NAME, tmp_path)
    before = digest(root)
    plan = json.loads(run_cli("rewind", root / "checkpoint", "--to-batch", "0", "--idle", "0", "--format",
                              "json").stdout)
    assert digest(root) == before  # a dry run changes nothing
    assert [(s["position"], s["before"], s["after"]) for s in plan["sources"]] == [
        (f"{TOPIC}/0", "8", "1"), (f"{TOPIC}/1", "8", "1")]
    assert (f"source 0 (kafka) restarts from its offsets of batch 0: {summary(BATCHES[0])}; data the source no longer "
            "retains (e.g. past Kafka retention) cannot be replayed") in plan["warnings"]
    assert [(s["action"], s["phase"], s["path"]) for s in plan["steps"]] == [
        ("remove", log, f"{log}/{f}") for b in (2, 1) for log in ("commits", "offsets") for f in (b, f".{b}.crc")]
    table = rewind(root)
    assert "last batch:     2 -> 0" in table and "last committed: 2 -> 0" in table
    sources = table[table.index("Sources (where each continues from)") + 3:]
    assert [line.split() for line in sources[:3]] == [
        ["0", "kafka", f"{TOPIC}/0", "8", "1"], ["0", "kafka", f"{TOPIC}/1", "8", "1"], []]
    assert digest(root) == before
    done = rewind(root, "--execute")
    assert any(line.startswith("mode:           applied; backup ") for line in done)
    after = json.loads(run_cli("show", root / "checkpoint", "--format", "json").stdout)
    assert (after["next_batch"], after["sources"][0]["summary"]) == (1, summary(BATCHES[0]))
    assert [r["batch"] for r in json.loads(run_cli("batches", root / "checkpoint", "--format", "json").stdout)] == [0]
    undone = run_cli("undo", root / "checkpoint", "--idle", "0").stdout.splitlines()
    assert "status:         applied -> undone" in undone and "restored:       8 file(s)" in undone
    assert digest(root) == before
    assert json.loads(run_cli("show", root / "checkpoint", "--format", "json").stdout)["next_batch"] == 3
