"""``wmcheck replay --plan`` (no Spark): files, offsets and watermarks of each batch against fixture.json."""
from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from wmcheck.checkpoint.errors import MalformedFileError
from wmcheck.checkpoint.locations import map_location, spark_location
from wmcheck.checkpoint.logs.kafka_offsets import parse_kafka_initial_offsets

from conftest import FIXTURES, fixture_checkpoint, fixture_facts, fixture_names, root_map, run_cli

FILE_FIXTURES = [n for n in fixture_names() if n not in ("compaction", "compaction_spark35", "python_source", "delta_source_agg")]  # python_source names no files; delta_source_agg's: tests/test_delta_replay.py


def plan_json(ckpt, *args: str) -> dict:
    return json.loads(run_cli("replay", ckpt, "--plan", "--format", "json", *args).stdout)


def relative_files(batch: dict, root: Path) -> list[str]:
    return sorted(os.path.relpath(f["location"][len("file:"):], root) for s in batch["sources"] for f in s["files"])


@pytest.mark.parametrize("name", FILE_FIXTURES)
def test_plan_files_and_watermarks_match_progress_reports(name):
    facts = fixture_facts(name)
    doc = plan_json(fixture_checkpoint(name), "--from", "0", "--path-map", root_map(name))
    got = {b["batch_id"]: b for b in doc["batches"]}
    assert sorted(got) == [b["batch"] for b in facts["batches"]]
    previous = 0
    for batch in facts["batches"]:
        planned = got[batch["batch"]]
        assert relative_files(planned, FIXTURES / name) == batch["input_files"], batch["batch"]
        assert planned["watermark_ms"] == batch["watermark_ms"]
        assert planned["late_watermark_ms"] == max(previous, 0)
        assert planned["committed"] is True
        for src in planned["sources"]:
            assert src["kind"] == "file" and src["replayable"] and src["missing_files"] == 0
            for f in src["files"]:
                assert f["exists"] is True and f["size"] == os.path.getsize(f["location"][len("file:"):])
            assert src["bytes"] == sum(f["size"] for f in src["files"])
        previous = batch["watermark_ms"]
    assert doc["oldest_replayable_batch"] == 0


def test_plan_current_rule_and_missing_files(tmp_path):
    name = "agg_window_hdfs"
    facts = fixture_facts(name)
    doc = plan_json(fixture_checkpoint(name), "--from", "2", "--to", "3", "--late-watermark", "current",
                    "--path-map", f"{facts['root']}={tmp_path}")
    assert [b["late_watermark_ms"] for b in doc["batches"]] == [b["watermark_ms"] for b in facts["batches"][2:4]]
    files = doc["batches"][0]["sources"][0]["files"]
    assert files[0]["location"] == f"file:{tmp_path}/{facts['batches'][2]['input_files'][0]}"
    assert files[0]["exists"] is False and files[0]["size"] is None
    assert doc["batches"][0]["sources"][0]["missing_files"] == 1 and doc["batches"][0]["sources"][0]["bytes"] is None


def test_plan_two_sources_and_source_filter():
    name = "join_stream_stream"
    facts = fixture_facts(name)
    doc = plan_json(fixture_checkpoint(name), "--from", "1", "--to", "1", "--source", "1", "--path-map", root_map(name))
    (batch,) = doc["batches"]
    assert [s["source_id"] for s in batch["sources"]] == ["1"]
    want = [f for f in facts["batches"][1]["input_files"] if f.startswith("input/right/")]
    assert relative_files(batch, FIXTURES / name) == want
    run_cli("replay", fixture_checkpoint(name), "--from", "1", "--plan", "--source", "7", exit_code=2)


def test_plan_table_and_csv():
    name = "agg_window_hdfs"
    facts = fixture_facts(name)
    b2 = facts["batches"][2]
    table = run_cli("replay", fixture_checkpoint(name), "--from", "2", "--to", "2", "--plan", "--path-map", root_map(name)).stdout
    assert "oldest replayable: 0" in table
    assert f"{b2['watermark_ms']} (2024-" in table and "log batch 2" in table
    assert f"{FIXTURES / name / b2['input_files'][0]}" in table
    rows = list(csv.DictReader(io.StringIO(run_cli(
        "replay", fixture_checkpoint(name), "--from", "2", "--to", "3", "--plan", "--format", "csv",
        "--path-map", root_map(name)).stdout)))
    assert [int(r["batch_id"]) for r in rows] == [2, 3]
    assert rows[0]["watermark_ms"] == str(b2["watermark_ms"])
    assert rows[0]["late_watermark_ms"] == str(facts["batches"][1]["watermark_ms"])
    assert rows[0]["start"] == '{"logOffset":1}' and rows[0]["end"] == '{"logOffset":2}'
    assert rows[0]["files"] == f"file:{FIXTURES / name / b2['input_files'][0]}"
    assert rows[0]["num_files"] == "1" and rows[0]["missing_files"] == "0"


@pytest.mark.parametrize("args, message", [
    (("--to", "99"), "batch 99 does not exist: the last committed batch is"),
    (("--from", "5", "--to", "3"), "--from 5 is after --to 3"),
])
def test_plan_range_errors(args, message):
    result = run_cli("replay", fixture_checkpoint("agg_window_hdfs"), "--from", "0", *args, "--plan", exit_code=2)
    assert result.output.startswith("Error: ") and message in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_usage_errors():
    ckpt = fixture_checkpoint("agg_window_hdfs")
    assert "pass exactly one of --plan" in run_cli("replay", ckpt, "--from", "0", exit_code=2).output
    assert "need --event-time" in run_cli("replay", ckpt, "--from", "0", "--plan", "--late-only", exit_code=2).output
    result = run_cli("replay", ckpt, "--from", "0", "--foreach-batch", "x:y", "--late-only", "--on-time-only",
                     "--event-time", "ts", exit_code=2)
    assert "either --late-only or --on-time-only" in result.output


def test_pending_batch_needs_include_pending(tmp_path):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(fixture_checkpoint("dedup_watermark"), ckpt)
    last = fixture_facts("dedup_watermark")["last_batch"]
    (ckpt / "commits" / str(last)).unlink()
    result = run_cli("replay", ckpt, "--from", "0", "--to", str(last), "--plan", exit_code=2)
    assert f"batch {last} is not committed" in result.output and "--include-pending" in result.output
    doc = plan_json(ckpt, "--from", str(last - 1))
    assert [b["batch_id"] for b in doc["batches"]] == [last - 1]
    doc = plan_json(ckpt, "--from", str(last - 1), "--include-pending")
    assert [(b["batch_id"], b["committed"]) for b in doc["batches"]] == [(last - 1, True), (last, False)]


def test_source_log_batch_from_compact_file_or_missing(tmp_path):
    name = "agg_window_hdfs"
    ckpt = tmp_path / "ckpt"
    shutil.copytree(fixture_checkpoint(name), ckpt)
    logs = ckpt / "sources" / "0"
    compact = next(p for p in logs.iterdir() if p.name.endswith(".compact"))
    (logs / "1").unlink()
    (batch,) = plan_json(ckpt, "--from", "1", "--to", "1", "--path-map", root_map(name))["batches"]
    assert relative_files(batch, FIXTURES / name) == fixture_facts(name)["batches"][1]["input_files"]
    compact.unlink()
    result = run_cli("replay", ckpt, "--from", "1", "--to", "1", "--plan", exit_code=2)
    assert "sources/0/1: file-source log batch 1 is missing (no 1 file and no later .compact file)" in result.output


# -- compacted and purged logs -----------------------------------------------------------------------


def test_compacted_source_log_and_purged_offsets():
    name = "compaction"
    facts = fixture_facts(name)
    ckpt = fixture_checkpoint(name)
    offsets = sorted(int(p.name) for p in (ckpt / "offsets").iterdir() if p.name.isdigit())
    oldest = offsets[0] + 1 if offsets[0] > 0 else 0
    assert any(p.name.endswith(".compact") for p in (ckpt / "sources" / "0").iterdir())
    doc = plan_json(ckpt, "--from", str(oldest), "--path-map", root_map(name))
    assert doc["oldest_replayable_batch"] == oldest
    by_batch = {b["batch"]: b for b in facts["batches"]}
    for batch in doc["batches"]:
        assert relative_files(batch, FIXTURES / name) == by_batch[batch["batch_id"]]["input_files"]
        assert batch["watermark_ms"] == by_batch[batch["batch_id"]]["watermark_ms"]
    if offsets[0] > 0:
        result = run_cli("replay", ckpt, "--from", str(offsets[0]), "--plan", exit_code=2)
        assert f"the oldest replayable batch is {oldest}" in result.output
        assert f"offsets/{offsets[0] - 1} was purged" in result.output and f"--from {oldest}" in result.output


# -- Kafka ---------------------------------------------------------------------------------------------


def kafka_checkpoint(root: Path, corpus: Path) -> Path:
    """Offsets in the recorded Spark 2.1 format: batch 0 is offset-log-version-2.1.0/0 verbatim."""
    ckpt = root / "kafka-ckpt"
    (ckpt / "offsets").mkdir(parents=True)
    (ckpt / "commits").mkdir()
    (ckpt / "sources" / "1").mkdir(parents=True)
    first = (corpus / "offset-log-version-2.1.0" / "0").read_text()
    version, meta, source0, kafka = first.split("\n")
    assert kafka == '{"topic-0":{"0":1}}'
    later = ['{"topic-0":{"0":5,"1":2}}', '{"topic-0":{"1":4,"0":9},"topic-1":{"0":3}}']
    for batch, offsets in enumerate([kafka, *later]):
        (ckpt / "offsets" / str(batch)).write_text("\n".join([version, meta, source0, offsets]))
        (ckpt / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    (ckpt / "sources" / "1" / "0").write_bytes(b'\x00v1\n{"topic-0":{"0":0}}')
    (ckpt / "metadata").write_text('{"id":"5b4b6b4e-8a0c-4f7a-9d26-0c1d1b7a3f10"}')
    return ckpt


def test_kafka_plan_json(tmp_path, corpus):
    ckpt = kafka_checkpoint(tmp_path, corpus)
    doc = plan_json(ckpt, "--from", "0", "--source", "1")
    srcs = [b["sources"][0] for b in doc["batches"]]
    assert [s["kind"] for s in srcs] == ["kafka"] * 3
    assert srcs[0]["starting_offsets_json"] == '{"topic-0":{"0":0}}'
    assert srcs[0]["ending_offsets_json"] == '{"topic-0":{"0":1}}' and srcs[0]["records"] == 1
    assert srcs[1]["starting_offsets"] == {"topic-0": {"0": 1, "1": -2}}
    assert srcs[1]["ending_offsets"] == {"topic-0": {"0": 5, "1": 2}}
    assert srcs[1]["records"] is None and "topic-0[1]" in srcs[1]["note"]
    assert srcs[2]["starting_offsets_json"] == '{"topic-0":{"0":5,"1":2},"topic-1":{"0":-2}}'
    assert srcs[2]["ending_offsets_json"] == '{"topic-0":{"0":9,"1":4},"topic-1":{"0":3}}'
    everything = plan_json(ckpt, "--from", "0", "--to", "0")
    other = everything["batches"][0]["sources"][0]
    assert (other["source_id"], other["kind"], other["replayable"]) == ("0", "long", False)


def test_kafka_multi_topic_recorded_offsets(tmp_path, corpus):
    ckpt = tmp_path / "k"
    (ckpt / "offsets").mkdir(parents=True)
    (ckpt / "sources" / "0").mkdir(parents=True)
    recorded = (corpus / "offset-log-version-2.1.0" / "15").read_text()
    (ckpt / "offsets" / "0").write_text(recorded)
    ends = json.loads(recorded.split("\n")[2])
    zeros = {t: {p: 0 for p in parts} for t, parts in ends.items()}
    (ckpt / "sources" / "0" / "0").write_bytes(b"\x00v1\n" + json.dumps(zeros).encode())
    (batch,) = plan_json(ckpt, "--from", "0", "--include-pending")["batches"]
    src = batch["sources"][0]
    assert list(src["ending_offsets"]) == sorted(ends)
    assert src["ending_offsets"]["stress5"] == {str(p): ends["stress5"][str(p)] for p in sorted(int(k) for k in ends["stress5"])}
    assert src["records"] == sum(o for parts in ends.values() for o in parts.values())
    assert batch["committed"] is False


def test_kafka_plan_lists_each_partitions_offset_range():
    """kafka_agg (written by a real query): per batch and topic-partition the recorded range, offline."""
    ckpt = FIXTURES / "kafka_agg" / "checkpoint"
    doc = plan_json(ckpt, "--from", "0", "--to", "3")
    topic = "wmcheck-kafka-agg"
    assert [s["partitions"] for b in doc["batches"] for s in b["sources"]] == [
        [{"topic": topic, "partition": p, "start": start, "end": end, "records": end - start} for p in (0, 1)]
        for start, end in ((0, 4), (4, 8), (8, 8), (8, 12))]
    assert doc["kafka_retention"] is None  # the broker is asked only with --option kafka.bootstrap.servers=...
    table = run_cli("replay", ckpt, "--from", "2", "--to", "3", "--plan").stdout
    assert table.split("Kafka offsets\n", 1)[1] == (
        "batch    source    topic              partition    from    to    records\n"
        "-------  --------  -----------------  -----------  ------  ----  ---------\n"
        f"2        0         {topic}  0            8       8     0\n"
        f"2        0         {topic}  1            8       8     0\n"
        f"3        0         {topic}  0            8       12    4\n"
        f"3        0         {topic}  1            8       12    4\n")


def test_kafka_retention_loses_the_batches_that_read_removed_offsets(tmp_path, corpus):
    """Pure: a batch is lost when one partition's range starts below the broker's earliest offset (a gone partition:
    always); a partition that starts at the earliest or reads nothing loses nothing."""
    from wmcheck.checkpoint.batch_inputs import plan
    from wmcheck.checkpoint.kafka_retention import GonePartition, retention
    from wmcheck.checkpoint.model import open_checkpoint

    batches = plan(open_checkpoint(str(kafka_checkpoint(tmp_path, corpus))), 0, source="1")
    found = retention(batches, {("topic-0", 0): 5, ("topic-0", 1): 0, ("topic-1", 0): None}, "b:9092")
    assert (found.lost_batches, found.replayable_batches) == ((0, 1), (2,))
    assert found.gone == (GonePartition("1", "topic-0", 0, 0, 5),)
    assert found.line == ("the broker no longer holds the recorded offsets of topic-0[0] (recorded from 0, earliest now "
                          "5): batches 0..1 read them; batch 2 can still be replayed")
    gone = retention(batches, {("topic-0", 0): 0, ("topic-0", 1): None, ("topic-1", 0): 0}, "b:9092")
    assert (gone.lost_batches, gone.replayable_batches) == ((2,), ())
    assert gone.line == ("the broker no longer holds the recorded offsets of topic-0[1] (recorded from 2, the partition "
                         "is gone): batch 2 read them; no batch of this range can be replayed")
    kept = retention(batches, {("topic-0", 0): 0, ("topic-0", 1): 2, ("topic-1", 0): 0}, "b:9092")
    assert (kept.gone, kept.lost_batches, kept.replayable_batches) == ((), (), (0, 1, 2))
    assert kept.line == "the broker at b:9092 still holds every recorded offset of these batches"


def test_kafka_plan_with_a_broker_that_does_not_answer_is_one_line():
    result = run_cli("replay", FIXTURES / "kafka_etl" / "checkpoint", "--from", "0", "--plan", "--option",
                     "kafka.bootstrap.servers=127.0.0.1:9", exit_code=2)
    assert result.output.startswith("Error: the Kafka broker at 127.0.0.1:9 did not answer a metadata request within 10 s: ")
    assert result.output.endswith(" (hint: check --option kafka.bootstrap.servers=HOST:PORT (and that the broker is up): "
                                  "replay asks it which recorded offsets it still holds)\n")
    assert len(result.output.splitlines()) == 1


def test_kafka_initial_offsets_errors():
    assert parse_kafka_initial_offsets(b'v1\n{"t":{"0":3}}', "sources/0/0") == {"t": {0: 3}}
    with pytest.raises(MalformedFileError, match="sources/0/0: line 2: expected"):
        parse_kafka_initial_offsets(b'\x00v1\n{"path":"x"}', "sources/0/0")


# -- locations ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("logged, spark", [
    ("file:///tmp/in/a%20b.json", "file:/tmp/in/a b.json"),
    ("file:/tmp/in/x.json", "file:/tmp/in/x.json"),
    ("/a/b/0", "/a/b/0"),
    ("s3a://bucket/in/k%3Dv/p.parquet", "s3a://bucket/in/k=v/p.parquet"),
])
def test_spark_location(logged, spark):
    assert spark_location(logged) == spark


@pytest.mark.parametrize("location, mapping, want", [
    ("file:/old/root/in/a.json", {"/old/root": "/new"}, "file:/new/in/a.json"),
    ("file:/old/root/in/a.json", {"file:///old/root/": "/new/"}, "file:/new/in/a.json"),
    ("file:/old/rootx/a.json", {"/old/root": "/new"}, "file:/old/rootx/a.json"),
    ("s3a://b1/data/p.json", {"s3a://b1/data": "s3a://b2/archive/data"}, "s3a://b2/archive/data/p.json"),
    ("file:/old/a.json", {"/old": "s3a://b/x"}, "s3a://b/x/a.json"),
])
def test_map_location(location, mapping, want):
    assert map_location(location, mapping) == want


def test_corpus_file_source_boundary_checkpoint(corpus):
    ckpt = corpus / "checkpoint-version-4.2.0-deduplication-metadata-boundary"
    (batch,) = plan_json(ckpt, "--from", "0", "--include-pending")["batches"]
    (src,) = batch["sources"]
    assert src["files"][0]["path"] == "file:///private/tmp/spark-59315-golden-source/first"
    assert src["files"][0]["location"] == "file:/private/tmp/spark-59315-golden-source/first"
    assert src["log_batches"] == [0] and src["start"] is None



def test_plan_needs_neither_pyspark_nor_pyarrow():
    name = "agg_window_hdfs"
    code = (
        "import sys\n"
        "from wmcheck.cli.main import cli\n"
        f"try:\n    cli(['replay', {str(fixture_checkpoint(name))!r}, '--from', '0', '--plan', '--format', 'json'])\n"
        "except SystemExit as exc:\n    assert exc.code in (0, None), exc.code\n"
        "assert 'pyspark' not in sys.modules and 'pyarrow' not in sys.modules, 'imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["batches"][0]["batch_id"] == 0


def test_plan_store_that_cannot_be_opened_is_unknown_not_missing():
    name = "agg_window_hdfs"
    doc = plan_json(fixture_checkpoint(name), "--from", "1", "--to", "1",
                    "--path-map", f"{fixture_facts(name)['root']}=nostore://bucket/data")
    (src,) = doc["batches"][0]["sources"]
    (f,) = src["files"]
    assert f["location"] == f"nostore://bucket/data/{fixture_facts(name)['batches'][1]['input_files'][0]}"
    assert (f["exists"], f["size"], src["missing_files"], src["bytes"]) == (None, None, 0, None)


def offsets_checkpoint(root: Path, offsets: list[str]) -> Path:
    """A checkpoint whose source 0 recorded ``offsets`` in batches 0, 1, ... (all committed)."""
    ckpt = root / "ckpt"
    (ckpt / "offsets").mkdir(parents=True)
    (ckpt / "commits").mkdir()
    for batch, offset in enumerate(offsets):
        meta = json.dumps({"batchWatermarkMs": batch * 1000, "batchTimestampMs": 1700000000000 + batch})
        (ckpt / "offsets" / str(batch)).write_text(f"v1\n{meta}\n{offset}")
        (ckpt / "commits" / str(batch)).write_text("v1\n{}")
    return ckpt


def test_delta_and_other_sources_plan_but_do_not_replay(tmp_path):
    delta = [
        '{"sourceVersion":1,"reservoirId":"d1","reservoirVersion":3,"index":-1,"isStartingVersion":true}',
        '{"sourceVersion":1,"reservoirId":"d1","reservoirVersion":5,"index":2,"isStartingVersion":false}',
    ]
    ckpt = offsets_checkpoint(tmp_path, delta)
    first, second = (b["sources"][0] for b in plan_json(ckpt, "--from", "0")["batches"])
    assert first["start_version"] is None
    assert first["end_version"] == {"reservoirVersion": 3, "index": -1, "isStartingVersion": True}
    assert second["start_version"] == first["end_version"]
    assert second["end_version"] == {"reservoirVersion": 5, "index": 2, "isStartingVersion": False}
    assert (second["kind"], second["replayable"]) == ("delta", False)
    result = run_cli("replay", ckpt, "--from", "1", "--foreach-batch", "json:dumps", exit_code=2)
    assert "offsets/1: batch 1: source 0 cannot be replayed (Delta source" in result.output and "delta-spark" in result.output
    rate = offsets_checkpoint(tmp_path / "rate", ["7", "12"])
    src = plan_json(rate, "--from", "1")["batches"][0]["sources"][0]
    assert (src["kind"], src["start"], src["end"], src["replayable"]) == ("long", "7", "12", False)
    result = run_cli("replay", rate, "--from", "1", "--output", tmp_path / "out", exit_code=2)
    assert "cannot be replayed (a long offset: wmcheck cannot rebuild this source's input)" in result.output
    assert not (tmp_path / "out").exists()


def test_a_plan_whose_logged_input_is_gone_suggests_the_path_map(copy_fixture):
    """The logs name input files where nothing is (the input moved): the plan says how many and what to pass, as
    check's relocate fix does; with every file there, nothing is said."""
    from wmcheck.checkpoint import repair

    root = copy_fixture("agg_window_hdfs")
    ckpt = root / "checkpoint"
    repair.run(str(ckpt), repair.RelocateRequest(path_map={fixture_facts("agg_window_hdfs")["root"]: str(root / "moved")}),
               repair.RunOptions(execute=True, idle_ms=0))
    lines = run_cli("replay", ckpt, "--plan", "--from", "11", "--to", "11").stdout.splitlines()
    assert lines[3] == ("missing files:     1 of the 1 logged input files are not where the logs say: if the input moved, "
                        "pass --path-map OLD=NEW (what wmcheck check's relocate fix names), or --skip-missing")
    there = run_cli("replay", ckpt, "--plan", "--from", "11", "--to", "11", "--path-map", f"{root / 'moved'}={root}").stdout
    assert "missing files:" not in there
