"""``check --bootstrap-server``: each Kafka source's offsets against the topic as the broker holds it now (WM081-WM084),
each verdict and fix proven by restarting Spark 4.2 against the real broker."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from wmcheck.checkpoint import repair
from wmcheck.checkpoint.checks.definition import Instruction
from wmcheck.checkpoint.checks.kafka_live import OFFLINE_NOTE
from wmcheck.checkpoint.errors import CheckpointError
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.repair.requests import RunOptions
from wmcheck.checkpoint.sources.kafka_topics import KafkaTopics
from wmcheck.checkpoint.validate import check_checkpoint

from kafka_env import (
    Record,
    add_partitions,
    create_topic,
    delete_records_before,
    delete_topic,
    produce,
    read_rows,
    unique_topic,
)

KAFKA_CODES = ("WM081", "WM082", "WM083", "WM084", "WM088")
T0 = 1_700_000_000_000


def records(partition: int, first: int, n: int) -> list[Record]:
    return [Record(partition, str(i), T0 + i * 1000) for i in range(first, first + n)]


def query(spark, bootstrap, topic: str, work: Path, options: dict[str, str] | None = None) -> dict:
    return spark.run("kafka_etl", bootstrap, {"subscribe": topic}, work / "ckpt", work / "out", options)


def offsets_of(work: Path) -> list[tuple[int, int]]:
    return sorted((r["partition"], r["offset"]) for r in read_rows(work / "out"))


def kafka_findings(work: Path, bootstrap: str, notes: list[str] | None = None):
    ckpt = open_checkpoint(str(work / "ckpt"))
    found = check_checkpoint(ckpt, checks=None, notes=notes, kafka=KafkaTopics(bootstrap, timeout_s=10))
    return [f for f in found if f.code in KAFKA_CODES]


def started(spark, bootstrap, tmp_path: Path, partitions: int = 2) -> tuple[str, Path]:
    """A topic of 3 records per partition, read by one batch; then 3 more per partition."""
    topic = create_topic(bootstrap, unique_topic("chk"), partitions)
    produce(bootstrap, topic, [r for p in range(partitions) for r in records(p, 0, 3)])
    assert query(spark, bootstrap, topic, tmp_path)["ok"]
    produce(bootstrap, topic, [r for p in range(partitions) for r in records(p, 3, 3)])
    return topic, tmp_path


def fails_with(result: dict, text: str) -> None:
    assert not result["ok"] and text in result["error"], result


def copy(work: Path, to: Path) -> Path:
    """The checkpoint and the output, for a restart that leaves ``work`` as it is."""
    for part in ("ckpt", "out"):
        shutil.copytree(work / part, to / part)
    return to


def execute(work: Path, fix) -> None:
    repair.run(str(work / "ckpt"), fix, RunOptions(execute=True, idle_ms=0))


DATA_LOST = "Some data may have been lost because they are not available in Kafka any more"


@pytest.mark.spark
def test_offsets_below_the_earliest_retained(spark_kafka, kafka_bootstrap, tmp_path):
    topic, work = started(spark_kafka, kafka_bootstrap, tmp_path)
    delete_records_before(kafka_bootstrap, topic, {0: 5})
    [finding] = kafka_findings(work, kafka_bootstrap)
    assert (finding.code, finding.severity, finding.path) == ("WM081", "error", "offsets/0")
    assert finding.message == (
        f"the next batch starts below what the broker retains ({topic}[0] starts at 3, the broker keeps 5 on): with "
        "failOnDataLoss true (the default) Spark fails ('Some data may have been lost because they are not available "
        f"in Kafka any more', partitions {topic}[0]); with failOnDataLoss false it skips 2 records without a word "
        "(tested with Spark 4.2). Resetting to the earliest makes the skip explicit and the restart work")
    assert finding.fix == repair.ResetOffsetsRequest(topic=(f"{topic}:0",), to_earliest=True,
                                                     bootstrap_server=kafka_bootstrap)
    lenient, strict = copy(work, tmp_path / "lenient"), copy(work, tmp_path / "strict")
    fails_with(query(spark_kafka, kafka_bootstrap, topic, strict), DATA_LOST)
    assert query(spark_kafka, kafka_bootstrap, topic, lenient, {"failOnDataLoss": "false"})["ok"]
    read = [(0, 0), (0, 1), (0, 2), (0, 5), (1, 0), (1, 1), (1, 2), (1, 3), (1, 4), (1, 5)]
    assert offsets_of(lenient) == read  # offsets 3 and 4 of partition 0 skipped
    execute(work, finding.fix)
    assert kafka_findings(work, kafka_bootstrap) == []
    assert query(spark_kafka, kafka_bootstrap, topic, work)["ok"]
    assert offsets_of(work) == read
    # after the failed restart (batch 1 planned, not committed) the same finding and the same fix, which replaces it
    assert sorted((p.name) for p in (strict / "ckpt" / "offsets").iterdir() if not p.name.startswith(".")) == ["0", "1"]
    [again] = kafka_findings(strict, kafka_bootstrap)
    assert (again.code, again.fix) == ("WM081", finding.fix)
    execute(strict, again.fix)
    assert kafka_findings(strict, kafka_bootstrap) == []
    assert query(spark_kafka, kafka_bootstrap, topic, strict)["ok"]
    assert offsets_of(strict) == read


@pytest.mark.spark
def test_topic_gone_and_recreated(spark_kafka, kafka_bootstrap, tmp_path):
    topic, work = started(spark_kafka, kafka_bootstrap, tmp_path)
    delete_topic(kafka_bootstrap, topic)
    [gone] = kafka_findings(work, kafka_bootstrap)
    assert (gone.code, gone.path, gone.fix) == ("WM082", "offsets/0", Instruction(
        f"re-create topic {topic} (then check again: WM083 tells where Spark starts in it), or start the query from "
        "a new checkpoint"))
    for options in ({}, {"failOnDataLoss": "false"}):
        fails_with(query(spark_kafka, kafka_bootstrap, topic, work, options),
                   "UnknownTopicOrPartitionException: This server does not host this topic-partition")
    create_topic(kafka_bootstrap, topic, 2)
    produce(kafka_bootstrap, topic, records(0, 0, 1) + records(1, 0, 1))
    [beyond] = kafka_findings(work, kafka_bootstrap)
    assert (beyond.code, beyond.path) == ("WM083", "offsets/0")
    assert beyond.message == (
        f"the offsets lie beyond the end of the topic, which was deleted and re-created ({topic}[0] at 3, the topic "
        f"ends at 1; {topic}[1] at 3, the topic ends at 1): with failOnDataLoss true (the default) Spark fails ('Some "
        "data may have been lost because they are not available in Kafka any more'); with failOnDataLoss false it "
        "skips the 2 records the new topic holds there (tested with Spark 4.2). The reset to the earliest reads the "
        "new topic from its start")
    assert beyond.fix == repair.ResetOffsetsRequest(topic=(f"{topic}:0,1",), to_earliest=True,
                                                    bootstrap_server=kafka_bootstrap)
    lenient, strict = copy(work, tmp_path / "lenient"), copy(work, tmp_path / "strict")
    fails_with(query(spark_kafka, kafka_bootstrap, topic, strict), DATA_LOST)
    assert query(spark_kafka, kafka_bootstrap, topic, lenient, {"failOnDataLoss": "false"})["ok"]
    first = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert offsets_of(lenient) == first  # the new topic's records skipped
    execute(work, beyond.fix)
    assert query(spark_kafka, kafka_bootstrap, topic, work)["ok"]
    assert sorted(offsets_of(work)) == sorted(first + [(0, 0), (1, 0)])


@pytest.mark.spark
def test_partitions_gone_and_added(spark_kafka, kafka_bootstrap, tmp_path):
    topic, work = started(spark_kafka, kafka_bootstrap, tmp_path / "fewer")
    delete_topic(kafka_bootstrap, topic)
    create_topic(kafka_bootstrap, topic, 1)
    produce(kafka_bootstrap, topic, records(0, 0, 8))
    [gone] = kafka_findings(work, kafka_bootstrap)
    assert (gone.code, gone.path) == ("WM084", "offsets/0")
    assert gone.message == (
        f"1 partition the source reads is gone ({topic}[1]; the topic was re-created with fewer): with failOnDataLoss "
        "true (the default) Spark fails ('Some data may have been lost because they are not available in Kafka any "
        "more'); with failOnDataLoss false it drops them and reads the others on (tested with Spark 4.2)")
    fails_with(query(spark_kafka, kafka_bootstrap, topic, work), DATA_LOST)
    assert query(spark_kafka, kafka_bootstrap, topic, work, {"failOnDataLoss": "false"})["ok"]  # the fix
    assert offsets_of(work) == [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (0, 6), (0, 7), (1, 0), (1, 1), (1, 2)]
    assert kafka_findings(work, kafka_bootstrap) == []

    grown, more = started(spark_kafka, kafka_bootstrap, tmp_path / "more")
    add_partitions(kafka_bootstrap, grown, 3)
    produce(kafka_bootstrap, grown, records(2, 0, 2))
    [added] = kafka_findings(more, kafka_bootstrap)  # Spark reads the new partition from its earliest offset
    assert (added.code, added.severity, added.path) == ("WM088", "warning", "offsets/0")
    assert added.message == (
        f"1 partition was added since the offsets were written ({grown}[2]): the next batch reads it from the earliest "
        "offset the broker retains, 2 records now (tested with Spark 4.2: every record once)")
    assert query(spark_kafka, kafka_bootstrap, grown, more)["ok"]
    assert offsets_of(more) == sorted([(p, o) for p in (0, 1) for o in range(6)] + [(2, 0), (2, 1)])
    assert kafka_findings(more, kafka_bootstrap) == []  # the offsets now name it


@pytest.mark.spark
def test_a_new_topic_matching_the_sources_subscribe_pattern(spark_kafka, kafka_bootstrap, tmp_path):
    """The checkpoint names the topics a subscribePattern source has read, not the pattern: given the pattern, check
    names a topic created since, whose records the restart reads from the earliest offset (each once)."""
    prefix = unique_topic("pat")
    first = create_topic(kafka_bootstrap, f"{prefix}-a", 1)
    produce(kafka_bootstrap, first, records(0, 0, 3))
    source = {"subscribePattern": f"{prefix}-.*"}
    work = tmp_path
    assert spark_kafka.run("kafka_etl", kafka_bootstrap, source, work / "ckpt", work / "out")["ok"]
    later = create_topic(kafka_bootstrap, f"{prefix}-b", 2)
    create_topic(kafka_bootstrap, f"other-{prefix}", 1)  # not matched: the pattern matches whole names
    produce(kafka_bootstrap, later, records(0, 0, 2) + records(1, 0, 1))
    ckpt = open_checkpoint(str(work / "ckpt"))
    assert [f for f in check_checkpoint(ckpt, kafka=KafkaTopics(kafka_bootstrap, timeout_s=10)) if f.code in KAFKA_CODES] == []
    patterned = KafkaTopics(kafka_bootstrap, timeout_s=10, subscribe_pattern=f"{prefix}-.*")
    [new] = [f for f in check_checkpoint(ckpt, kafka=patterned) if f.code in KAFKA_CODES]
    assert (new.code, new.severity, new.path) == ("WM088", "warning", "offsets/0")
    assert new.message == (
        f"1 topic matching the source's subscribePattern is new ({later}: {later}[0], {later}[1]): the next batch "
        "reads them from the earliest offset the broker retains, 3 records now (tested with Spark 4.2: every record once)")
    other = KafkaTopics(kafka_bootstrap, timeout_s=10, subscribe_pattern="elsewhere-.*")  # not this source's pattern
    assert [f for f in check_checkpoint(ckpt, kafka=other) if f.code in KAFKA_CODES] == []
    assert spark_kafka.run("kafka_etl", kafka_bootstrap, source, work / "ckpt", work / "out")["ok"]
    rows = read_rows(work / "out")
    assert sorted((r["topic"], r["partition"], r["offset"]) for r in rows) == [
        (first, 0, 0), (first, 0, 1), (first, 0, 2), (later, 0, 0), (later, 0, 1), (later, 1, 0)]
    assert [f for f in check_checkpoint(open_checkpoint(str(work / "ckpt")), kafka=patterned)
            if f.code in KAFKA_CODES] == []  # the offsets now name it


def test_a_subscribe_pattern_that_is_no_regular_expression_is_one_line():
    pytest.importorskip("confluent_kafka")
    with pytest.raises(CheckpointError) as bad:
        KafkaTopics("127.0.0.1:1", timeout_s=1, subscribe_pattern="events-(")
    assert (bad.value.param, bad.value.hint) == (
        "subscribe_pattern", "pass the source's subscribePattern option as the query gives it, e.g. 'events-.*'")


@pytest.mark.spark
def test_offline_one_note(spark_kafka, kafka_bootstrap, tmp_path):
    _, work = started(spark_kafka, kafka_bootstrap, tmp_path)
    notes: list[str] = []
    found = check_checkpoint(open_checkpoint(str(work / "ckpt")), notes=notes)
    assert [f for f in found if f.code in KAFKA_CODES] == []
    assert notes == [OFFLINE_NOTE]
    kafka_notes: list[str] = []
    kafka_findings(work, kafka_bootstrap, kafka_notes)
    assert kafka_notes == []


def test_broker_not_answering(cli_runner_kafka):
    result = cli_runner_kafka
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1
    assert "did not answer a metadata request within 1 s" in result.output


@pytest.fixture
def cli_runner_kafka(tmp_path):
    pytest.importorskip("confluent_kafka")
    import socket
    import time

    from click.testing import CliRunner

    from wmcheck.cli.main import cli

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "offsets").mkdir()
    started_at = time.monotonic()
    result = CliRunner().invoke(cli, ["check", str(tmp_path), "--bootstrap-server", f"127.0.0.1:{port}",
                                      "--timeout", "1"])
    assert time.monotonic() - started_at < 8
    return result


def test_without_the_client(monkeypatch):
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)
    with pytest.raises(CheckpointError) as exc:
        KafkaTopics("127.0.0.1:1")
    assert exc.value.hint == "pip install 'wmcheck[kafka]'"


def test_subscribe_pattern_on_the_command_line_needs_the_broker_and_a_regular_expression(tmp_path):
    from conftest import fixture_checkpoint, run_cli

    ckpt = fixture_checkpoint("kafka_pattern")
    out = run_cli("check", ckpt, "--subscribe-pattern", "a|b", exit_code=2).output
    assert out == ("Error: --subscribe-pattern needs --bootstrap-server (the broker lists the topics it matches) "
                   "(hint: see wmcheck check --help)\n")
    pytest.importorskip("confluent_kafka")
    out = run_cli("check", ckpt, "--bootstrap-server", "127.0.0.1:1", "--subscribe-pattern", "a(", exit_code=2).output
    assert out == ("Error: --subscribe-pattern 'a(' is not a regular expression: missing ), unterminated subpattern at "
                   "position 1 (hint: pass the source's subscribePattern option as the query gives it, e.g. 'events-.*')\n")


def test_the_test_brokers_cluster_id_never_starts_with_a_dash():
    """Kafka's storage tool reads an id starting with '-' as an option (1 in 64 random ids): drawn again, as Kafka does."""
    import kafka_broker

    assert not any(kafka_broker._cluster_id().startswith("-") for _ in range(5000))
