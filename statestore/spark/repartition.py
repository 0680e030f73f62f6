"""Spark's offline state repartition for ``wmcheck repartition --execute``: :class:`SparkRepartitioner` runs it in
this process's Spark session and verifies the result with ``wmcheck check`` and Spark's state reader.

The repair itself (backup, journal, the sink log entry, undo) is ``repair.run`` with a
:class:`~wmcheck.checkpoint.repair.RepartitionRequest` whose ``runner`` is a :class:`SparkRepartitioner`::

    repair.run(path, RepartitionRequest(partitions=16, runner=SparkRepartitioner()), RunOptions(execute=True))
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from importlib import metadata

from wmcheck.checkpoint.errors import CheckpointError, arg
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.records import dataclass
from wmcheck.checkpoint.repair.plan import Plan
from wmcheck.checkpoint.repair.repartition import StateRows, spark_version_problem
from wmcheck.checkpoint.repair.requests import FsOptions
from wmcheck.checkpoint.repair.results import StoreCount, Verification
from wmcheck.checkpoint.repartitions import partitions_of


def pyspark_problem() -> str | None:
    """Why the pyspark of this environment cannot run Spark's repartition (None when it can)."""
    try:
        return spark_version_problem(metadata.version("pyspark"))
    except metadata.PackageNotFoundError:
        return "pyspark is not installed"


@dataclass(frozen=True)
class SparkRepartitioner:
    """Runs ``StreamingCheckpointManager.repartition`` in the Spark session of this process (one already running is
    reused; else one is started with ``master`` and ``conf``). Spark Connect (``remote``) is refused."""

    master: str | None = None
    conf: Mapping[str, str] | None = None
    remote: str | None = None

    def check(self) -> None:
        if self.remote:
            raise CheckpointError("Spark's offline state repartition runs in Spark Classic only, not over Spark Connect",
                                  hint=f"leave out {arg('remote')} (use {arg('master')} to pick a cluster)", param="remote")
        problem = pyspark_problem()
        if problem:
            raise CheckpointError(problem, hint="pip install 'pyspark>=4.2'")

    def _session(self):
        from wmcheck.statestore.spark.session import get_session

        return get_session(self.master, dict(self.conf or {}), None)[0]

    def start(self, location: str, fs_options: FsOptions) -> StateRows:
        return row_counts(self._session(), location)

    def repartition(self, location: str, partitions: int, confs: Mapping[str, str]) -> str | None:
        """Spark's repartition; when it fails, the other tasks of its jobs are cancelled and waited for (a failed
        job's running tasks go on writing state files), so that nothing writes into the checkpoint afterwards."""
        spark = self._session()
        sc, tag = spark.sparkContext, f"wmcheck-repartition-{uuid.uuid4()}"
        sc.addJobTag(tag)
        try:
            with session_confs(spark, confs):
                spark._streamingCheckpointManager.repartition(location, partitions)
        except Exception as exc:  # Spark's error, as one line
            sc.cancelJobsWithTag(tag)
            left = wait_for_tasks(sc, tag, SETTLE_S)
            if left:
                raise CheckpointError(f"Spark's repartition failed ({spark_error(exc)}) and {left} of its tasks still "
                                      f"ran {SETTLE_S} s later: the repair is left interrupted",
                                      hint="once Spark stopped, 'wmcheck undo CKPT' removes what it wrote") from None
            return spark_error(exc)
        finally:
            sc.removeJobTag(tag)
        return None

    def verify(self, location: str, plan: Plan, before: StateRows, fs_options: FsOptions) -> Verification:
        from wmcheck.checkpoint.checks.registry import ERROR
        from wmcheck.checkpoint.validate import check_location

        findings = check_location(location, plan.file_sink, fs_options=fs_options)
        try:
            after, unreadable = row_counts(self._session(), location), None
        except CheckpointError as exc:  # the repair is applied: the result says what is wrong, undo reverts it
            after, unreadable = {}, exc.message
        counts = () if unreadable else tuple(
            StoreCount(op, store, before.get((op, store), 0), after.get((op, store), 0))
            for op, store in sorted(set(before) | set(after)))
        ckpt = open_checkpoint(location, fs_options)
        return Verification(tuple(f"{f.code} {f.path}" for f in findings if f.severity == ERROR),
                            tuple(f"{f.code} {f.path}" for f in findings if f.severity != ERROR), counts,
                            partitions_of(ckpt, ckpt.last_batch or 0), unreadable)


SETTLE_S = 300
"""How long a failed repartition's remaining tasks may take to end."""


def running_tasks(sc, tag: str) -> int:
    """Tasks of the jobs tagged ``tag`` that Spark's status store still sees running (after every event Spark posted
    so far reached it: a task's start is posted before its job fails, its end once its thread is done)."""
    jsc = sc._jsc.sc()
    jsc.listenerBus().waitUntilEmpty()
    tracker = sc.statusTracker()
    jobs = [tracker.getJobInfo(job) for job in jsc.statusTracker().getJobIdsForTag(tag)]
    stages = sorted({stage for job in jobs if job is not None for stage in job.stageIds})
    return sum(info.numActiveTasks for info in map(tracker.getStageInfo, stages) if info is not None)


def wait_for_tasks(sc, tag: str, timeout_s: float) -> int:
    """Wait until no task of the jobs tagged ``tag`` runs; the number still running after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while (left := running_tasks(sc, tag)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def spark_error(exc: BaseException) -> str:
    """The first line of a Spark error (the Java one for Py4J errors)."""
    java = getattr(exc, "java_exception", None)
    text = (java.toString() if java is not None else str(exc)).strip()
    return text.splitlines()[0] if text else repr(exc)


class session_confs:
    """Set SQL confs on a session for a block, restoring what was there."""

    def __init__(self, spark, confs: Mapping[str, str]) -> None:
        self.spark, self.confs = spark, confs
        self.old: dict[str, str | None] = {}

    def __enter__(self) -> None:
        for key, value in self.confs.items():
            self.old[key] = self.spark.conf.get(key, None)
            self.spark.conf.set(key, value)

    def __exit__(self, *exc: object) -> None:
        for key, value in self.old.items():
            self.spark.conf.unset(key) if value is None else self.spark.conf.set(key, value)


def row_counts(spark, location: str) -> dict[tuple[int, str], int]:
    """State rows per operator and store at the next batch, with Spark's state reader."""
    from wmcheck.statestore.spark.reader import read_stores, spark_errors

    counts = {}
    for read in read_stores(spark, location):
        with spark_errors(read.store, read.target, read.location):
            counts[(read.store.operator_id, read.store.name)] = read.raw.count()
    return counts
