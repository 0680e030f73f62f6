"""Spark for one command: the session of the process reused, or one started and stopped fast as the process exits."""
from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator, Mapping

from .process import own_interrupts
from .progress import Progress, spark_progress

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@contextmanager
def command_session(master: str | None = None, conf: Mapping[str, str] | None = None, remote: str | None = None,
                    progress: Progress | None = None, doing: str = "running") -> Iterator["SparkSession"]:
    """A session for one command: reuses the running one, stops one it started (a clean JVM shutdown).
    ``progress`` shows Spark starting, then ``doing`` with the running job's tasks."""
    from wmcheck.statestore.spark.session import get_session

    with spark_progress(progress or Progress(None)) as shown:
        spark, created = get_session(master, conf, remote)
        own_interrupts()  # pyspark installed its own Ctrl-C handler with the session
        shown.phase(doing)
        try:
            yield spark
        finally:
            if created:
                stop_for_exit(spark)


def stop_for_exit(spark: "SparkSession") -> None:
    """Stop a session the command started, as the process is about to exit: the JVM's SparkContext stops
    cleanly, but pyspark's accumulator server (a daemon thread that notices a shutdown only at its next
    0.5 s poll) is told to stop without waiting for it, which would add ~0.4 s to every command. This writes
    pyspark's private attributes, so only the command line does it: the process ends right after, and nothing
    else in it uses the stopped context."""
    context = getattr(spark, "sparkContext", None)  # Spark Connect sessions have none
    server = getattr(context, "_accumulatorServer", None)
    if context is not None and server is not None:
        context._accumulatorServer = None
        server.server_shutdown = True
        server._BaseServer__shutdown_request = True  # what socketserver's shutdown() sets before it waits
    spark.stop()
