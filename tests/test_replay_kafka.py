"""``wmcheck replay`` of Kafka batches against the real broker, run by the pyspark 4.2 environment with Spark's Kafka
connector (``WMCHECK_SPARK42_PYTHON``, wmcheck installed there: .ci/run makes it). Each fixture's topic is written again
from its records.json (on a topic of its own, named in a copy of the checkpoint); each batch's replayed rows are the
records whose offsets lie in the batch's recorded range, and the late rows are the ones Spark's own query dropped."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

import kafka_broker
from conftest import FIXTURES
from kafka_env import Record, create_topic, delete_records_before, produce, spark42_python, unavailable, unique_topic

pytestmark = pytest.mark.spark
T0 = 1_704_067_200_000
CONNECTOR = kafka_broker.JARS / "spark-kafka"


@pytest.fixture(scope="module")
def python42() -> str:
    python = spark42_python()
    if not os.access(python, os.X_OK):
        unavailable(f"no pyspark 4.2 environment at {python} (WMCHECK_SPARK42_PYTHON; .ci/run makes .venv-spark42)")
    if subprocess.run([python, "-c", "import wmcheck.cli, pyspark"], capture_output=True).returncode:
        unavailable(f"wmcheck is not installed in {python} (pip install --no-deps -e .)")
    if not any(CONNECTOR.glob("spark-sql-kafka-*.jar")):
        unavailable(f"no Spark Kafka connector jars in {CONNECTOR} (run tests/jvm/fetch.sh)")
    return python


def jars() -> str:
    return ",".join(sorted(str(p) for p in CONNECTOR.glob("*.jar")))


def wmcheck42(python: str, *args: str, block_client: bool = False) -> subprocess.CompletedProcess:
    """wmcheck in the pyspark 4.2 environment (``block_client``: as if confluent-kafka were not installed)."""
    code = ("import sys; sys.modules['confluent_kafka'] = None; sys.argv[0] = 'wmcheck'; "
            "from wmcheck.cli.start import main; main()")
    head = [python, "-c", code] if block_client else [python, "-m", "wmcheck.cli"]
    return subprocess.run([*head, *map(str, args)], capture_output=True, text=True, timeout=600)


def on_broker(name: str, bootstrap: str, tmp_path: Path) -> tuple[Path, str, list[Record]]:
    """A copy of fixture ``name`` whose topic, made anew on the broker from records.json, has a name of its own."""
    root = tmp_path / name
    shutil.copytree(FIXTURES / name, root)
    facts = json.loads((root / "kafka.json").read_text())
    records = [Record(**r) for r in json.loads((root / "records.json").read_text())]
    topic = create_topic(bootstrap, unique_topic(name.replace("_", "-")), facts["partitions"])
    produce(bootstrap, topic, records)
    ckpt = root / "checkpoint"
    for path in [*(ckpt / "offsets").iterdir(), ckpt / "sources" / "0" / "0"]:
        path.write_bytes(path.read_bytes().replace(facts["topic"].encode(), topic.encode()))
    return root, topic, records


def offsets_of(records: list[Record]) -> dict[tuple[int, int], Record]:
    """(partition, offset) -> record: one producer wrote them in order, so offsets follow the order per partition."""
    seen: dict[int, int] = {}
    out = {}
    for r in records:
        out[r.partition, seen.get(r.partition, 0)] = r
        seen[r.partition] = seen.get(r.partition, 0) + 1
    return out


def recorded_ranges(ckpt: Path) -> dict[int, dict[int, tuple[int, int]]]:
    """Batch -> partition -> [start, end), read from offsets/N (the last line) and sources/0/0 (the first start)."""
    def offsets(text: str) -> dict[int, int]:
        [parts] = json.loads(text.strip().splitlines()[-1]).values()
        return {int(p): o for p, o in parts.items()}

    batches = sorted(int(p.name) for p in (ckpt / "offsets").iterdir() if p.name.isdigit())
    start = offsets((ckpt / "sources" / "0" / "0").read_bytes().lstrip(b"\x00").decode())
    out = {}
    for batch in batches:
        end = offsets((ckpt / "offsets" / str(batch)).read_text())
        out[batch] = {p: (start.get(p, 0), o) for p, o in end.items()}
        start = end
    return out


def expected_rows(ckpt: Path, records: list[Record]) -> dict[int, set[tuple[int, int, str, int]]]:
    """Per batch: (partition, offset, value, timestamp ms) of the records in its recorded range."""
    by_offset = offsets_of(records)
    return {batch: {(p, o, by_offset[p, o].value, by_offset[p, o].timestamp_ms)
                    for p, (start, end) in parts.items() for o in range(start, end)}
            for batch, parts in recorded_ranges(ckpt).items()}


def replayed_rows(output: Path) -> dict[int, set[tuple[int, int, str, int]]]:
    """What ``--output DIR`` holds, per batch_id."""
    import pyarrow.dataset as ds

    out: dict[int, set[tuple[int, int, str, int]]] = {}
    for row in ds.dataset(output, format="parquet", partitioning="hive").to_table().to_pylist():
        stamp = int(row["timestamp"].timestamp() * 1000)
        out.setdefault(row["batch_id"], set()).add((row["partition"], row["offset"], row["value"].decode(), stamp))
    return out


def summary(result: subprocess.CompletedProcess) -> list[dict[str, Any]]:
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def test_replay_reads_exactly_each_batchs_recorded_records(python42, kafka_bootstrap, tmp_path):
    """kafka_etl: every batch's rows are its records; together they are what the query's own file sink wrote."""
    root, topic, records = on_broker("kafka_etl", kafka_bootstrap, tmp_path)
    out = tmp_path / "replayed"
    rows = summary(wmcheck42(python42, "replay", root / "checkpoint", "--from", "0", "--to", "6", "--output", out,
                             "--jars", jars(), "--option", f"kafka.bootstrap.servers={kafka_bootstrap}", "--format", "json"))
    expected = expected_rows(root / "checkpoint", records)
    assert [(r["batch"], r["rows"], r["kept_rows"]) for r in rows] == [(b, len(expected[b]), len(expected[b]))
                                                                      for b in range(7)]
    assert [len(expected[b]) for b in range(7)] == [4, 4, 4, 4, 4, 4, 2]
    got = replayed_rows(out)
    assert got == expected
    import pyarrow.parquet as pq  # the control: the rows Spark's query wrote to its file sink

    sink = {(r["partition"], r["offset"], r["value"], int(r["timestamp"].timestamp() * 1000))
            for f in sorted((root / "output").glob("*.parquet")) for r in pq.read_table(f).to_pylist()}
    assert set().union(*got.values()) == sink and len(sink) == 26


def aggregated(worker, bootstrap: str, topic: str, root: Path, runs: list[list[Record]],
               options: dict[str, str] | None = None) -> dict[int, int]:
    """Run kafka_agg once per run of records (each produced first); Spark's numRowsDroppedByWatermark per batch."""
    dropped: dict[int, int] = {}
    for run in runs:
        if run:
            produce(bootstrap, topic, run)
        answer = worker.run("kafka_agg", bootstrap, {"subscribe": topic}, root / "checkpoint", root / "output", options)
        assert answer["ok"], answer
        dropped.update({int(b): n for b, n in answer["dropped_per_batch"].items()})
    return dropped


def test_replay_of_the_aggregation_fixture_drops_what_spark_dropped(python42, spark_kafka, kafka_bootstrap, tmp_path):
    """kafka_agg: exact rows per batch, and late rows (window inferred from the state) as Spark's rerun of the
    fixture's generation dropped them: none, its records arrive in event-time order; the rerun writes the fixture's
    windows."""
    root, topic, records = on_broker("kafka_agg", kafka_bootstrap, tmp_path)
    out = tmp_path / "replayed"
    rows = summary(wmcheck42(python42, "replay", root / "checkpoint", "--from", "0", "--output", out, "--event-time",
                             "timestamp", "--jars", jars(), "--option", f"kafka.bootstrap.servers={kafka_bootstrap}",
                             "--format", "json"))
    expected = expected_rows(root / "checkpoint", records)
    assert replayed_rows(out) == {b: rows for b, rows in expected.items() if rows}  # no-data batches write nothing
    assert [r["rows"] for r in rows] == [len(expected[b]) for b in range(9)] == [8, 8, 0, 8, 6, 0, 8, 2, 0]
    facts = json.loads((root / "kafka.json").read_text())
    control_topic = create_topic(kafka_bootstrap, unique_topic("kafka-agg-control"), 2)
    sizes = facts["runs"]
    runs = [records[sum(sizes[:i]):sum(sizes[:i + 1])] for i in range(len(sizes))]
    control = tmp_path / "control"
    dropped = aggregated(spark_kafka, kafka_bootstrap, control_topic, control, runs, facts["options"])
    assert sorted(dropped) == [b for run in facts["batches"] for b in run]
    assert {r["batch"]: (r["late_rows"], r["late_groups"]) for r in rows} == {b: (0, n) for b, n in dropped.items()}

    def windows(where: Path) -> list[tuple[Any, int, int]]:
        import pyarrow.parquet as pq

        return sorted((r["window"]["start"], r["n"], r["v_sum"]) for f in (where / "output").glob("*.parquet")
                      for r in pq.read_table(f).to_pylist())

    assert windows(control) == windows(root)


def late(value: int, t_s: int, partition: int) -> Record:
    return Record(partition, str(value), T0 + t_s * 1000)


def test_replay_finds_the_late_rows_spark_dropped(python42, spark_kafka, kafka_bootstrap, tmp_path):
    """A real kafka_agg run with records behind the watermark: per batch the replay's late groups are Spark's
    numRowsDroppedByWatermark, the late rows are exactly the records whose window had closed, and the emitted windows
    plus the late rows hold every value."""
    topic = create_topic(kafka_bootstrap, unique_topic("kafka-agg-late"), 2)
    runs = [
        [late(t, t, t % 2) for t in range(8)],                                    # watermark -> 0
        [late(20, 20, 0), late(21, 21, 1)],                                      # watermark -> 11 s
        [late(103, 3, 0), late(109, 9, 1), late(112, 12, 0), late(115, 15, 1), late(125, 25, 0)],  # [0,10) closed
        [late(205, 5, 1), late(214, 14, 0), late(219, 19, 1), late(230, 30, 0)],  # watermark 15 s: [0,10) closed
        [late(300, 100, 1), late(310, 110, 0)],  # watermark 100 s; two windows stay in the state (the window inferred)
    ]
    root = tmp_path / "q"
    dropped = aggregated(spark_kafka, kafka_bootstrap, topic, root, runs)
    assert sorted(dropped) == list(range(10))  # each run: a batch, then the no-data batch that emits what it closed
    assert sum(dropped.values()) == 2  # one late group in each of two batches
    out = tmp_path / "late"
    rows = summary(wmcheck42(python42, "replay", root / "checkpoint", "--from", "0", "--late-only", "--output", out,
                             "--event-time", "timestamp", "--jars", jars(), "--option",
                             f"kafka.bootstrap.servers={kafka_bootstrap}", "--format", "json"))
    assert {r["batch"]: r["late_groups"] for r in rows} == dropped
    assert {r["batch"]: r["operators"][0]["late_rows"] for r in rows} == dropped
    got = replayed_rows(out)
    assert sorted(v for batch in got.values() for _, _, v, _ in batch) == ["103", "109", "205"]
    assert sum(r["late_rows"] for r in rows) == 3
    import pyarrow.parquet as pq

    emitted = [r for f in (root / "output").glob("*.parquet") for r in pq.read_table(f).to_pylist()]
    every = [int(r.value) for run in runs for r in run if r.timestamp_ms < T0 + 100_000]  # windows the watermark closed
    assert sum(r["v_sum"] for r in emitted) + 103 + 109 + 205 == sum(every)


def test_retention_names_the_partitions_it_removed_and_the_batches_still_replayable(python42, kafka_bootstrap,
                                                                                   tmp_path):
    root, topic, records = on_broker("kafka_etl", kafka_bootstrap, tmp_path)
    delete_records_before(kafka_bootstrap, topic, {0: 3})
    ckpt = root / "checkpoint"
    broker = f"kafka.bootstrap.servers={kafka_bootstrap}"
    line = (f"the broker no longer holds the recorded offsets of {topic}[0] (recorded from 0, earliest now 3): batches "
            "0..1 read them; batches 2..6 can still be replayed")
    refused = wmcheck42(python42, "replay", ckpt, "--from", "0", "--count", "--jars", jars(), "--option", broker)
    assert (refused.returncode, refused.stdout, refused.stderr) == (2, "", f"Error: {line} (hint: use --from 2)\n")
    as_json = wmcheck42(python42, "replay", ckpt, "--from", "0", "--count", "--option", broker, "--format", "json")
    assert as_json.returncode == 2 and json.loads(as_json.stdout) == {
        "error": line, "hint": "use --from 2", "param": "--from", "where": None, "exit_code": 2}

    table = wmcheck42(python42, "replay", ckpt, "--from", "1", "--to", "2", "--plan", "--option", broker)
    assert table.returncode == 0, table.stderr
    kafka = table.stdout.split("Kafka offsets\n", 1)[1].splitlines()
    assert table.stdout.splitlines()[3] == (
        f"kafka retention:   the broker no longer holds the recorded offsets of {topic}[0] (recorded from 2, earliest now "
        "3): batch 1 read them; batch 2 can still be replayed")
    assert [row.split() for row in kafka[2:]] == [
        ["1", "0", topic, "0", "2", "4", "2", "3", "no"], ["1", "0", topic, "1", "2", "4", "2", "0", "yes"],
        ["2", "0", topic, "0", "4", "6", "2", "3", "yes"], ["2", "0", topic, "1", "4", "6", "2", "0", "yes"]]
    doc = json.loads(wmcheck42(python42, "replay", ckpt, "--from", "0", "--plan", "--option", broker,
                               "--format", "json").stdout)
    assert doc["kafka_retention"] == {
        "bootstrap": kafka_bootstrap, "line": line, "lost_batches": [0, 1], "replayable_batches": [2, 3, 4, 5, 6],
        "gone": [{"source_id": "0", "topic": topic, "partition": 0, "recorded_start": 0, "earliest": 3}]}

    expected = expected_rows(ckpt, records)
    out = tmp_path / "from2"
    rows = summary(wmcheck42(python42, "replay", ckpt, "--from", "2", "--output", out, "--jars", jars(), "--option",
                             broker, "--format", "json"))
    assert [r["rows"] for r in rows] == [4, 4, 4, 4, 2]
    assert replayed_rows(out) == {b: expected[b] for b in range(2, 7)}


def test_without_the_kafka_client_spark_fails_on_the_removed_records_or_skips_them(python42, kafka_bootstrap,
                                                                                  tmp_path):
    """What the look-up prevents: Spark fails on a range whose start the broker no longer holds (one line here), and
    with failOnDataLoss=false reads fewer records than the batches did, without a word."""
    root, topic, _ = on_broker("kafka_etl", kafka_bootstrap, tmp_path)
    delete_records_before(kafka_bootstrap, topic, {0: 3})
    args = ["replay", root / "checkpoint", "--from", "0", "--to", "2", "--count", "--jars", jars(),
            "--option", f"kafka.bootstrap.servers={kafka_bootstrap}"]
    failed = wmcheck42(python42, *args, block_client=True)
    assert (failed.returncode, failed.stdout) == (2, "")
    assert failed.stderr == (
        f"Error: the broker no longer holds records these batches read (Spark: Could not read records in offset [0, 2) "
        f"for topic partition {topic}-0) (hint: pip install 'wmcheck[kafka]' and replay again: it names the partitions "
        "retention removed recorded offsets of and the batches that can still be replayed)\n")
    lenient = summary(wmcheck42(python42, *args, "--option", "failOnDataLoss=false", "--format", "json",
                                block_client=True))
    assert [r["rows"] for r in lenient] == [2, 3, 4]  # 4, 4, 4 recorded: offsets 0..2 of partition 0 are gone


def test_without_the_connector_one_line_names_the_package_and_jars(python42, kafka_bootstrap, tmp_path):
    result = wmcheck42(python42, "replay", FIXTURES / "kafka_etl" / "checkpoint", "--from", "0", "--count",
                       "--option", "kafka.bootstrap.servers=127.0.0.1:9", block_client=True)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "Error: reading a Kafka source needs Spark's Kafka connector, which is not on the classpath of Spark 4.2.0 "
        "(hint: add --packages org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0, or --jars (or --conf spark.jars=...) "
        "with spark-sql-kafka-0-10_2.13-4.2.0.jar, spark-token-provider-kafka-0-10_2.13-4.2.0.jar, kafka-clients, "
        "commons-pool2)\n")
