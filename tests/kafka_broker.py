"""A real Apache Kafka broker for the tests: one KRaft node (broker and controller) on 127.0.0.1, from the jars
``tests/jvm/fetch.sh`` caches. ``.ci/run`` starts one for the whole run and names it in ``WMCHECK_KAFKA_BOOTSTRAP``;
without it, the tests start their own (tests/kafka_env.py).

    python tests/kafka_broker.py start DIR   # prints HOST:PORT once the broker answers; DIR/broker.pid, DIR/broker.log
    python tests/kafka_broker.py stop DIR
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

JARS = Path(os.environ.get("WMCHECK_JARS") or Path.home() / ".cache" / "wmcheck" / "jars")
BROKER_JARS = JARS / "kafka-broker"
START_TIMEOUT_S = 90.0

SERVER_PROPERTIES = """\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs={logs}
num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
delete.topic.enable=true
log.retention.ms=-1
log.retention.check.interval.ms=1000
log.segment.delete.delay.ms=0
log.initial.task.delay.ms=0
"""


@dataclass(frozen=True)
class Broker:
    bootstrap: str
    pid: int
    directory: Path


def jars_present() -> bool:
    return any(BROKER_JARS.glob("kafka_2.13-*.jar"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _java(*args: str) -> list[str]:
    return ["java", "-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-cp", str(BROKER_JARS / "*"), *args]


def start(directory: Path) -> Broker:
    """Format a fresh log directory under ``directory`` and start the broker; returns once it accepts connections and
    answers a metadata request (RuntimeError with the log's tail otherwise)."""
    if not jars_present():
        raise RuntimeError(f"no Kafka broker jars in {BROKER_JARS}: run tests/jvm/fetch.sh")
    directory.mkdir(parents=True, exist_ok=True)
    port, controller = _free_port(), _free_port()
    logs = directory / "logs"
    props = directory / "server.properties"
    props.write_text(SERVER_PROPERTIES.format(port=port, controller=controller, logs=logs))
    subprocess.run(_java("kafka.tools.StorageTool", "format", "-t", _cluster_id(), "-c", str(props)), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    log = (directory / "broker.log").open("wb")
    proc = subprocess.Popen(_java("kafka.Kafka", str(props)), stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    (directory / "broker.pid").write_text(str(proc.pid))
    deadline = time.monotonic() + START_TIMEOUT_S
    while not _answers(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(directory)
            tail = (directory / "broker.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"the Kafka broker did not start: {tail}")
        time.sleep(0.2)
    return Broker(f"127.0.0.1:{port}", proc.pid, directory)


def _cluster_id() -> str:
    """A Kafka cluster id: a random UUID in URL-safe base64 without padding, drawn again while it starts with ``-``
    (as Kafka's ``Uuid.randomUuid`` does: the storage tool would read such an id as an option)."""
    import base64

    while True:
        found = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not found.startswith("-"):
            return found


def stop(directory: Path) -> None:
    """Stop the broker started in ``directory`` (SIGTERM, then SIGKILL after 20 s)."""
    pid_file = directory / "broker.pid"
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text())
    for sig, wait in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            time.sleep(0.1)
        else:
            continue
        break
    pid_file.unlink(missing_ok=True)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print(__doc__, file=sys.stderr)
        return 2
    directory = Path(argv[1])
    if argv[0] == "stop":
        stop(directory)
        return 0
    print(start(directory).bootstrap)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
