"""``wmcheck state`` with real Spark on the fixtures: the reader's rows, the keys older than the watermark
(computed here independently from the rows Spark's reader returned and the fixture's watermark), and
what every batch evicted against Spark's own metrics and output."""
from __future__ import annotations

import csv
import io
import json
import shutil
from datetime import datetime
from pathlib import Path

import pytest

from wmcheck.statestore import older_than_watermark, read_state
from wmcheck.statestore.engines import summarize

from conftest import fixture_checkpoint, fixture_facts, fixture_names, run_cli

pytestmark = pytest.mark.spark

# the chains whose operators have watermarks of their own are judged by them in tests/test_operator_watermarks.py
PER_OPERATOR = {"join_then_agg", "dedup_then_agg", "fmgws_then_agg", "tws_then_agg", "fmgws_tws_agg", "join_then_agg_spark35",
                "dedup_then_agg_spark35", "fmgws_then_agg_spark35"}
FIXTURES = [n for n in fixture_names() if n not in PER_OPERATOR]
REPARTITION_KINDS = {"dedup_within_wm_p3", "session_window_p3", "pandas_state_p3", "tws_timers_ttl_p3", "join_v2_p3",
                     "join_v3_p3", "join_v4_p3", "streamline_agg_p3"}
"""Fixtures of the operator kinds Spark's repartition moves (tests/test_repartition_kinds.py): their rows are compared
in tests/test_state_python.py; their operators' eviction rules are not written down here (event_ms)."""
WINDOWED = {"agg_then_agg", "agg_then_agg_spark35", "state_types", "state_types_rocksdb", "agg_window_hdfs", "agg_window_rocksdb", "checkpoint_v2", "compaction", "multi_watermark_max", "agg_spark35", "chained_aggs",
            "repartition_rocksdb", "repartition_failed_hdfs", "agg_rocksdb_v2_p3", "union_stall_min", "union_stall_max",
            "sliding_window", "no_new_input", "stalled_event_time", "row_checksum_hdfs", "interval_state", "python_source",
            "agg_window_rocksdb_spark35", "compaction_spark35", "union_stall_min_spark35", "agg_window_delta", "delta_source_agg", "foreach_batch_delta"}
JOINS = {"join_stream_stream", "join_stream_stream_spark35"}
"""Stream-stream joins shown by side (left, right), their rows those of each side's keyWithIndexToValue store."""
DEDUPLICATED = {"dedup_watermark", "dedup_rocksdb_p3"}
EVENT_TIME_TWS = {"tws_pandas", "row_checksum_tws", "avro_tws"}
TIMEOUTS = {"pandas_state_timeout", "pandas_state_p3_spark35"}
"""Group state with event-time timeouts (a group's timeoutTimestamp is when it times out)."""
TIMERS = "$eventTimers_keyToTimestamp"


def iso_ms(text: str) -> int:
    """Epoch ms of fixture.json's ISO timestamps (microseconds dropped like Spark's floor)."""
    when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return int(when.timestamp() * 1_000_000) // 1000


def fixture_rows(name: str, op: str, store: str) -> list[dict]:
    """The rows of the reader view ``store``, as Spark's reader returned them (a join side is its keyWithIndexToValue store)."""
    state = fixture_facts(name)["state"][op]
    return state[f"{store}-keyWithIndexToValue" if f"{store}-keyWithIndexToValue" in state else store]["rows"]


def event_ms(name: str, store: str, row: dict) -> int | None:
    """Spark's eviction time of one reader row, in ms (None: never evicted by the watermark)."""
    if name in WINDOWED:
        return iso_ms(row["key"]["window"]["end"])
    if name in DEDUPLICATED:
        return iso_ms(row["key"]["ts"])
    if name in JOINS:
        return iso_ms(row["value"][store[0] + "_ts"])
    if name in TIMEOUTS:
        return None if row["value"]["timeoutTimestamp"] == -1 else row["value"]["timeoutTimestamp"]
    if name in EVENT_TIME_TWS and store == TIMERS:
        return row["expiration_timestamp_ms"]
    return None


def evicted(name: str, store: str, when: int | None, watermark: int) -> bool:
    """Spark's comparison: timeouts fire below the watermark, everything else (transformWithState's timers too) at or
    below it."""
    if when is None:
        return False
    return when < watermark if name in TIMEOUTS else when <= watermark


def views(name: str) -> list[tuple[str, str]]:
    """(operator, view) pairs the summary shows: a join's sides instead of its stores."""
    out = []
    for op, stores in fixture_facts(name)["state"].items():
        names = ["left", "right"] if name in JOINS else list(stores)
        out += [(op, s) for s in names]
    return out


@pytest.fixture(params=["spark", "python"])
def engine(request) -> str:
    """Every CLI test runs with Spark's reader and with the python engine: the same assertions hold for both."""
    return request.param


def state_cli(engine: str, *args, exit_code: int = 0):
    return run_cli("state", *args, "--engine", engine, exit_code=exit_code)


def summary(engine: str, name: str, *args: str) -> dict:
    return json.loads(state_cli(engine, fixture_checkpoint(name), "--format", "json", *args).stdout)


@pytest.mark.parametrize("name", [n for n in FIXTURES if n not in REPARTITION_KINDS])
def test_summary_matches_reader_rows_and_watermark(name, spark, engine):
    facts = fixture_facts(name)
    doc = summary(engine, name)
    wm = facts["next_watermark_ms"]
    assert (doc["batch"], doc["state_batch_id"], doc["watermark_ms"], doc["watermark_from"]) == (
        facts["last_committed_batch"] + 1, facts["last_committed_batch"], wm, "next batch")
    got = {(str(s["operator_id"]), s["store"]): s for s in doc["stores"]}
    assert sorted(got) == sorted(views(name))
    for (op, store), s in got.items():
        rows = fixture_rows(name, op, store)
        assert s["rows"] == len(rows)
        side = f"{store}-keyWithIndexToValue" if store in ("left", "right") else store
        assert s["rows_per_partition"] == facts["state"][op][side]["rows_per_partition"]
        times = [event_ms(name, store, r) for r in rows]
        known = [t for t in times if t is not None]
        if name in JOINS:  # a join side's state watermark is the event log's (its condition): unknown without it
            assert (s["older_than_watermark"], s["watermark_ms"]) == (None, None)
            assert s["oldest_event_time_ms"] == (min(known) if known else None)
            continue
        assert s["older_than_watermark"] == sum(evicted(name, store, t, wm) for t in times)
        assert s["oldest_event_time_ms"] == (min(known) if known else None)
        if s["evictable"]:
            assert s["without_event_time"] == len(times) - len(known)
            assert s["oldest_behind_watermark_ms"] == (wm - min(known) if known else None)
            assert sum(b["rows"] for b in s["histogram"]) == len(known)
        else:
            assert s["event_time_column"] is None and s["histogram"] is None


def _middle(times: list[int]) -> int:
    ordered = sorted(set(times))
    return ordered[len(ordered) // 2]


def with_event_times(name: str, op: str, store: str) -> bool:
    return any(event_ms(name, store, r) is not None for r in fixture_rows(name, op, store))


@pytest.mark.parametrize("name,op,store", [(n, op, s) for n in FIXTURES for op, s in views(n) if with_event_times(n, op, s)])
def test_what_if_watermark_lists_exactly_the_older_rows(name, op, store, spark, engine):
    """--watermark at the middle event time: the listed keys are those Spark's rule selects from the reader's rows."""
    rows = fixture_rows(name, op, store)
    times = [event_ms(name, store, r) for r in rows]
    wm = _middle([t for t in times if t is not None])
    selector = ["--join-side", store] if store in ("left", "right") else ["--state-var", store] if store == TIMERS else ["--store", store]
    args = [fixture_checkpoint(name), "--older-than-watermark", "--operator", op, *selector, "--watermark", str(wm), "--format", "json"]
    if engine == "spark" and name.startswith("state_types"):  # aggregation buffers repeat field names (first, valueSet)
        failed = state_cli(engine, *args, exit_code=2)  # --format json: the error is an object on stdout
        assert "[DUPLICATED_FIELD_NAME_IN_ARROW_STRUCT]" in json.loads(failed.stdout)["error"] and failed.stderr == ""
        return
    out = json.loads(state_cli(engine, *args).stdout)
    want = sorted((r["partition_id"], json.dumps(r["key"], sort_keys=True), t) for r, t in zip(rows, times) if evicted(name, store, t, wm))
    if name in JOINS:  # the side view drops the store's index column from the key
        want = sorted((p, json.dumps({"field0": json.loads(k)["field0"]}), t) for p, k, t in want)
    got = sorted((r["partition_id"], json.dumps(r["key"], sort_keys=True), r["event_time_ms"]) for r in out)
    assert got == want and 0 < len(got) < len(rows) + 1
    assert {(r["operator_id"], r["store"]) for r in out} == {(int(op), store)}
    assert [r["event_time_ms"] for r in out] == sorted(r["event_time_ms"] for r in out)


@pytest.mark.parametrize("name,store,args", [
    ("agg_window_hdfs", "default", []),
    ("pandas_state_timeout", "default", []),
    ("tws_pandas", TIMERS, ["--state-var", TIMERS]),
])
def test_watermark_below_every_key_selects_none_above_selects_all(name, store, args, spark, engine):
    rows = fixture_rows(name, "0", store)
    times = [event_ms(name, store, r) for r in rows]
    low, high = min(times), max(times)
    listing = [engine, fixture_checkpoint(name), "--older-than-watermark", "--format", "json", *args]
    strict = name == "pandas_state_timeout"  # timeouts fire below the watermark, timers and windows at or below it
    assert json.loads(state_cli(*listing, "--watermark", str(low if strict else low - 1)).stdout) == []
    everything = json.loads(state_cli(*listing, "--watermark", str(high + 1 if strict else high)).stdout)
    assert len(everything) == len(rows)
    if name == "pandas_state_timeout":  # the value is the reader's value, exactly
        got = sorted((r["partition_id"], r["key"]["id"], json.dumps(r["value"], sort_keys=True)) for r in everything)
        assert got == sorted((r["partition_id"], r["key"]["id"], json.dumps(r["value"], sort_keys=True)) for r in rows)


# -- what each batch evicted, against Spark's metrics and outputs -----------------------------------


@pytest.mark.parametrize("name", ["agg_window_hdfs", "dedup_watermark", "chained_aggs", "checkpoint_v2", "agg_spark35"])
def test_each_batch_evicts_what_spark_removed(name, spark, engine):
    """The keys older than batch N's watermark in the state batch N started from = Spark's numRowsRemoved of batch N."""
    facts = fixture_facts(name)
    ckpt = str(fixture_checkpoint(name))
    first = min(int(p.name) for p in (fixture_checkpoint(name) / "commits").iterdir() if p.name.isdigit()) + 1
    checked = 0
    for b in facts["batches"]:
        if b["batch"] < first:
            continue
        doc = summarize(ckpt, batch=b["batch"], engine=engine, spark=spark)
        assert (doc.watermark_ms, doc.engine) == (b["watermark_ms"], engine)
        older = {s.operator_id: s.older_than_watermark for s in doc.stores}
        removed = {i: o["num_rows_removed"] for i, o in enumerate(b["state_operators"])}  # listed by operator id
        assert older == removed, b["batch"]
        checked += sum(removed.values())
    assert checked > 0


def test_join_evicts_below_watermark_minus_its_time_range(spark, engine):
    """The join condition bounds r_ts within 5 s of l_ts: Spark removes rows <= watermark - 5 s from both sides."""
    for b in fixture_facts("join_stream_stream")["batches"][1:]:
        doc = summary(engine, "join_stream_stream", "--batch", str(b["batch"]), "--watermark", "watermark-5 seconds")
        assert doc["watermark_ms"] == b["watermark_ms"] - 5000
        assert sum(s["older_than_watermark"] for s in doc["stores"]) == b["state_operators"][0]["num_rows_removed"]


def test_timed_out_keys_are_the_ones_the_function_saw_time_out(spark, engine):
    """applyInPandasWithState: keys whose timeout is below batch N's watermark = rows emitted with timed_out in batch N."""
    name = "pandas_state_timeout"
    root = fixture_checkpoint(name).parent
    seen = 0
    for b in fixture_facts(name)["batches"][1:]:
        out = json.loads(state_cli(engine, fixture_checkpoint(name), "--older-than-watermark", "--batch", str(b["batch"]),
                                 "--format", "json").stdout)
        emitted = [json.loads(line) for line in (root / "output" / f"batch-{b['batch']:06d}.json").read_text().splitlines()]
        assert sorted(r["key"]["id"] for r in out) == sorted(e["id"] for e in emitted if e["timed_out"])
        seen += len(out)
    assert seen > 0


def test_fired_timers_are_the_sessions_the_processor_emitted(spark, engine):
    """transformWithState: timers at or below batch N's watermark = sessions emitted (by handleExpiredTimer) in batch N."""
    import pyarrow.parquet as pq

    name = "tws_pandas"
    root = fixture_checkpoint(name).parent
    seen = 0
    for b in fixture_facts(name)["batches"][1:]:
        out = json.loads(state_cli(engine, fixture_checkpoint(name), "--older-than-watermark", "--batch", str(b["batch"]),
                                 "--format", "json").stdout)
        log = root / "output" / "_spark_metadata" / str(b["batch"])
        files = [json.loads(line)["path"].removeprefix("file:") for line in log.read_text().splitlines()[1:]] if log.exists() else []
        emitted = [r for f in files for r in pq.read_table(root / Path(f).relative_to(fixture_facts(name)["root"])).to_pylist()]
        assert sorted((r["key"]["id"], r["event_time_ms"]) for r in out) == sorted((e["id"], e["expired_at_ms"]) for e in emitted)
        seen += len(out)
    assert seen > 0


# -- every output format ----------------------------------------------------------------------------


AGG = "agg_window_hdfs"


def agg_listing() -> list[dict]:
    """The fixture's rows as the JSON listing shows them, for a watermark at or above every window end."""
    rows = fixture_rows(AGG, "0", "default")
    return sorted(({"operator_id": 0, "store": "default", "partition_id": r["partition_id"], "key": r["key"], "value": r["value"],
                    "event_time_ms": event_ms(AGG, "default", r)} for r in rows),
                  key=lambda r: (r["event_time_ms"], r["partition_id"], json.dumps(r["key"], sort_keys=True)))


def top_watermark() -> str:
    return str(max(r["event_time_ms"] for r in agg_listing()))


def test_listing_json_is_the_readers_rows(spark, engine):
    out = json.loads(state_cli(engine, fixture_checkpoint(AGG), "--older-than-watermark", "--watermark", top_watermark(),
                             "--format", "json").stdout)
    assert out == agg_listing()


def test_listing_limit_keeps_the_oldest(spark, engine):
    out = json.loads(state_cli(engine, fixture_checkpoint(AGG), "--older-than-watermark", "--watermark", top_watermark(),
                             "--limit", "2", "--format", "json").stdout)
    assert out == agg_listing()[:2]


def test_listing_csv(spark, engine):
    text = state_cli(engine, fixture_checkpoint(AGG), "--older-than-watermark", "--watermark", top_watermark(), "--format", "csv").stdout
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == ["operator_id", "store", "partition_id", "key", "value", "event_time_ms"]
    assert [(int(r["partition_id"]), json.loads(r["key"]), json.loads(r["value"]), int(r["event_time_ms"])) for r in rows] == [
        (r["partition_id"], r["key"], r["value"], r["event_time_ms"]) for r in agg_listing()]


def test_listing_table(spark, engine):
    text = state_cli(engine, fixture_checkpoint(AGG), "--older-than-watermark", "--watermark", top_watermark()).stdout
    lines = text.splitlines()
    assert lines[0] == f"watermark {top_watermark()} (2024-01-01T00:01:40.000Z, --watermark)"
    assert lines[1].split() == ["operator_id", "store", "partition_id", "key", "value", "event", "time", "behind", "watermark"]
    first = agg_listing()[0]
    assert lines[3].split()[:4] == ["0", "default", str(first["partition_id"]), json.dumps(first["key"], separators=(",", ":"))]
    assert len(lines) == 3 + len(agg_listing())


def test_listing_table_names_stores_the_watermark_never_evicts(spark, engine):
    text = state_cli(engine, fixture_checkpoint("tws_pandas"), "--older-than-watermark").stdout
    assert "operator 0 count: state variable: the watermark never evicts it" in text
    assert text.splitlines()[-1] == "(none)"


def test_listing_parquet(spark, tmp_path, engine):
    import pyarrow.parquet as pq

    target = tmp_path / "older.parquet"
    result = state_cli(engine, fixture_checkpoint(AGG), "--older-than-watermark", "--watermark", top_watermark(),
                     "--format", "parquet", "--output", target)
    assert result.stdout == f"wrote {len(agg_listing())} rows to {target}\n"
    table = pq.read_table(target)
    assert table.column_names == ["operator_id", "store", "partition_id", "key", "value", "event_time_ms"]
    # the file is written from parts (a row group per part with rows): Spark reads every row group
    assert pq.ParquetFile(target).metadata.num_row_groups == (1 if engine == "spark" else len({r["partition_id"] for r in agg_listing()}))
    assert sorted(spark.read.parquet(str(target)).select("partition_id", "event_time_ms").collect()) == \
        sorted(zip(table.column("partition_id").to_pylist(), table.column("event_time_ms").to_pylist()))
    got = sorted(table.to_pylist(), key=lambda r: (r["event_time_ms"], r["partition_id"], json.dumps(r["key"], default=str, sort_keys=True)))
    assert [(r["partition_id"], r["key"]["id"], r["value"], r["event_time_ms"], int(r["key"]["window"]["end"].timestamp() * 1000))
            for r in got] == [(r["partition_id"], r["key"]["id"], r["value"], r["event_time_ms"], r["event_time_ms"]) for r in agg_listing()]


def test_parquet_refuses_stores_of_different_shapes(spark, tmp_path, engine):
    result = state_cli(engine, fixture_checkpoint("join_stream_stream"), "--older-than-watermark", "--watermark", "watermark+1 hour",
                     "--format", "parquet", "--output", tmp_path / "x.parquet", exit_code=2)
    assert result.stderr.startswith("Error: operator 0 left, operator 0 right have different key/value schemas")


def test_summary_table(spark, engine):
    facts = fixture_facts(AGG)
    text = state_cli(engine, fixture_checkpoint(AGG)).stdout
    assert f"watermark:  {facts['next_watermark_ms']} (2024-01-01T00:01:25.000Z, next batch)" in text
    per_partition = " ".join(f"{p}:{n}" for p, n in facts["state"]["0"]["default"]["rows_per_partition"].items())
    row = next(line for line in text.splitlines() if line.startswith("0 ") and "stateStoreSave" in line)
    assert row.split()[:5 + len(per_partition.split())] == ["0", "stateStoreSave", "default", "4", *per_partition.split(), "key.window.end"]
    assert "removed once key.window.end <= watermark (never in complete output mode)" in text
    assert "event time minus watermark" in text and "(0, +10s]" in text


def test_summary_csv(spark, engine):
    facts = fixture_facts(AGG)
    rows = dict(csv.reader(io.StringIO(state_cli(engine, fixture_checkpoint(AGG), "--format", "csv").stdout)))
    assert rows["watermark_ms"] == str(facts["next_watermark_ms"])
    assert rows["stores.0.rows"] == "4" and rows["stores.0.event_time_column"] == "key.window.end"
    assert {k.split(".")[-1]: int(v) for k, v in rows.items() if k.startswith("stores.0.rows_per_partition.")} == {
        p: n for p, n in facts["state"]["0"]["default"]["rows_per_partition"].items()}


def test_summary_tz_changes_only_displayed_times(spark, engine):
    text = state_cli(engine, fixture_checkpoint(AGG), "--tz", "Asia/Tokyo").stdout
    assert "2024-01-01T09:01:25.000+09:00" in text


def test_output_file(spark, tmp_path, engine):
    target = tmp_path / "summary.json"
    assert state_cli(engine, fixture_checkpoint(AGG), "--format", "json", "--output", target).stdout == ""
    assert json.loads(target.read_text())["stores"][0]["rows"] == 4


# -- the Python API ---------------------------------------------------------------------------------


def test_read_state_is_the_raw_reader(spark):
    df = read_state(spark, str(fixture_checkpoint("pandas_state_timeout")))
    assert df.columns == ["key", "value", "partition_id"]
    rows = sorted((r["partition_id"], r["key"]["id"], r["value"]["timeoutTimestamp"]) for r in df.collect())
    assert rows == sorted((r["partition_id"], r["key"]["id"], r["value"]["timeoutTimestamp"])
                          for r in fixture_rows("pandas_state_timeout", "0", "default"))


def test_older_than_watermark_dataframe(spark):
    ckpt = str(fixture_checkpoint("join_stream_stream"))
    df = older_than_watermark(spark, ckpt, store="left", watermark_ms=10**13)
    assert df.columns == ["operator_id", "store", "partition_id", "key", "value", "event_time_ms"]
    assert df.count() == len(fixture_rows("join_stream_stream", "0", "left"))
    with pytest.raises(Exception, match="operator 0 has several stores: left, right"):
        older_than_watermark(spark, ckpt)
    timers = older_than_watermark(spark, str(fixture_checkpoint("tws_pandas")), watermark_ms=10**13)
    assert timers.select("store").distinct().collect()[0][0] == TIMERS


def test_active_session_is_reused(spark):
    from wmcheck.statestore.spark.session import get_session, quiet_java_options

    assert get_session() == (spark, False)
    options = quiet_java_options("-Dx=1")
    path = options.split("-Dlog4j2.configurationFile=file:")[1]
    assert options.startswith("-Dx=1 ") and Path(path).is_file()
    assert quiet_java_options("-Dlog4j2.configurationFile=mine") == "-Dlog4j2.configurationFile=mine"


# -- Spark's failures, one line ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["emptied", "flipped", "deleted"])
def test_a_damaged_table_file_is_one_line_naming_it_in_the_checkpoint(spark, tmp_path, kind):
    """Spark's reader on a snapshot whose table file is damaged: its error in one line, the file named in the
    checkpoint and Spark's local copy by its name only (not the executor's temporary folder)."""
    from test_state_sst_damage import NAME, damage

    shutil.copytree(fixture_checkpoint(NAME), tmp_path / "ckpt")
    damage(tmp_path / "ckpt", kind)
    result = state_cli("spark", tmp_path / "ckpt", exit_code=2)
    sst = "state/0/0/SSTs/000008-6c4e97c9-105c-4ea0-9632-ce9c363785a7.sst"
    failure = {
        "emptied": "org.apache.spark.SparkException: [CANNOT_LOAD_STATE_STORE.UNEXPECTED_FILE_SIZE] An error occurred "
                   f"during loading state. Copied {sst} to Spark's local copy 000008.sst, expected 1261 bytes, found 0 "
                   "bytes. SQLSTATE: 58030",
        "flipped": f"org.apache.hadoop.fs.ChecksumException: Checksum error: {sst} at 0 exp: 753239363 got: -1809944337",
        "deleted": f"java.io.FileNotFoundException: File {sst} does not exist",
    }[kind]
    assert result.stderr == (
        f"Error: Spark cannot read the state of operator 0 'default' at batch 4 (state of batch 3): {failure} (hint: the "
        "state files of that version were purged (minBatchesToRetain) or are damaged: wmcheck check CKPT names the "
        "batch to rewind to)\n")


def test_purged_state_is_one_clear_line(spark, copy_fixture, engine):
    copy = copy_fixture(AGG)
    for delta in (copy / "checkpoint" / "state" / "0").glob("*/5.delta"):
        delta.unlink()
    result = state_cli(engine, copy / "checkpoint", "--batch", "6", exit_code=2)
    if engine == "spark":
        assert result.stderr.startswith("Error: Spark cannot read the state of operator 0 'default' at batch 6 (state of batch 5): ")
        assert result.stderr.endswith("(hint: the state files of that version were purged (minBatchesToRetain) or are damaged: "
                                      "wmcheck check CKPT names the batch to rewind to)\n")
    else:
        assert result.stderr == ("Error: state/0/0: state version 6 cannot be rebuilt: version 5 has neither a snapshot nor an "
                                 "increment (hint: wmcheck check CKPT explains which files are missing)\n")
    assert result.stderr.count("\n") == 1


# -- operators the fixtures do not have: session windows, dropDuplicatesWithinWatermark, no watermark -


@pytest.fixture(scope="module")
def generated(spark, tmp_path_factory):
    """Tiny checkpoints written by real queries with the shared session: {name: checkpoint path}."""
    from pyspark.sql import functions as F

    root = tmp_path_factory.mktemp("state-queries")
    data = root / "input"
    data.mkdir()
    for i, rows in enumerate([[("a", 1), ("b", 3), ("a", 7)], [("c", 25), ("a", 40)], [("b", 41), ("d", 50), ("e", 59)]]):
        (data / f"f{i}.json").write_text("".join(json.dumps({"id": k, "ts": f"2024-01-01T00:00:{s:02d}Z"}) + "\n" for k, s in rows))
    events = spark.readStream.format("json").schema("id STRING, ts TIMESTAMP").option("maxFilesPerTrigger", 1).load(str(data))
    queries = {
        "session": (events.withWatermark("ts", "5 seconds").groupBy(F.session_window("ts", "5 seconds"), "id").count(), "append"),
        "dedup_within": (events.withWatermark("ts", "5 seconds").dropDuplicatesWithinWatermark(["id"]), "append"),
        "no_watermark": (events.groupBy("id").count(), "update"),
    }
    out = {}
    for name, (df, mode) in queries.items():
        out[name] = root / name
        query = (df.writeStream.format("noop").outputMode(mode).option("checkpointLocation", str(out[name]))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
    return out


def _raw(spark, path: Path):
    return spark.read.format("statestore").load(str(path)).collect()


@pytest.mark.parametrize("name,column", [("session", "value.session_window.end"), ("dedup_within", "value.expiresAtMicros")])
def test_generated_operators_evict_by_their_column(name, column, generated, spark, engine):
    doc = summary_of(engine, generated[name])
    (store,) = doc["stores"]
    assert store["event_time_column"] == column
    raw = _raw(spark, generated[name])
    if name == "session":
        times = [int(r["value"]["session_window"]["end"].timestamp() * 1000) for r in raw]
    else:
        times = [r["value"]["expiresAtMicros"] // 1000 for r in raw]
    assert store["rows"] == len(raw) > 0
    for wm in sorted(set(times)):
        doc = summary_of(engine, generated[name], "--watermark", str(wm))
        assert doc["stores"][0]["older_than_watermark"] == sum(t <= wm for t in times)


def test_store_without_event_time_is_never_evicted(generated, spark, engine):
    (store,) = summary_of(engine, generated["no_watermark"])["stores"]
    assert (store["rows"], store["event_time_column"], store["older_than_watermark"]) == (5, None, 0)
    assert store["eviction"] == ("no event-time column: the grouping keys hold neither the watermarked column nor a window on it; "
                                 "this state is never evicted by the watermark and grows with every new key")
    assert "none: never evicted" in state_cli(engine, generated["no_watermark"]).stdout


def summary_of(engine: str, path: Path, *args: str) -> dict:
    return json.loads(state_cli(engine, path, "--format", "json", *args).stdout)


def test_moved_transform_with_state_checkpoint_is_read_without_changing_it(spark, tmp_path, engine):
    """Its metadata names schema files in a directory that is gone: the reader loads a view, not the files."""
    from test_repair_execute import tree

    from conftest import names_own_schemas

    original = names_own_schemas(Path(shutil.copytree(fixture_checkpoint("tws_pandas"), tmp_path / "a")))
    moved = Path(shutil.move(original, tmp_path / "b"))
    before = tree(moved)
    assert "a/state/0/_stateSchema" in (moved / "state/0/_metadata/v2/4").read_text()
    doc = json.loads(state_cli(engine, moved, "--format", "json").stdout)
    assert doc["stores"] == summary(engine, "tws_pandas")["stores"]
    rows = json.loads(state_cli(engine, moved, "--older-than-watermark", "--state-var", TIMERS, "--watermark",
                              str(max(r["expiration_timestamp_ms"] for r in fixture_rows("tws_pandas", "0", TIMERS)) + 1),
                              "--format", "json").stdout)
    assert len(rows) == len(fixture_rows("tws_pandas", "0", TIMERS))
    assert tree(moved) == before


def test_own_session_is_quiet_and_stops_cleanly(tmp_path):
    """As a user runs it: a new process starts its own Spark, prints only the result, exits 0 promptly."""
    import subprocess
    import sys
    import time

    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "wmcheck.cli", "state", str(fixture_checkpoint("agg_window_hdfs")),
                           "--engine", "spark", "--format", "json"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert json.loads(done.stdout)["stores"][0]["rows"] == len(fixture_rows("agg_window_hdfs", "0", "default"))
    assert time.perf_counter() - started < 120


@pytest.mark.parametrize("args", [[], ["--older-than-watermark", "--watermark", "watermark+30 seconds"]])
def test_spark_connect_reads_what_the_classic_session_reads(args, tmp_path):
    """--remote: the same summary and rows through a Spark Connect server (started in the wmcheck process)."""
    import subprocess
    import sys

    ckpt = str(fixture_checkpoint("agg_window_hdfs"))
    done = subprocess.run([sys.executable, "-m", "wmcheck.cli", "state", ckpt, *args, "--remote", "local[2]",
                           "--format", "json"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert json.loads(done.stdout) == json.loads(state_cli("spark", ckpt, *args, "--format", "json").stdout)


# -- the python engine against Spark's reader, row for row, at earlier batches too ------------------


def _rows(rows: list[dict]) -> list[str]:
    from test_state_python import as_collected

    from wmcheck.statestore.output.rows import jsonable

    return sorted(json.dumps(as_collected(jsonable(r)), sort_keys=True) for r in rows)


def _spark_rows(df) -> list[dict]:
    """Spark's rows through Arrow, or collected when Arrow refuses them (a struct repeating a field name)."""
    from pyspark.errors import PySparkException

    from wmcheck.statestore.output.rows import pylist

    try:
        return pylist(df.toArrow())
    except PySparkException:
        return [r.asDict(recursive=True) for r in df.collect()]


DIFFERENTIAL = ["state_types", "state_types_rocksdb", "agg_window_rocksdb", "checkpoint_v2", "join_stream_stream", "tws_pandas", "tws_ttl", "row_checksum_hdfs", "row_checksum_tws", "avro_tws", "avro_types_tws", "interval_state",
                "agg_spark35", "compaction", "dedup_watermark"]


@pytest.mark.parametrize("name", [n for n in DIFFERENTIAL if n in FIXTURES])
def test_python_engine_rows_equal_spark_rows_at_several_batches(name, spark):
    """Every store the summary shows (join sides included), at the first, a middle and the next batch:
    after snapshots, changelogs and maintenance, checkpoint v1 and v2, HDFS and RocksDB, Spark 3.5 and 4."""
    from wmcheck.checkpoint.model import open_checkpoint
    from wmcheck.statestore.engine import python_engine
    from wmcheck.statestore.output.rows import pylist
    from wmcheck.statestore.spark import reader

    ckpt = open_checkpoint(str(fixture_checkpoint(name)))
    first = min(ckpt.commit_ids) + 1
    for batch in sorted({first, (first + ckpt.next_batch) // 2, ckpt.next_batch}):
        ours = python_engine.read_stores(ckpt, batch=batch)
        theirs = reader.read_stores(spark, ckpt, batch=batch)
        for mine, spark_read in zip(ours, theirs, strict=True):
            assert mine.store == spark_read.store
            assert _rows(pylist(mine.raw)) == _rows(_spark_rows(spark_read.raw)), (batch, mine.store.name)
            assert _rows(pylist(mine.rows())) == _rows(_spark_rows(spark_read.rows())), (batch, mine.store.name)


@pytest.fixture(scope="module")
def rocksdb_generated(spark, tmp_path_factory):
    """Session windows (prefix-scan keys) and dropDuplicatesWithinWatermark on RocksDB, written with the shared session."""
    from pyspark.sql import functions as F

    root = tmp_path_factory.mktemp("rocksdb-queries")
    data = root / "input"
    data.mkdir()
    for i, rows in enumerate([[("a", 1), ("b", 3), ("a", 7)], [("c", 25), ("a", 40)], [("b", 41), ("d", 50), ("a", 52)]]):
        (data / f"f{i}.json").write_text("".join(json.dumps({"id": k, "ts": f"2024-01-01T00:00:{s:02d}Z"}) + "\n" for k, s in rows))
    events = spark.readStream.format("json").schema("id STRING, ts TIMESTAMP").option("maxFilesPerTrigger", 1).load(str(data))
    queries = {
        "session": events.withWatermark("ts", "5 seconds").groupBy(F.session_window("ts", "5 seconds"), "id").count(),
        "dedup_within": events.withWatermark("ts", "5 seconds").dropDuplicatesWithinWatermark(["id"]),
    }
    provider = "spark.sql.streaming.stateStore.providerClass"
    spark.conf.set(provider, "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
    try:
        out = {}
        for name, df in queries.items():
            out[name] = root / name
            (df.writeStream.format("noop").outputMode("append").option("checkpointLocation", str(out[name]))
             .trigger(availableNow=True).start().awaitTermination())
    finally:
        spark.conf.unset(provider)
    return out


@pytest.mark.parametrize("name", ["session", "dedup_within"])
def test_python_engine_reads_rocksdb_session_windows_and_dedup_within(name, rocksdb_generated, spark):
    from wmcheck.checkpoint.model import open_checkpoint
    from wmcheck.statestore.engine import python_engine
    from wmcheck.statestore.output.rows import pylist
    from wmcheck.statestore.spark import reader

    ckpt = open_checkpoint(str(rocksdb_generated[name]))
    assert "RocksDB" in ckpt.conf["spark.sql.streaming.stateStore.providerClass"]
    seen = 0
    for batch in range(min(ckpt.commit_ids) + 1, ckpt.next_batch + 1):
        (mine,), (theirs,) = python_engine.read_stores(ckpt, batch=batch), reader.read_stores(spark, ckpt, batch=batch)
        assert _rows(pylist(mine.rows())) == _rows(_spark_rows(theirs.rows())), batch
        seen += mine.raw.num_rows
    assert seen > 0


def test_spark_writes_avro_state_only_for_transform_with_state(spark, tmp_path):
    """docs/state.md: Avro-encoded state of an aggregation does not exist, Spark refuses to start such a query."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text('{"id": "a"}\n')
    confs = {"spark.sql.streaming.stateStore.providerClass":
             "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
             "spark.sql.streaming.stateStore.encodingFormat": "avro"}
    before = {k: spark.conf.get(k, None) for k in confs}
    for k, v in confs.items():
        spark.conf.set(k, v)
    try:
        counts = spark.readStream.schema("id STRING").json(str(tmp_path / "in")).groupBy("id").count()
        with pytest.raises(Exception, match="State store encoding format as avro is not supported for operator=aggregation"):
            counts.writeStream.outputMode("update").format("noop").option("checkpointLocation", str(tmp_path / "ckpt")) \
                .trigger(availableNow=True).start().awaitTermination()
    finally:
        for k, v in before.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)
