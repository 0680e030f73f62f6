"""``wmcheck replay`` with real Spark on the fixtures: each batch's exact rows, and Spark's own late-row counts."""
from __future__ import annotations

import csv
import io
import json
import os
import re
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest
from test_replay_plan import kafka_checkpoint

from conftest import fixture_checkpoint, fixture_facts, run_cli

pytestmark = pytest.mark.spark

CALLS: list[tuple[int, list[tuple]]] = []


def collect(df, batch_id):
    """A --foreach-batch sink: records (batch_id, sorted (id, event time ms, v) rows)."""
    rows = df.selectExpr("id", "unix_millis(ts) AS ts", "v").collect()
    CALLS.append((batch_id, sorted(tuple(r) for r in rows)))


def discard(df, batch_id):
    CALLS.append((batch_id, []))


def file_rows(path: Path) -> list[tuple]:
    out = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        ts = datetime.fromisoformat(row["ts"].replace("Z", "+00:00"))
        out.append((row["id"], int(ts.timestamp() * 1000), row["v"]))
    return out


def query_args(facts: dict, copy: Path, fmt: str = "json") -> list[str]:
    """How the fixture's query read its input, and where the copy's input now is."""
    args = ["--source-format", facts["source_format"], "--schema", facts["schema"],
            "--event-time", facts["event_time_column"], "--path-map", f"{facts['root']}={copy}", "--format", fmt]
    return args + (["--window", facts["window"]] if facts.get("window") else [])


def dropped(facts: dict) -> list[int]:
    return [b["num_rows_dropped_by_watermark"] for b in facts["batches"]]


@pytest.mark.parametrize("name", ["agg_window_hdfs", "agg_spark35", "compaction"])
def test_replayed_rows_are_exactly_each_batchs_files(name, copy_fixture, spark):
    """Each batch gets exactly the rows of the files it read (compaction: the batches whose offsets survive)."""
    facts = fixture_facts(name)
    copy = copy_fixture(name)
    offsets = sorted(int(p.name) for p in (copy / "checkpoint" / "offsets").iterdir() if p.name.isdigit())
    first = 0 if offsets[0] == 0 else offsets[0] + 1
    batches = [b for b in facts["batches"] if b["batch"] >= first]
    CALLS.clear()
    summary = json.loads(run_cli("replay", copy / "checkpoint", "--from", str(first), "--foreach-batch",
                                 "test_replay_spark:collect", *query_args(facts, copy)).stdout)
    assert [c[0] for c in CALLS] == [b["batch"] for b in batches]
    for (batch_id, rows), batch in zip(CALLS, batches):
        want = sorted(r for f in batch["input_files"] for r in file_rows(copy / f))
        assert rows == want, batch_id
        assert len(rows) == batch["num_input_rows"]
    if first == 0:
        everything = Counter(r for f in (copy / "input").rglob("*.json") for r in file_rows(f))
        assert Counter(r for _, rows in CALLS for r in rows) == everything
    assert [s["late_rows"] for s in summary] == [b["num_rows_dropped_by_watermark"] for b in batches]
    assert [s["rows"] for s in summary] == [b["num_input_rows"] for b in batches]
    assert [s["watermark_ms"] for s in summary] == [b["watermark_ms"] for b in batches]
    assert all(s["kept_rows"] == s["rows"] == s["late_rows"] + s["on_time_rows"] for s in summary)


def test_late_only_parquet_output_matches_spark(copy_fixture, spark, tmp_path):
    name = "agg_window_rocksdb"
    facts = fixture_facts(name)
    copy = copy_fixture(name)
    out = tmp_path / "late"
    summary = json.loads(run_cli("replay", copy / "checkpoint", "--from", "0", "--late-only", "--output", out,
                                 "--group-by", "id", *query_args(facts, copy)).stdout)
    assert [s["late_rows"] for s in summary] == dropped(facts)
    assert [s["late_groups"] for s in summary] == dropped(facts)
    assert [s["kept_rows"] for s in summary] == dropped(facts)
    written = spark.read.parquet(str(out))
    assert set(written.columns) == {"id", "ts", "v", "window", "batch_id"}
    per_batch = Counter(r["batch_id"] for r in written.select("batch_id").collect())
    assert {b: n for b, n in per_batch.items()} == {b["batch"]: n for b, n in zip(facts["batches"], dropped(facts)) if n}
    late = {(r["batch_id"], r["id"], r["v"]) for r in written.collect()}
    by_batch = {b["batch"]: b for b in facts["batches"]}
    for batch_id, key, v in late:  # each late row is in that batch's files and its window ended by the late watermark
        rows = [r for f in by_batch[batch_id]["input_files"] for r in file_rows(copy / f) if r[0] == key and r[2] == v]
        previous = by_batch[batch_id - 1]["watermark_ms"]
        assert len(rows) == 1 and (rows[0][1] // 10_000 + 1) * 10_000 <= previous
    result = run_cli("replay", copy / "checkpoint", "--from", "0", "--late-only", "--output", out,
                     *query_args(facts, copy), exit_code=2)
    assert "is not empty" in result.output and "--overwrite" in result.output
    run_cli("replay", copy / "checkpoint", "--from", "5", "--to", "5", "--output", out, "--overwrite",
            *query_args(facts, copy))
    again = spark.read.parquet(str(out))
    assert {r["batch_id"] for r in again.select("batch_id").collect()} == {5}
    assert again.count() == facts["batches"][5]["num_input_rows"]


@pytest.mark.parametrize("name", ["dedup_watermark", "pandas_state_timeout", "tws_pandas", "chained_aggs",
                                  "checkpoint_v2"])
def test_late_counts_equal_spark(name, copy_fixture, spark):
    """Every single-source fixture: late rows per batch == Spark's numRowsDroppedByWatermark."""
    from wmcheck.checkpoint.batch_inputs import oldest_replayable
    from wmcheck.checkpoint.model import open_checkpoint
    from wmcheck.statestore.spark.replay import batch_inputs

    facts = fixture_facts(name)
    copy = copy_fixture(name)
    ckpt = open_checkpoint(str(copy / "checkpoint"))
    first = oldest_replayable(ckpt)
    got = [(batch_id, df.count(), wm) for batch_id, df, wm in batch_inputs(
        spark, ckpt, first, source_format=facts["source_format"], schema=facts["schema"],
        event_time=facts["event_time_column"], window=facts.get("window") if name != "dedup_watermark" else None,
        keep="late", path_map={facts["root"]: str(copy)})]
    want = [(b["batch"], b["num_rows_dropped_by_watermark"], b["watermark_ms"]) for b in facts["batches"] if b["batch"] >= first]
    assert got == want


@pytest.mark.parametrize("name", ["multi_watermark_max", "join_stream_stream"])
def test_two_sources_late_counts_sum_to_spark(name, copy_fixture, spark):
    facts = fixture_facts(name)
    copy = copy_fixture(name)
    args = query_args(facts, copy)
    if name == "join_stream_stream":
        args = args[: args.index("--window")] if "--window" in args else args
    per_source = []
    for source in ("0", "1"):
        CALLS.clear()
        rows = json.loads(run_cli("replay", copy / "checkpoint", "--from", "0", "--source", source,
                                  "--foreach-batch", "test_replay_spark:discard", *args).stdout)
        assert [c[0] for c in CALLS] == [b["batch"] for b in facts["batches"]]
        per_source.append([r["late_rows"] for r in rows])
    assert [a + b for a, b in zip(*per_source)] == dropped(facts)
    result = run_cli("replay", copy / "checkpoint", "--from", "0", "--foreach-batch", "test_replay_spark:discard",
                     *args, exit_code=2)
    assert "the query has 2 sources (0, 1)" in result.output and "--source" in result.output


def test_late_boundary_is_inclusive_and_counts_groups(spark, tmp_path):
    """A query of our own at the boundary: a window ending exactly at the late watermark is late (<=), and
    Spark counts late aggregation groups, not rows; the previous batch's watermark decides."""
    from pyspark.sql import functions as F

    inp, ckpt = tmp_path / "in", tmp_path / "ckpt"
    inp.mkdir()
    files = [[("x", "30.0")], [("y", "31.0")], [("p", "19.6"), ("p", "19.7"), ("q", "20.2"), ("r", "21.0")]]
    for i, rows in enumerate(files):
        path = inp / f"f{i}.json"
        path.write_text("".join(json.dumps({"id": k, "ts": f"2024-01-01T00:00:{float(s):06.3f}Z", "v": 1}) + "\n"
                                for k, s in rows))
        os.utime(path, (1_700_000_000 + i * 10, 1_700_000_000 + i * 10))
    query = (
        spark.readStream.format("json").schema("id STRING, ts TIMESTAMP, v INT").option("maxFilesPerTrigger", 1)
        .load(str(inp)).withWatermark("ts", "10 seconds").groupBy(F.window("ts", "500 milliseconds"), "id").count()
        .writeStream.format("noop").outputMode("append").option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True).start()
    )
    query.awaitTermination()
    progress = [json.loads(p.json) if hasattr(p, "json") else p for p in query.recentProgress]
    spark_dropped = {p["batchId"]: sum(o["numRowsDroppedByWatermark"] for o in p["stateOperators"]) for p in progress}
    assert spark_dropped[2] == 1
    args = ["replay", ckpt, "--from", "0", "--to", "2", "--foreach-batch", "test_replay_spark:discard",
            "--source-format", "json", "--schema", "id STRING, ts TIMESTAMP, v INT", "--event-time", "ts",
            "--window", "500 milliseconds", "--group-by", "id", "--format", "json"]
    rows = json.loads(run_cli(*args).stdout)
    assert {r["batch"]: r["late_groups"] for r in rows} == {b: spark_dropped[b] for b in range(3)}
    assert [r["late_rows"] for r in rows] == [0, 0, 2]
    current = json.loads(run_cli(*args, "--late-watermark", "current").stdout)
    assert [r["late_groups"] for r in current] == [0, 0, 2]


def test_missing_input_files_are_listed_or_skipped(copy_fixture, spark):
    name = "agg_window_hdfs"
    facts = fixture_facts(name)
    copy = copy_fixture(name)
    gone = facts["batches"][2]["input_files"][0]
    (copy / gone).unlink()
    args = ["replay", copy / "checkpoint", "--from", "1", "--to", "3", "--foreach-batch", "test_replay_spark:collect",
            *query_args(facts, copy)]
    error = json.loads(run_cli(*args, exit_code=2).output)  # --format json: the error is a JSON object too
    assert (error["where"], error["param"], error["exit_code"]) == ("sources/0/2", None, 2)
    assert error["error"] == f"1 input file(s) of batches 2..2 no longer exist: file:{copy / gone}"
    assert error["hint"].endswith("or --skip-missing to replay without them")
    text = run_cli(*args[:8], *query_args(facts, copy, "table"), exit_code=2).output
    assert text.startswith(f"Error: sources/0/2: 1 input file(s) of batches 2..2 no longer exist: file:{copy / gone}")
    assert "--skip-missing" in text and len(text.strip().splitlines()) == 1
    CALLS.clear()
    rows = json.loads(run_cli(*args, "--skip-missing").stdout)
    assert [(r["batch"], r["files"], r["missing_files"], r["rows"]) for r in rows] == [(1, 1, 0, 3), (2, 0, 1, 0), (3, 1, 0, 3)]
    assert [c[0] for c in CALLS] == [1, 2, 3] and CALLS[1][1] == []


def test_event_time_errors(copy_fixture, spark):
    name = "agg_window_hdfs"
    facts = fixture_facts(name)
    copy = copy_fixture(name)
    base = ["replay", copy / "checkpoint", "--from", "1", "--to", "1", "--foreach-batch", "test_replay_spark:discard",
            "--source-format", "json", "--path-map", f"{facts['root']}={copy}"]
    result = run_cli(*base, "--late-only", "--event-time", "ts", exit_code=2)
    assert "--event-time column 'ts' is string, not a timestamp" in result.output and "--schema" in result.output
    result = run_cli(*base, "--schema", facts["schema"], "--late-only", "--event-time", "when", exit_code=2)
    assert "--event-time column 'when' is not in the input (id, ts, v)" in result.output
    no_format = [a for a in base if a not in ("--source-format", "json")]
    result = run_cli(*no_format, exit_code=2)
    assert "replaying a file source needs --source-format" in result.output


def fail(df, batch_id):
    raise ValueError(f"sink broke on {batch_id}")


def test_foreach_batch_errors(spark):
    ckpt = fixture_checkpoint("agg_window_hdfs")
    base = ["replay", ckpt, "--from", "4", "--to", "4", "--source-format", "json", "--foreach-batch"]
    assert "cannot import no_such_module" in run_cli(*base, "no_such_module:f", exit_code=2).output
    assert "has no function nope" in run_cli(*base, "test_replay_spark:nope", exit_code=2).output
    assert "expects module:function" in run_cli(*base, "test_replay_spark", exit_code=2).output
    result = run_cli(*base, "test_replay_spark:fail", exit_code=2)
    assert "failed on batch 4: ValueError: sink broke on 4" in result.output


def test_kafka_without_connector_is_one_clear_line(tmp_path, corpus, spark, monkeypatch):
    ckpt = kafka_checkpoint(tmp_path, corpus)
    monkeypatch.setattr("wmcheck.checkpoint.kafka_retention.client_installed", lambda: False)  # no broker to ask
    result = run_cli("replay", ckpt, "--from", "0", "--source", "1", "--foreach-batch", "test_replay_spark:discard",
                     "--option", "kafka.bootstrap.servers=127.0.0.1:9", exit_code=2)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"Error: reading a Kafka source needs Spark's Kafka connector, which is not on the classpath of Spark "
        f"{spark.version} (hint: add --packages org.apache.spark:spark-sql-kafka-0-10_2.13:{spark.version}, or --jars")
    result = run_cli("replay", ckpt, "--from", "0", "--source", "0", "--foreach-batch", "test_replay_spark:discard",
                     exit_code=2)
    assert "source 0 cannot be replayed (a long offset" in result.output


def test_summary_table_and_csv(copy_fixture, spark):
    name = "agg_window_hdfs"
    facts = fixture_facts(name)
    copy = copy_fixture(name)
    batch = next(b for b in facts["batches"] if b["num_rows_dropped_by_watermark"])
    args = ["replay", copy / "checkpoint", "--from", str(batch["batch"]), "--to", str(batch["batch"]), "--late-only",
            "--foreach-batch", "test_replay_spark:discard"]
    (row,) = list(csv.DictReader(io.StringIO(run_cli(*args, *query_args(facts, copy, "csv")).stdout)))
    assert row["batch"] == str(batch["batch"]) and row["watermark_ms"] == str(batch["watermark_ms"])
    assert row["late_rows"] == row["kept_rows"] == str(batch["num_rows_dropped_by_watermark"])
    assert row["rows"] == str(batch["num_input_rows"]) and row["late_groups"] == ""
    table = run_cli(*args, *query_args(facts, copy, "table")).stdout.splitlines()
    assert re.split(r"\s{2,}", table[0].strip()) == [
        "batch", "committed", "watermark", "late watermark", "source", "files", "missing files", "rows", "late rows",
        "on-time rows", "kept rows", "operators"]  # no late groups column: no batch has them without --group-by
    cells = table[2].split()
    assert cells[0] == str(batch["batch"]) and cells[2] == str(batch["watermark_ms"])
    late = batch["num_rows_dropped_by_watermark"]
    # late_groups is null (the column left out); the aggregation's own count is late groups, which need the window
    assert cells[-8:] == [str(late), str(batch["num_input_rows"] - late), str(late), "operator", "0:", "?", "late", ""][:-1] \
        or cells[-7:] == [str(late), str(batch["num_input_rows"] - late), str(late), "operator", "0:", "?", "late"]


def test_packages_cannot_join_a_running_session(spark):
    result = run_cli("replay", fixture_checkpoint("agg_window_hdfs"), "--from", "4", "--to", "4",
                     "--foreach-batch", "test_replay_spark:discard", "--packages", "org.example:nothing:1.0", exit_code=2)
    assert "org.example:nothing:1.0 cannot be added to the Spark session already running" in result.output
