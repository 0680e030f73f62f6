"""kafka_realtime restarted with Spark 4.2 in real-time mode against the real broker (its topic re-created and re-filled
from records.json, the same records at the same offsets, then 4 new records): Spark runs the batch show names next,
from where check and rewind say, and the Kafka sink receives exactly the records of the batches it runs, which a
rewind's Kafka sink count then finds by their time."""
from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from test_kafka_fixture_restarts import refilled
from test_kafka_sink import topic_values

from conftest import FIXTURES, run_cli
from kafka_env import Record, produce

pytestmark = pytest.mark.spark
NAME = "kafka_realtime"
T0 = 1_704_067_200_000
NEW = [Record(i % 2, str(i), T0 + i * 1000) for i in range(16, 20)]


def restarted(spark_kafka, bootstrap: str, ckpt: Path) -> tuple[dict, Counter]:
    """The query run again from ``ckpt`` with the new records in the topic: the worker's answer and the sink's values."""
    topic = refilled(bootstrap, NAME)
    produce(bootstrap, topic, NEW)
    answer = spark_kafka.run(NAME, bootstrap, {"subscribe": topic}, ckpt, ckpt.parent / "unused", {})
    assert answer["ok"], answer
    return answer, topic_values(bootstrap, f"{topic}-out")


def first_offsets(ckpt: Path, batch: int) -> str:
    return [r for r in json.loads(run_cli("batches", ckpt, "--format", "json").stdout) if r["batch"] == batch][0][
        "sources"][0]


def test_a_restart_runs_batch_3_from_offsets_2_and_reads_only_the_new_records(spark_kafka, kafka_bootstrap, tmp_path):
    ckpt = tmp_path / "checkpoint"
    shutil.copytree(FIXTURES / NAME / "checkpoint", ckpt)
    assert json.loads(run_cli("show", ckpt, "--format", "json").stdout)["verdict"]["next_batch"] == 3
    answer, values = restarted(spark_kafka, kafka_bootstrap, ckpt)
    assert answer["batches"][0] == 3
    assert values == {str(i): 1 for i in range(16, 20)}  # nothing of batches 0..2 written again
    assert first_offsets(ckpt, max(answer["batches"])) == '{"wmcheck-kafka-realtime":{"0":10,"1":10}}'
    assert json.loads(run_cli("check", ckpt, "--bootstrap-server", kafka_bootstrap, "--format", "json").stdout) == []
    out = "wmcheck-kafka-realtime-out"
    plan = json.loads(run_cli("rewind", ckpt, "--to-batch", "2", "--kafka-sink", out, "--bootstrap-server",
                              kafka_bootstrap, "--idle", "0", "--format", "json").stdout)
    last = max(r["batch"] for r in json.loads(run_cli("batches", ckpt, "--format", "json").stdout))
    [sink] = plan["sinks"]  # the records written by the batches the restart ran, found by their time
    assert [(b["batch"], b["action"]) for b in sink["batches"]] == [(b, "duplicate") for b in range(3, last + 1)]
    assert sum(b["rows"] for b in sink["batches"]) == 4
    assert sink["summary"] == (
        f"Spark's Kafka sink is at-least-once: the re-run batches 3..{last} write their records to {out} again, 4 "
        "record(s) duplicated (partition 0 offsets 0..3; found by the records' timestamps while those batches ran: "
        "records other writers put in the topic then are counted too)")


def test_a_rewind_to_batch_0_restarts_from_its_offsets_and_writes_batches_1_and_2_again(spark_kafka, kafka_bootstrap,
                                                                                       tmp_path):
    ckpt = tmp_path / "checkpoint"
    shutil.copytree(FIXTURES / NAME / "checkpoint", ckpt)
    plan = json.loads(run_cli("rewind", ckpt, "--to-batch", "0", "--idle", "0", "--execute", "--format", "json").stdout)
    assert [(s["position"], s["after"]) for s in plan["sources"]] == [
        ("wmcheck-kafka-realtime/0", "1"), ("wmcheck-kafka-realtime/1", "1")]
    assert json.loads(run_cli("show", ckpt, "--format", "json").stdout)["verdict"]["next_batch"] == 1
    answer, values = restarted(spark_kafka, kafka_bootstrap, ckpt)
    assert answer["batches"][0] == 1
    assert values == {str(i): 1 for i in range(2, 20)}  # every record from offset 1 of each partition, once
    assert first_offsets(ckpt, max(answer["batches"])) == '{"wmcheck-kafka-realtime":{"0":10,"1":10}}'
