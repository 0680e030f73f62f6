"""What check and rewind say of the Kafka fixtures, proven by restarting copies with Spark 4.2 against the real broker,
each fixture's topics re-created and re-filled from records.json (the same records at the same offsets).

kafka_async's gaps in offsets/ and commits/ (asyncProgressTrackingEnabled writes them every interval), WM085: with the
option Spark resumes at the batch check names and reads only the new records; without it Spark fails as check says.
kafka_grow rewound to before its third partition: Spark reads that partition from its earliest offset, as the rewind
says."""
from __future__ import annotations

import json
import shutil
from collections import Counter

import pytest
from test_kafka_sink import topic_values

from conftest import FIXTURES, run_cli
from kafka_env import Record, admin, create_topic, delete_topic, produce, read_rows, unique_topic

pytestmark = pytest.mark.spark
NAME = "kafka_async"
T0 = 1_704_067_200_000


def fresh(bootstrap: str, topic: str, partitions: int) -> str:
    if topic in admin(bootstrap).list_topics(timeout=10).topics:
        delete_topic(bootstrap, topic)
    return create_topic(bootstrap, topic, partitions)


def refilled(bootstrap: str, name: str = NAME, partitions: int | None = None) -> str:
    """The fixture's source topic as the query read it: every record of records.json, in order, at the same offsets."""
    facts = json.loads((FIXTURES / name / "kafka.json").read_text())
    topic = fresh(bootstrap, facts["topic"], partitions or facts["partitions"])
    fresh(bootstrap, f"{topic}-out", 1)
    sent = json.loads((FIXTURES / name / "records.json").read_text())
    produce(bootstrap, topic, [Record(r["partition"], r["value"], r["timestamp_ms"], r["key"]) for r in sent])
    return topic


def test_async_progress_gaps_restart_at_the_batch_check_names(spark_kafka, kafka_bootstrap, tmp_path):
    topic = refilled(kafka_bootstrap)
    produce(kafka_bootstrap, topic, [Record(i % 2, str(i), T0 + i * 1000) for i in range(16, 20)])  # new input
    ckpt = tmp_path / "checkpoint"
    shutil.copytree(FIXTURES / NAME / "checkpoint", ckpt)
    [finding] = json.loads(run_cli("check", ckpt, "--format", "json").stdout)
    assert (finding["code"], finding["severity"], finding["path"]) == ("WM085", "warning", "offsets/2")
    assert ("Restarted with asyncProgressTrackingEnabled, Spark resumes at batch 8 from offsets/7 "
            "(wmcheck-kafka-async[0]=8, wmcheck-kafka-async[1]=8), reading offsets/5 as the batch before it (tested "
            "with Spark 4.2); without it, Spark fails ('batch 6 doesn't exist')") in finding["message"]

    without = tmp_path / "without"
    shutil.copytree(ckpt, without)
    failed = spark_kafka.run("kafka_to_kafka", kafka_bootstrap, {"subscribe": topic}, without, tmp_path / "unused",
                             {"sinkTopic": create_topic(kafka_bootstrap, unique_topic("sync-out"), 1)})
    assert not failed["ok"] and "batch 6 doesn't exist" in failed["error"], failed

    answer = spark_kafka.run(NAME, kafka_bootstrap, {"subscribe": topic}, ckpt, tmp_path / "unused",
                             {"maxOffsetsPerTrigger": "2"})
    assert answer["ok"], answer
    assert [b for b in answer["batches"] if b < 10] == [8, 9]  # then idle triggers, if any, report batch 10
    assert topic_values(kafka_bootstrap, f"{topic}-out") == {str(i): 1 for i in range(16, 20)}  # nothing read again
    after = json.loads(run_cli("check", ckpt, "--bootstrap-server", kafka_bootstrap, "--format", "json").stdout)
    assert [f["code"] for f in after] == ["WM085"]  # the gaps stay; the topic holds every offset: no WM081-WM084
    logged = {r["batch"]: r["sources"] for r in json.loads(run_cli("batches", ckpt, "--format", "json").stdout)}
    assert logged[8] == ['{"wmcheck-kafka-async":{"0":9,"1":9}}']  # the first batch of a run is always logged
    assert set(logged) - {0, 1, 4, 5, 7, 8} <= {9}  # batch 9 only if it started an interval after batch 8


def test_a_rewind_to_before_a_partition_was_added_reads_it_from_its_earliest_offset(spark_kafka, kafka_bootstrap,
                                                                                     tmp_path):
    topic = refilled(kafka_bootstrap, "kafka_grow", partitions=3)  # grown to 3 before batch 2
    root = tmp_path / "kafka_grow"
    shutil.copytree(FIXTURES / "kafka_grow", root)
    old = json.loads((root / "kafka.json").read_text())["root"]
    run_cli("relocate", root / "checkpoint", "--path-map", f"{old}={root}", "--file-sink", root / "output", "--execute",
            "--idle", "0")
    plan = json.loads(run_cli("rewind", root / "checkpoint", "--to-batch", "1", "--file-sink", root / "output",
                              "--idle", "0", "--execute", "--format", "json").stdout)
    assert [(s["position"], s["after"]) for s in plan["sources"]] == [
        (f"{topic}/0", "4"), (f"{topic}/1", "4"), (f"{topic}/2", "earliest")]
    answer = spark_kafka.run("kafka_etl", kafka_bootstrap, {"subscribe": topic}, root / "checkpoint", root / "output")
    assert answer["ok"], answer
    read = Counter((r["partition"], r["offset"]) for r in read_rows(root / "output"))
    assert read == Counter({(p, o): 1 for p, n in ((0, 7), (1, 7), (2, 3)) for o in range(n)})  # none lost, none twice


def test_a_rewind_of_async_progress_tracking_runs_the_unlogged_batches_again(spark_kafka, kafka_bootstrap, tmp_path):
    """Batch 6 is in neither log, yet it ran: rewound to batch 5, Spark runs 6 and 7 again and the Kafka sink gets
    batch 6's records (values 12 and 13) as well as batch 7's."""
    topic = refilled(kafka_bootstrap)
    ckpt = tmp_path / "checkpoint"
    shutil.copytree(FIXTURES / NAME / "checkpoint", ckpt)
    plan = json.loads(run_cli("rewind", ckpt, "--to-batch", "5", "--kafka-sink", f"{topic}-out", "--bootstrap-server",
                              kafka_bootstrap, "--idle", "0", "--execute", "--format", "json").stdout)
    [sink] = plan["sinks"]
    assert [(b["batch"], b["action"], b["rows"]) for b in sink["batches"]] == [(6, "duplicate", None),
                                                                               (7, "duplicate", 0)]
    assert sink["summary"].endswith("; batch(es) 6 ran but were not logged (async progress tracking): their records "
                                    "are written again too, how many is not known")
    answer = spark_kafka.run(NAME, kafka_bootstrap, {"subscribe": topic}, ckpt, tmp_path / "unused",
                             {"maxOffsetsPerTrigger": "2"})
    assert answer["ok"], answer
    assert [b for b in answer["batches"] if b < 8] == [6, 7]
    assert topic_values(kafka_bootstrap, f"{topic}-out") == {str(i): 1 for i in range(12, 16)}
