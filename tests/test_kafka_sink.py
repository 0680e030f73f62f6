"""What a rewind's re-run batches do to a Kafka sink and to a foreachBatch function, as the rewind's plan says,
proven by real restarts against a real broker (Spark 4.2 with its Kafka connector)."""
from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from wmcheck.checkpoint import repair

from conftest import run_cli
from kafka_env import Record, admin, create_topic, produce, unique_topic

T0 = 1_704_067_200_000


def records(start: int, count: int) -> list[Record]:
    return [Record(i % 2, str(i), T0 + i * 1000) for i in range(start, start + count)]


def topic_values(bootstrap: str, topic: str) -> Counter:
    """Every record value the topic holds now, read from the start."""
    from confluent_kafka import Consumer, TopicPartition

    parts = admin(bootstrap).list_topics(topic=topic, timeout=10).topics[topic].partitions
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_topic("g"), "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
        seen: Counter = Counter()
        positions = dict.fromkeys(parts, 0)
        while any(positions[p] < ends[p] for p in parts):
            msg = consumer.poll(10)
            assert msg is not None, (positions, ends)
            seen[msg.value().decode()] += 1
            positions[msg.partition()] = msg.offset() + 1
        return seen
    finally:
        consumer.close()


def rewind(ckpt: Path, batch: int, execute: bool, **sinks) -> repair.RepairResult:
    request = repair.RewindRequest(to_batch=batch, **sinks)
    return repair.run(str(ckpt), request, repair.RunOptions(execute=execute, idle_ms=0))


@pytest.mark.spark
def test_the_kafka_sink_duplicates_exactly_the_records_the_rewind_counts(spark_kafka, kafka_bootstrap, tmp_path):
    source = create_topic(kafka_bootstrap, unique_topic("src"), 2)
    sink = create_topic(kafka_bootstrap, unique_topic("sink"), 1)
    produce(kafka_bootstrap, source, records(0, 12))
    ckpt = tmp_path / "ckpt"
    answer = spark_kafka.run("kafka_to_kafka", kafka_bootstrap, {"subscribe": source}, ckpt, tmp_path / "unused",
                             {"maxOffsetsPerTrigger": "4", "sinkTopic": sink})
    assert answer["ok"] and answer["batches"] == [0, 1, 2], answer
    plan = rewind(ckpt, 0, False, kafka_sink=sink, bootstrap_server=kafka_bootstrap).plan
    [effect] = plan.sinks
    assert [(b.batch, b.action, b.rows) for b in effect.batches] == [(1, "duplicate", 4), (2, "duplicate", 4)]
    assert effect.summary.startswith(f"Spark's Kafka sink is at-least-once: the re-run batches 1..2 write their "
                                     f"records to {sink} again, 8 record(s) duplicated (partition 0 offsets 4..11;")
    rewind(ckpt, 0, True)
    assert spark_kafka.run("kafka_to_kafka", kafka_bootstrap, {"subscribe": source}, ckpt, tmp_path / "unused",
                           {"sinkTopic": sink})["ok"]
    seen = topic_values(kafka_bootstrap, sink)
    assert sum(seen.values()) == 12 + 8
    assert sorted(int(v) for v, n in seen.items() if n == 2) == list(range(4, 12))  # batches 1 and 2's records


@pytest.mark.spark
def test_foreach_batch_sees_the_re_run_input_again_in_the_batches_its_rate_limit_plans(spark_kafka, kafka_bootstrap,
                                                                                       tmp_path):
    source = create_topic(kafka_bootstrap, unique_topic("src"), 2)
    produce(kafka_bootstrap, source, records(0, 12))
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    limit = {"maxOffsetsPerTrigger": "4"}
    assert spark_kafka.run("kafka_foreach_batch", kafka_bootstrap, {"subscribe": source}, ckpt, out, limit)["ok"]
    shutil.copytree(ckpt, tmp_path / "unlimited")
    plan = rewind(ckpt, 0, True, foreach_batch=True).plan
    rewind(tmp_path / "unlimited", 0, True)
    [effect] = plan.sinks
    assert [(b.batch, b.action) for b in effect.batches] == [(1, "again"), (2, "again")]
    assert effect.summary.startswith("the function is called again from batch id 1 with the input of batches 1..2: "
                                     "with the rate limits they ran with")
    assert effect.summary.endswith("skips every id up to 2, whatever input is planned into it")
    assert spark_kafka.run("kafka_foreach_batch", kafka_bootstrap, {"subscribe": source}, ckpt, out, limit)["ok"]
    assert calls(out) == {0: 1, 1: 2, 2: 2}  # the same batches again
    again = Counter((r["partition"], r["offset"]) for r in rows(out) if r["batch_id"] in (1, 2))
    assert set(again.values()) == {2} and len(again) == 8  # the same input each time
    free = tmp_path / "free-out"
    assert spark_kafka.run("kafka_foreach_batch", kafka_bootstrap, {"subscribe": source}, tmp_path / "unlimited", free,
                           {})["ok"]
    assert calls(free) == {1: 1} and len(rows(free)) == 8  # planned anew: one batch with all of it


def calls(out: Path) -> Counter:
    return Counter(int(p.name.split("-")[1]) for p in out.glob("batch-*.json"))


def rows(out: Path) -> list[dict]:
    return [json.loads(line) for p in out.glob("batch-*.json") for line in p.read_text().splitlines() if line]


def test_the_rewind_table_and_json_carry_the_foreach_batch_section(copy_fixture):
    etl = copy_fixture("kafka_etl")
    out = run_cli("rewind", etl / "checkpoint", "--to-batch", "4", "--foreach-batch", "--idle", "0").output
    title = next(line for line in out.splitlines() if line.startswith("What the foreachBatch sink does"))
    assert title.startswith("What the foreachBatch sink does with the re-run batches: the function is called again "
                            "from batch id 5 with the input of batches 5..6")
    doc = json.loads(run_cli("rewind", etl / "checkpoint", "--to-batch", "4", "--foreach-batch", "--idle", "0",
                             "--format", "json").output)
    assert [(b["batch"], b["action"]) for b in doc["sinks"][0]["batches"]] == [(5, "again"), (6, "again")]


def test_a_kafka_sink_without_its_broker_is_one_line_exit_2(copy_fixture):
    etl = copy_fixture("kafka_etl")
    out = run_cli("rewind", etl / "checkpoint", "--to-batch", "4", "--kafka-sink", "out", "--idle", "0",
                  exit_code=2).output
    assert out.strip() == "Error: --kafka-sink asks the broker: pass --bootstrap-server HOST:PORT"
