"""The Kafka side of the tests: the broker (``.ci/run``'s, named by ``WMCHECK_KAFKA_BOOTSTRAP``, else one started for
the session), topics made and filled per test with confluent-kafka, and a Spark session with Spark's Kafka connector
in a child process of the pyspark 4.2 environment (``WMCHECK_SPARK42_PYTHON``, default the repository's
``.venv-spark42``; .ci/run makes it from tests/requirements-spark42.txt), shared by every test of the session.

Without the broker's jars or that environment the tests that need them skip, and fail under CI.
"""
from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import pytest

import kafka_broker

ROOT = Path(__file__).resolve().parents[1]
WORKER = Path(__file__).resolve().parent / "spark_worker.py"
TIMEOUT_S = 10.0


def unavailable(message: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory) -> Iterator[str]:
    """HOST:PORT of a running broker."""
    given = os.environ.get("WMCHECK_KAFKA_BOOTSTRAP")
    if given:
        yield given
        return
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        unavailable("confluent-kafka is not installed (pip install -e '.[kafka]')")
    if not kafka_broker.jars_present():
        unavailable(f"no Kafka broker jars in {kafka_broker.BROKER_JARS} (run tests/jvm/fetch.sh)")
    directory = tmp_path_factory.mktemp("kafka-broker")
    broker = kafka_broker.start(directory)
    try:
        yield broker.bootstrap
    finally:
        kafka_broker.stop(directory)


@dataclass(frozen=True)
class Record:
    partition: int
    value: str
    timestamp_ms: int
    key: str | None = None


def admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})


def unique_topic(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_topic(bootstrap: str, name: str, partitions: int, config: dict[str, str] | None = None) -> str:
    from confluent_kafka.admin import NewTopic

    client = admin(bootstrap)  # kept until the futures resolve: a collected client cancels them
    futures = client.create_topics([NewTopic(name, partitions, 1, config=config or {})],
                                   operation_timeout=TIMEOUT_S, request_timeout=TIMEOUT_S)
    for future in futures.values():
        future.result(timeout=30)
    _wait(lambda: len(_partitions(bootstrap, name)) == partitions, f"topic {name} with {partitions} partitions")
    return name


def delete_topic(bootstrap: str, name: str) -> None:
    client = admin(bootstrap)
    for future in client.delete_topics([name], operation_timeout=TIMEOUT_S, request_timeout=TIMEOUT_S).values():
        future.result(timeout=30)
    _wait(lambda: name not in admin(bootstrap).list_topics(timeout=TIMEOUT_S).topics, f"topic {name} deleted")


def add_partitions(bootstrap: str, name: str, total: int) -> None:
    from confluent_kafka.admin import NewPartitions

    client = admin(bootstrap)
    for future in client.create_partitions([NewPartitions(name, total)], request_timeout=TIMEOUT_S).values():
        future.result(timeout=30)
    _wait(lambda: len(_partitions(bootstrap, name)) == total, f"topic {name} with {total} partitions")


def _partitions(bootstrap: str, name: str) -> list[int]:
    topic = admin(bootstrap).list_topics(topic=name, timeout=TIMEOUT_S).topics.get(name)
    return sorted(topic.partitions) if topic is not None and topic.error is None else []


def produce(bootstrap: str, topic: str, records: Sequence[Record]) -> None:
    """Write ``records`` in order (one producer, acks=all, no batching surprises: offsets follow the order per
    partition)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 0, "message.timeout.ms": 30000})
    errors: list[str] = []

    def delivered(err, _msg) -> None:
        if err is not None:
            errors.append(str(err))

    for r in records:
        producer.produce(topic, value=r.value.encode(), key=r.key.encode() if r.key else None, partition=r.partition,
                         timestamp=r.timestamp_ms, on_delivery=delivered)
    if producer.flush(30) or errors:
        raise RuntimeError(f"producing to {topic} failed: {errors[:3]}")


def delete_records_before(bootstrap: str, topic: str, offsets: dict[int, int]) -> None:
    """Make the broker drop every record of ``topic`` before ``offsets`` (partition -> offset), as retention does."""
    from confluent_kafka import TopicPartition

    client = admin(bootstrap)
    futures = client.delete_records([TopicPartition(topic, p, o) for p, o in offsets.items()],
                                    request_timeout=TIMEOUT_S, operation_timeout=TIMEOUT_S)
    for future in futures.values():
        future.result(timeout=30)


def _wait(done, what: str, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {seconds} s for {what}")
        time.sleep(0.1)


class SparkWorker:
    """tests/spark_worker.py in a child process: ``run`` a query to its end, get Spark's outcome."""

    def __init__(self, python: str, log: Path, env_extra: dict[str, str] | None = None) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env_extra or {})}
        self.log = log
        self.proc = subprocess.Popen([python, str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=log.open("wb"), env=env, text=True, bufsize=1)
        ready = self._answer(300)
        if not ready.get("ready"):
            raise RuntimeError(f"the Spark worker did not start: {ready}")
        self.spark_version = ready["spark"]

    def _answer(self, seconds: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(seconds):
                raise TimeoutError(f"the Spark worker did not answer within {seconds} s; its log: {self.log}")
        line = self.proc.stdout.readline()
        if not line:
            tail = self.log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"the Spark worker died: {tail}")
        return json.loads(line)

    def run(self, query: str, bootstrap: str, source: dict[str, str], checkpoint: Path, output: Path,
            options: dict[str, str] | None = None, conf: dict[str, str] | None = None) -> dict[str, Any]:
        assert self.proc.stdin is not None
        request = {"query": query, "bootstrap": bootstrap, "source": source, "checkpoint": str(checkpoint),
                   "output": str(output), "options": options or {}, "conf": conf or {}}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return self._answer(600)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def spark42_python() -> str:
    return os.environ.get("WMCHECK_SPARK42_PYTHON") or str(ROOT / ".venv-spark42" / "bin" / "python")


@pytest.fixture(scope="session")
def spark_kafka(tmp_path_factory) -> Iterator[SparkWorker]:
    """One Spark session with the Kafka connector for the whole test session."""
    python = spark42_python()
    if not os.access(python, os.X_OK):
        unavailable(f"no pyspark 4.2 environment at {python} (WMCHECK_SPARK42_PYTHON; .ci/run makes .venv-spark42)")
    if not any((kafka_broker.JARS / "spark-kafka").glob("spark-sql-kafka-*.jar")):
        unavailable(f"no Spark Kafka connector jars in {kafka_broker.JARS / 'spark-kafka'} (run tests/jvm/fetch.sh)")
    worker = SparkWorker(python, tmp_path_factory.mktemp("spark-worker") / "worker.log")
    try:
        yield worker
    finally:
        worker.close()


def delta_python() -> str:
    return os.environ.get("WMCHECK_DELTA_PYTHON") or str(ROOT / ".venv-delta" / "bin" / "python")


def delta_jars() -> Path:
    return Path(os.environ.get("WMCHECK_DELTA_JARS") or kafka_broker.JARS / "delta")


@pytest.fixture(scope="session")
def spark_kafka_delta(tmp_path_factory) -> Iterator[SparkWorker]:
    """One Spark session with the Kafka connector and Delta Lake (the Delta environment's pyspark 4.2 and
    delta-spark, both jar sets in spark.jars), for the tests whose Kafka query writes a Delta table."""
    python = delta_python()
    if not os.access(python, os.X_OK):
        unavailable(f"no Delta environment at {python} (WMCHECK_DELTA_PYTHON; .ci/run makes .venv-delta)")
    if not any((kafka_broker.JARS / "spark-kafka").glob("spark-sql-kafka-*.jar")):
        unavailable(f"no Spark Kafka connector jars in {kafka_broker.JARS / 'spark-kafka'} (run tests/jvm/fetch.sh)")
    if not any(delta_jars().glob("delta-spark_*.jar")):
        unavailable(f"no Delta jars in {delta_jars()} (run tests/jvm/fetch-delta.sh)")
    worker = SparkWorker(python, tmp_path_factory.mktemp("spark-worker-delta") / "worker.log",
                         {"WMCHECK_WORKER_DELTA_JARS": str(delta_jars())})
    try:
        yield worker
    finally:
        worker.close()


def read_rows(output: Path) -> list[dict[str, Any]]:
    """Every row the query's file sink committed (through its _spark_metadata log), sorted."""
    import pyarrow.parquet as pq

    files = committed_files(output)
    rows = [row for f in files for row in pq.read_table(f).to_pylist()]
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def committed_files(output: Path) -> list[str]:
    """The data files the file sink's log lists as added (the compact files' and the batch files' entries)."""
    log = output / "_spark_metadata"
    files: dict[str, bool] = {}
    for entry in sorted(log.iterdir(), key=lambda p: int(p.name.split(".")[0]) if p.name.split(".")[0].isdigit() else -1):
        if entry.name.startswith(".") or not entry.name.split(".")[0].isdigit():
            continue
        for line in entry.read_text().splitlines()[1:]:
            item = json.loads(line)
            path = item["path"].removeprefix("file://")
            if item["action"] == "add":
                files[path] = True
            else:
                files.pop(path, None)
    return sorted(files)


if __name__ == "__main__":  # a quick look: python tests/kafka_env.py
    print(spark42_python(), kafka_broker.jars_present(), file=sys.stderr)
