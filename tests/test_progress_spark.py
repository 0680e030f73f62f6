"""Spark-backed commands on a terminal: a progress line on stderr (Spark starting, then the phase with the running
job's tasks), nothing on a pipe or with --quiet; a real Ctrl-C (SIGINT) ends such a command at once with exit 130,
its JVM following."""
from __future__ import annotations

import io
import os
import pty
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from wmcheck.cli.progress import Progress, progress_for, spark_tasks

from conftest import fixture_checkpoint

CKPT = str(fixture_checkpoint("agg_window_hdfs"))


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_shows_only_on_a_terminal_and_not_when_quiet():
    assert progress_for(False, Terminal()).enabled
    assert not progress_for(True, Terminal()).enabled
    assert not progress_for(False, io.StringIO()).enabled
    shown = Terminal()
    line = Progress(shown)
    line.phase("starting Spark")
    line.count("batch", 2, 5)
    line.clear()
    assert shown.getvalue() == "\r\x1b[Kstarting Spark\r\x1b[Kbatch 2 of 5\r\x1b[K"


@pytest.mark.spark
def test_the_running_jobs_tasks_are_read_from_spark(spark):
    assert spark_tasks() is None  # nothing runs
    job = threading.Thread(target=lambda: spark.sparkContext.parallelize(range(4), 4).map(
        lambda x: __import__("time").sleep(3) or x).collect())
    job.start()
    seen = None
    deadline = time.monotonic() + 60
    while job.is_alive() and seen is None and time.monotonic() < deadline:
        seen = spark_tasks()
        time.sleep(0.2)
    job.join()
    assert seen is not None and seen.startswith("stage ") and seen.endswith(" of 4 tasks"), seen


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (the spark-submit launcher and its JVM)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    parents[int(entry)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    out, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - out
        out |= frontier
    return out


@pytest.mark.spark
def test_a_spark_command_shows_its_progress_and_ends_at_once_on_ctrl_c():
    interrupt(["state", CKPT, "--engine", "spark", "--format", "json"], b"reading state with Spark")


SLOW_CODE = """import sys
sys.path[:0] = [{tests!r}]
from compat_cases import QUERIES, _events, _windowed
from pyspark.sql import functions as F


@F.udf("int")
def slow(v):
    __import__("time").sleep(60)
    return v


def new_query(spark):
    return QUERIES.file_sink(_windowed(_events(spark, {root!r} + "/input").withColumn("v", slow("v"))),
                             {root!r} + "/checkpoint", {root!r} + "/output")
"""


@pytest.mark.spark
def test_compat_ends_at_once_on_ctrl_c_mid_batch_and_leaves_the_checkpoint_as_it_was(tmp_path):
    from compat_oracle import digest

    from restart_oracle import prepare

    root = prepare("agg_window_hdfs", tmp_path / "agg", extra=0)
    module = tmp_path / "slow_code.py"
    module.write_text(SLOW_CODE.format(tests=str(Path(__file__).parent), root=str(root)))
    before = digest(root)
    interrupt(["compat", str(root / "checkpoint"), "--query", f"{module}:new_query", "--scratch-dir", str(tmp_path)],
              b"running batch 11 with the new code")
    assert digest(root) == before


def interrupt(args: list[str], phase: bytes) -> None:
    """Run ``wmcheck ARGS`` on a terminal until its progress line shows ``phase``, then Ctrl-C it: it ends within
    5 s with exit 130 and nothing on stdout, and its JVM follows."""
    terminal, stderr = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "wmcheck.cli", *args], stdout=subprocess.PIPE, stderr=stderr,
                               stdin=subprocess.DEVNULL, env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    os.close(stderr)
    seen, jvm = b"", set()
    deadline = time.monotonic() + 300
    try:
        while phase not in seen and process.poll() is None and time.monotonic() < deadline:
            if select.select([terminal], [], [], 0.5)[0]:
                seen += os.read(terminal, 4096)
            jvm = descendants(process.pid) or jvm
        assert b"starting Spark" in seen and phase in seen, seen
        assert process.poll() is None and jvm, "the command ended before it could be interrupted"
        process.send_signal(signal.SIGINT)
        started = time.monotonic()
        out, _ = process.communicate(timeout=60)
        assert time.monotonic() - started < 5 and process.returncode == 130 and out == b""
        with pytest.raises(OSError):  # the terminal's other end closed: read what is left
            while True:
                seen += os.read(terminal, 4096)
        assert seen.endswith(b"\ninterrupted\r\n"), seen[-200:]
        gone = time.monotonic() + 60
        while any(os.path.exists(f"/proc/{p}") and not _zombie(p) for p in jvm) and time.monotonic() < gone:
            time.sleep(0.5)
        assert not [p for p in jvm if os.path.exists(f"/proc/{p}") and not _zombie(p)], "Spark's JVM outlived the command"
    finally:
        if process.poll() is None:
            process.kill()
        os.close(terminal)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
