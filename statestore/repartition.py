"""Running ``wmcheck repartition --execute``: Spark's offline state repartition between wmcheck's backup and
journal, the attempt's files removed when Spark fails, the sink log entry written, the result verified with
``wmcheck check`` and Spark's state reader.

The backup is made before Spark runs (its plan holds wmcheck's own steps, the sink log entry) and the journal
says ``apply`` while Spark runs: a run killed at any point is undone by ``wmcheck undo``, which removes what
Spark wrote as a rewind to batch L would (nothing is deleted: the files go into the backup).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from wmcheck.checkpoint.errors import CheckpointError, RefusedError, arg
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.repair import safety
from wmcheck.checkpoint.repair._hooks import current
from wmcheck.checkpoint.repair.api import _check_fresh, _held, _load, _roots, run, undo_repair
from wmcheck.checkpoint.repair.backup import Backup, clear_journal, new_backup_id, write_journal
from wmcheck.checkpoint.repair.execute import apply
from wmcheck.checkpoint.repair.plan import Plan, dumps
from wmcheck.checkpoint.repair.repartition import (
    RepartitionRequest,
    remove_batch,
    spark_confs,
    spark_version_problem,
)
from wmcheck.checkpoint.repair.requests import RunOptions
from wmcheck.checkpoint.repair.results import RepairResult
from wmcheck.checkpoint.repair.targets import now_ms
from wmcheck.checkpoint.repair_records import APPLYING, UNDONE, find_interrupted
from wmcheck.checkpoint.repartitions import partitions_of


@dataclass(frozen=True)
class StoreCount:
    """State rows of one operator store, read with Spark's state reader before and after."""

    operator_id: int
    store: str
    before: int
    after: int


@dataclass(frozen=True)
class Verification:
    """What wmcheck checked after Spark's repartition: ``wmcheck check`` and the state row counts."""

    errors: tuple[str, ...]
    """``CODE path`` of every error ``wmcheck check`` finds (with the file sink when given)."""
    warnings: tuple[str, ...]
    """Its warnings (after a scale-down: WM019, the partitions above the new count)."""
    counts: tuple[StoreCount, ...]
    partitions: int | None
    """The partition count the next batch runs with."""

    @property
    def ok(self) -> bool:
        return not self.errors and all(c.before == c.after for c in self.counts)


@dataclass(frozen=True)
class RepartitionResult:
    """The repair's result and, after Spark ran, its verification."""

    result: RepairResult
    verification: Verification | None = None


def pyspark_problem() -> str | None:
    """Why the pyspark of this environment cannot run Spark's repartition (None when it can)."""
    try:
        return spark_version_problem(metadata.version("pyspark"))
    except metadata.PackageNotFoundError:
        return "pyspark is not installed"


def repartition(location: str, request: RepartitionRequest, options: RunOptions | None = None) -> RepartitionResult:
    """Plan (dry run) or run Spark's repartition of the checkpoint at ``location``; see docs/repair.md."""
    options = options or RunOptions()
    interrupted = _interrupted(location, request, options) if options.execute else None
    if options.execute and options.from_plan and request.partitions is None:  # the saved plan's target
        saved = RepartitionRequest.from_plan(_load(options.from_plan, request.command, open_checkpoint(
            location, options.fs_options)))
        request = dataclasses.replace(request, partitions=saved.partitions, file_sink=saved.file_sink)
    if not options.execute or request.partitions is None:
        result, problem = run(location, request, options), pyspark_problem() if request.partitions is not None else None
        return RepartitionResult(dataclasses.replace(result, warnings=(*result.warnings, f"{arg('execute')} would refuse: {problem}"))
                                 if problem else result)
    if request.remote:
        raise CheckpointError("Spark's offline state repartition runs in Spark Classic only, not over Spark Connect",
                              hint=f"leave out {arg('remote')} (use {arg('master')} to pick a cluster)", param="remote")
    problem = pyspark_problem()
    if problem:
        raise CheckpointError(problem, hint="pip install 'pyspark>=4.2'")
    if interrupted is None:
        return _execute(location, request, options)
    undo_repair(location, idle_ms=options.idle_ms, force=options.force, fs_options=options.fs_options)
    done = _execute(location, request, options)
    note = f"repartition {interrupted} was interrupted: undone first (what it wrote is in that backup), then run again"
    return dataclasses.replace(done, result=dataclasses.replace(done.result, warnings=(note, *done.result.warnings)))


def _interrupted(location: str, request: RepartitionRequest, options: RunOptions) -> str | None:
    """The backup id of a killed run of this same repartition, which re-running undoes first: what it (and Spark)
    wrote cannot be finished file by file, Spark's batch is not planned. Refused for any other interrupted repair."""
    pending = find_interrupted(open_checkpoint(location, options.fs_options).fs)
    if pending is None:
        return None
    doc, hint = pending.doc, f"wmcheck undo {location} finishes it"
    if doc.get("command") != RepartitionRequest.command:
        raise RefusedError(f"an interrupted {doc.get('command')} (backup {doc['id']}) must be finished or undone first",
                           hint=f"re-run it, or {hint.replace('finishes', 'undoes')}")
    if pending.action == "undo":
        raise RefusedError(f"an undo of repartition {doc['id']} was interrupted", hint=hint)
    saved = doc.get("request", {}).get("partitions")
    if saved is None and request.partitions is None:  # wmcheck's own steps only: run() finishes them
        return None
    if request.partitions != saved:
        raise RefusedError(f"repartition {doc['id']} ({RepartitionRequest.label(doc.get('request', {}))}) was "
                           f"interrupted: undo it, or re-run it with the same {arg('partitions')}", hint=f"wmcheck undo {location}",
                           param="partitions")
    return str(doc["id"])


def _execute(location: str, request: RepartitionRequest, options: RunOptions) -> RepartitionResult:
    hooks = current()
    now = now_ms() if hooks.now is None else hooks.now
    ckpt = open_checkpoint(location, options.fs_options)
    with _held(ckpt, request.command, now) as lock:
        assert lock is not None
        plan = request.plan(ckpt, now, options.fs_options)
        if options.from_plan:
            _check_fresh(_load(options.from_plan, request.command, ckpt), lambda: plan)
        if options.plan_out:
            Path(options.plan_out).write_text(dumps(plan), encoding="utf-8")
        roots = _roots(ckpt, plan.file_sink, options.fs_options)
        safety.check_idle(ckpt, options.idle_ms, options.force, now)
        safety.refuse_links(roots, plan)
        files_fs = safety.backup_fs(options.backup_dir, ckpt, plan.file_sink, options.fs_options)
        from .session import get_session

        spark, _created = get_session(request.master, dict(request.conf or {}), None)  # before anything is written
        counts = row_counts(spark, location)
        backup_id = new_backup_id(ckpt.fs, plan.command, now)
        backup = Backup(backup_id, ckpt.fs, roots, files_fs.sub(backup_id) if files_fs else None)
        backup.write_plan(plan.to_json())
        backup.write_manifest(plan, APPLYING)
        write_journal(ckpt.fs, backup.backup_id, plan.command, "apply", now)
        try:
            with session_confs(spark, spark_confs(ckpt)):
                spark._streamingCheckpointManager.repartition(location, int(request.partitions or 0))
        except Exception as exc:  # Spark's error, as one line; the attempt's files go into the backup
            moved = remove_batch(open_checkpoint(location, options.fs_options), plan, backup)
            backup.write_manifest(plan, UNDONE, undone_ms=now)
            clear_journal(ckpt.fs)
            raise CheckpointError(
                f"Spark's repartition failed: {spark_error(exc)}; the {moved} file(s) it wrote were moved into backup "
                f"{backup.backup_id}, so the checkpoint is as it was", hint="fix the cause and run the command again"
            ) from None
        apply(plan, backup, now)
        verification = verify(spark, location, plan, counts, options)
    return RepartitionResult(RepairResult(plan, True, plan.warnings, backup.backup_id, backup.files_location), verification)


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
    from .reader import read_stores, spark_errors

    counts = {}
    for read in read_stores(spark, location):
        with spark_errors(read.store, read.target, read.location):
            counts[(read.store.operator_id, read.store.name)] = read.raw.count()
    return counts


def verify(spark, location: str, plan: Plan, before: dict[tuple[int, str], int], options: RunOptions) -> Verification:
    from ..checkpoint.checks.registry import ERROR
    from ..checkpoint.validate import check_location

    findings = check_location(location, plan.file_sink, fs_options=options.fs_options)
    after = row_counts(spark, location)
    counts = tuple(StoreCount(op, store, before.get((op, store), 0), after.get((op, store), 0))
                   for op, store in sorted(set(before) | set(after)))
    ckpt = open_checkpoint(location, options.fs_options)
    return Verification(tuple(f"{f.code} {f.path}" for f in findings if f.severity == ERROR),
                        tuple(f"{f.code} {f.path}" for f in findings if f.severity != ERROR), counts,
                        partitions_of(ckpt, ckpt.last_batch or 0))
