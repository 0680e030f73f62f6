"""Progress lines on stderr for the commands that wait on Spark: the phase (starting Spark, a Spark job's tasks,
batch k of n), rewritten in place on a terminal; nothing when stderr is not a terminal or with ``--quiet``."""
from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from typing import Callable, Iterator, TextIO

import click

POLL_S = 0.5
"""How often Spark's job progress is read while a command waits on it."""


def quiet_option() -> Callable:
    return click.option("--quiet", is_flag=True, help="No progress lines on stderr (they only show on a terminal).")


class Progress:
    """One status line, rewritten in place: ``phase`` says what runs now; Spark's task counts follow it."""

    def __init__(self, stream: TextIO | None) -> None:
        self.stream = stream
        self.text = ""
        self._lock = threading.Lock()
        self._shown = False

    @property
    def enabled(self) -> bool:
        return self.stream is not None

    def phase(self, text: str) -> None:
        self.text = text
        self._show(text)

    def count(self, what: str, done: int, total: int) -> None:
        self.phase(f"{what} {done} of {total}")

    def _show(self, line: str) -> None:
        if self.stream is None:
            return
        with self._lock:
            self.stream.write(f"\r\x1b[K{line}")
            self.stream.flush()
            self._shown = True

    def clear(self) -> None:
        if self.stream is not None and self._shown:
            with self._lock:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
                self._shown = False


def progress_for(quiet: bool, stream: TextIO | None = None) -> Progress:
    """A progress line on ``stream`` (stderr) when it is a terminal and not ``quiet``, else one that shows nothing."""
    stream = sys.stderr if stream is None else stream
    return Progress(stream if not quiet and stream.isatty() else None)


def spark_tasks() -> str | None:
    """The running Spark job's progress (``stage 3: 5 of 12 tasks``), read without starting anything; None when no
    SparkContext is active (yet) or no stage runs."""
    spark = sys.modules.get("pyspark")
    context = getattr(getattr(spark, "SparkContext", None), "_active_spark_context", None)
    if context is None:
        return None
    tracker = context.statusTracker()
    stages = sorted(tracker.getActiveStageIds())
    infos = [info for info in (tracker.getStageInfo(s) for s in stages) if info is not None]
    if not infos:
        return None
    done, total = sum(i.numCompletedTasks for i in infos), sum(i.numTasks for i in infos)
    return f"stage {', '.join(map(str, stages))}: {done} of {total} tasks"


@contextmanager
def spark_progress(progress: Progress, starting: str = "starting Spark") -> Iterator[Progress]:
    """While the body runs: ``starting`` until a SparkContext exists, then the phase with the running job's tasks."""
    if not progress.enabled:
        yield progress
        return
    stop = threading.Event()
    progress.phase(starting)

    def poll() -> None:
        while not stop.wait(POLL_S):
            try:
                tasks = spark_tasks()
            except Exception:  # noqa: BLE001 - the context stopping under us: nothing to show
                tasks = None
            if tasks and not stop.is_set():
                progress._show(f"{progress.text}: {tasks}" if progress.text != starting else f"Spark: {tasks}")

    worker = threading.Thread(target=poll, name="wmcheck-progress", daemon=True)
    worker.start()
    try:
        yield progress
    finally:
        stop.set()
        worker.join(timeout=POLL_S * 4)
        progress.clear()

