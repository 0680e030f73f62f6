"""``wmcheck reset-offsets`` against a real broker and real restarts: each reset executed on a checkpoint a real Kafka
query wrote, the query restarted by Spark (pyspark 4.2 with Spark's Kafka connector), its output compared with what
the reset said and with a control run."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

import wmcheck
from wmcheck.checkpoint import repair

from kafka_env import Record, create_topic, produce, read_rows, unique_topic

pytestmark = pytest.mark.spark
T0 = 1_704_067_200_000


def records(count: int, start: int = 0, partitions: int = 2) -> list[Record]:
    """Record i: partition i % partitions, value i, timestamp T0 + i s."""
    return [Record(i % partitions, str(i), T0 + i * 1000) for i in range(start, start + count)]


def run(worker, query: str, bootstrap: str, topic: str, root: Path, **options: str) -> dict:
    answer = worker.run(query, bootstrap, {"subscribe": topic}, root / "checkpoint", root / "output", options)
    assert answer["ok"], answer
    return answer


def reset(root: Path, **kwargs) -> repair.RepairResult:
    request = repair.ResetOffsetsRequest(file_sink=str(root / "output"), **kwargs)
    return repair.run(str(root / "checkpoint"), request, repair.RunOptions(execute=True, idle_ms=0))


def offsets_read(root: Path) -> Counter:
    """How often the query wrote each (partition, offset) record."""
    return Counter((r["partition"], r["offset"]) for r in read_rows(root / "output"))


def test_a_stateless_query_reads_again_exactly_the_records_a_shift_back_names(spark_kafka, kafka_bootstrap, tmp_path):
    topic = create_topic(kafka_bootstrap, unique_topic("etl"), 2)
    produce(kafka_bootstrap, topic, records(20))
    root = tmp_path / "q"
    run(spark_kafka, "kafka_etl", kafka_bootstrap, topic, root, maxOffsetsPerTrigger="8")
    result = reset(root, shift_by=-3, bootstrap_server=kafka_bootstrap)
    assert result.executed
    assert [(s.position, s.before, s.after) for s in result.plan.sources] == [
        (f"{topic}/0", "10", "7"), (f"{topic}/1", "10", "7")]
    assert "6 record(s) are read again and written to the sink a second time" in result.plan.warnings
    assert [(f.code, f.path) for f in wmcheck.check(str(root / "checkpoint"), file_sink=str(root / "output"))] == []
    produce(kafka_bootstrap, topic, records(4, start=20))
    run(spark_kafka, "kafka_etl", kafka_bootstrap, topic, root)
    seen = offsets_read(root)
    assert {k for k, n in seen.items() if n == 2} == {(p, o) for p in (0, 1) for o in (7, 8, 9)}  # the 6 said
    assert set(seen) == {(p, o) for p in (0, 1) for o in range(12)}  # every record, the 4 new ones too
    assert sum(seen.values()) == 24 + 6
    assert [(f.code, f.path) for f in wmcheck.check(str(root / "checkpoint"), file_sink=str(root / "output"))] == []


def test_a_reset_to_a_datetime_starts_each_partition_at_its_first_record_of_that_time(spark_kafka, kafka_bootstrap,
                                                                                        tmp_path):
    topic = create_topic(kafka_bootstrap, unique_topic("etl"), 2)
    produce(kafka_bootstrap, topic, records(12))
    root = tmp_path / "q"
    run(spark_kafka, "kafka_etl", kafka_bootstrap, topic, root)
    # 2024-01-01T00:00:07Z: record 7 (partition 1, offset 3); partition 0's first at or after it is record 8 (offset 4)
    result = reset(root, to_datetime="2024-01-01T00:00:07Z", bootstrap_server=kafka_bootstrap)
    assert [(s.position, s.after) for s in result.plan.sources] == [(f"{topic}/0", "4"), (f"{topic}/1", "3")]
    run(spark_kafka, "kafka_etl", kafka_bootstrap, topic, root)
    seen = offsets_read(root)
    assert {k for k, n in seen.items() if n == 2} == {(0, 4), (0, 5), (1, 3), (1, 4), (1, 5)}
    values = Counter(r["value"] for r in read_rows(root / "output"))
    assert sorted(int(v) for v, n in values.items() if n == 2) == [7, 8, 9, 10, 11]


def test_a_reset_forward_skips_exactly_the_records_between(spark_kafka, kafka_bootstrap, tmp_path):
    topic = create_topic(kafka_bootstrap, unique_topic("etl"), 2)
    produce(kafka_bootstrap, topic, records(8))
    root = tmp_path / "q"
    run(spark_kafka, "kafka_etl", kafka_bootstrap, topic, root)
    produce(kafka_bootstrap, topic, records(8, start=8))  # offsets 4..7 in each partition
    result = reset(root, to_offset=6, topic=(f"{topic}:1",), bootstrap_server=kafka_bootstrap)
    assert "2 record(s) are skipped: the query never reads them" in result.plan.warnings
    run(spark_kafka, "kafka_etl", kafka_bootstrap, topic, root)
    seen = offsets_read(root)
    assert set(seen) == {(0, o) for o in range(8)} | {(1, o) for o in (0, 1, 2, 3, 6, 7)}
    assert set(seen.values()) == {1}


def test_an_aggregation_keeps_its_state_and_counts_the_records_read_again(spark_kafka, kafka_bootstrap, tmp_path):
    """The reset keeps the state: windows count the re-read records twice, as a control run whose topic holds them
    twice counts them (none is behind the watermark)."""
    topic = create_topic(kafka_bootstrap, unique_topic("agg"), 2)
    first = records(20)  # event times 0..19 s: the watermark (10 s delay) reaches 9 s, no window closes
    produce(kafka_bootstrap, topic, first)
    root = tmp_path / "q"
    run(spark_kafka, "kafka_agg", kafka_bootstrap, topic, root, maxOffsetsPerTrigger="8")
    result = reset(root, shift_by=-2, bootstrap_server=kafka_bootstrap)
    assert result.plan.warnings[0].startswith("4 record(s) are read again while the state is kept: an aggregation "
                                              "counts them a second time")
    later = records(4, start=40)  # event times 40..43 s: the watermark passes 30 s, closing windows 0-10, 10-20
    produce(kafka_bootstrap, topic, later)
    run(spark_kafka, "kafka_agg", kafka_bootstrap, topic, root)
    run(spark_kafka, "kafka_agg", kafka_bootstrap, topic, root)  # a no-data batch emits the windows the watermark closed

    control_topic = create_topic(kafka_bootstrap, unique_topic("agg-control"), 2)
    again = [r for r in first if r.value in {"16", "17", "18", "19"}]  # offsets 8, 9 of each partition
    produce(kafka_bootstrap, control_topic, first + again + later)
    control = tmp_path / "control"
    run(spark_kafka, "kafka_agg", kafka_bootstrap, control_topic, control)
    run(spark_kafka, "kafka_agg", kafka_bootstrap, control_topic, control)

    def windows(where: Path) -> list[tuple[str, int, int]]:
        return sorted((str(r["window"]["start"]), r["n"], r["v_sum"]) for r in read_rows(where / "output"))

    assert windows(root) == windows(control)
    assert [(n, v) for _, n, v in windows(root)] == [(10, 45), (14, 145 + 16 + 17 + 18 + 19)]


def test_records_read_again_behind_the_watermark_are_dropped_as_late_as_many_as_the_reset_says(
        spark_kafka, kafka_bootstrap, tmp_path):
    topic = create_topic(kafka_bootstrap, unique_topic("dedup"), 2)
    produce(kafka_bootstrap, topic, records(20))  # event times 0..19 s: the watermark reaches 9 s
    root = tmp_path / "q"
    run(spark_kafka, "kafka_dedup", kafka_bootstrap, topic, root, maxOffsetsPerTrigger="8")
    result = reset(root, to_earliest=True, bootstrap_server=kafka_bootstrap)
    assert result.plan.warnings[1].startswith("10 of them have a Kafka timestamp at or before the watermark "
                                              "(1704067209000): where the query's event time is the record's timestamp")
    assert run(spark_kafka, "kafka_dedup", kafka_bootstrap, topic, root)["dropped_by_watermark"] == 10
