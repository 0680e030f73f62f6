"""``wmcheck repartition``: plan Spark's offline state repartition, refuse where Spark would, run it (the request's
execution strategy) and complete it (the file sink's log entry for the repartition batch, which Spark does not
write).

Spark's ``StreamingCheckpointManager.repartition`` (4.2+) writes batch L+1 of a stopped query (see
:mod:`..repartitions`); what it writes cannot be planned file by file (fresh snapshots, new unique ids),
so the plan describes it and its steps are only wmcheck's own writes. Running it needs Spark: a
:class:`Repartitioner` (:class:`wmcheck.statestore.spark.repartition.SparkRepartitioner`); undoing it is a rewind to
L (everything batch L+1 wrote, moved into the backup), which needs none.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import ClassVar, Protocol

from wmcheck.checkpoint.logs.metadata_log import COMMIT_LOG, FILE_SINK_LOG, OFFSET_LOG
from wmcheck.checkpoint.records import dataclass
from wmcheck.statestore.formats.files import is_temp
from wmcheck.statestore.formats.registry import SST_DIR, SST_SUFFIX, file_name, formats_of

from ..errors import CheckpointError, RefusedError, arg
from ..layout import SINK_LOG
from ..model import COMMITS, OFFSETS, Checkpoint, open_checkpoint
from ..repair_records import UNDONE
from ..repartitions import (
    PROVIDER,
    ROCKSDB_PROVIDER,
    SHUFFLE_PARTITIONS,
    partitions_of,
    repartitions,
    unfinished,
)
from .backup import Backup, clear_journal, write_journal
from .execute import apply, apply_step
from .logs import remove_steps
from .plan import Plan, SparkWrite, Step
from .plan_params import Position, RepartitionParams
from .requests import FsOptions, SinksAsked, repair_sink
from .results import Restored, Verification
from .rewind import FileSink, RewindView, plan_rewind, state_steps
from .strategy import Execution, Run

REPARTITIONED_OPERATORS = (
    "stateStoreSave", "dedupe", "dedupeWithinWatermark", "sessionWindowStateStoreSaveExec", "symmetricHashJoin",
    "flatMapGroupsWithState", "applyInPandasWithState", "transformWithStateExec", "transformWithStateInPandasExec",
    "transformWithStateInPySparkExec",
)
"""The operators Spark's offline repartition moves (StatePartitionKeyExtractorFactory, Spark 4.3); it refuses any
other (aggregation, deduplication with and without a watermark, session windows, stream-stream joins of every
state format, (flat)MapGroupsWithState and applyInPandasWithState, transformWithState in Scala, pandas and Python)."""
UNSUPPORTED_OPERATOR = ("[STATE_REPARTITION_INVALID_CHECKPOINT.UNSUPPORTED_STATEFUL_OPERATOR] ... Unsupported stateful "
                        "operator {name}. Please use a checkpoint with supported stateful operators.")
"""What Spark 4.3 fails with for an operator it has no partition key for, once it reads the state."""
SPARK_FAILS_SOONER = {
    "StatefulStreamlineAggregate": "[STDS_FAILED_TO_READ_STATE_SCHEMA] Failed to read the state schema. Either the "
                                   "file does not exist, or the file is corrupted.",
}
"""Operators Spark 4.3's repartition fails on before it gets to the operator check: what it says instead."""


def unsupported(name: str | None) -> str:
    """Why Spark does not repartition operator ``name``, in its words (after it wrote offsets/L+1)."""
    said = SPARK_FAILS_SOONER.get(name or "", UNSUPPORTED_OPERATOR.format(name=name))
    return f"Spark's repartition does not move its state (Spark 4.3 writes the repartition batch's offsets, then fails: {said})"


JOIN_STATE_FORMAT = "spark.sql.streaming.join.stateFormatVersion"
JOIN_V4_MISPLACED = (
    "Spark 4.3 repartitions it but places the rows of its keyWithTsToValues and tsWithKey stores by their whole state "
    "key (join key and event time), not by the join key: the restarted query misses the rows placed elsewhere and "
    "loses join output, and Spark's state reader fails on the result. Keep the partition count")
"""Why wmcheck refuses a stream-stream join in state format 4 (proven by tests/test_repartition_kinds.py)."""
CHECKPOINT_FORMAT = "spark.sql.streaming.stateStore.checkpointFormatVersion"
EMPTY_SINK_ENTRY = b"v1"
"""A file sink log entry that adds no file (the version line, no entries)."""
HDFS_INSTEAD = (
    "Spark repartitions only RocksDB state. Instead: keep the current partition count, or start the query on a new "
    "checkpoint with the new spark.sql.shuffle.partitions and RocksDB (its state starts empty, so replay enough input "
    "to rebuild it)"
)
StateRows = Mapping[tuple[int, str], int]
"""State rows per (operator id, store name)."""


class Repartitioner(Protocol):
    """What runs Spark's offline state repartition for :class:`RepartitionRequest`
    (:class:`wmcheck.statestore.spark.repartition.SparkRepartitioner`)."""

    def check(self) -> None:
        """Raise a CheckpointError when Spark's repartition cannot run here (pyspark too old, Spark Connect)."""

    def start(self, location: str, fs_options: FsOptions) -> StateRows:
        """Start Spark, before anything is written; the state rows now, for :meth:`verify`."""

    def repartition(self, location: str, partitions: int, confs: Mapping[str, str]) -> str | None:
        """Run Spark's repartition with these session confs; Spark's error in one line when it failed (once no
        task of it runs any more: else a CheckpointError, leaving the repair interrupted), None when it succeeded."""

    def verify(self, location: str, plan: Plan, before: StateRows, fs_options: FsOptions) -> Verification:
        """What the repartitioned checkpoint looks like: ``wmcheck check`` and the state rows against ``before``."""


@dataclass(frozen=True)
class RepartitionRequest(SinksAsked):
    """Move a stopped query's state to ``partitions`` partitions with Spark's repartition (None: only complete a
    repartition Spark already made, writing the sink log entries it lacks). ``runner`` runs Spark (needed to
    execute a repartition, not to plan it or to complete one)."""

    command: ClassVar[str] = "repartition"
    partitions: int | None = None
    file_sink: str | None = None
    runner: Repartitioner | None = field(default=None, compare=False)

    def plan(self, ckpt: Checkpoint, now: int, fs_options: FsOptions) -> Plan:
        return self.with_sinks(plan_repartition(ckpt, self.partitions, sink=repair_sink(self.file_sink, ckpt, fs_options),
                                                created_ms=now), ckpt, fs_options)

    @classmethod
    def from_plan(cls, plan: Plan) -> RepartitionRequest:
        from .sink_effects import asked_of

        return cls(partitions=plan.params(RepartitionParams).partitions, file_sink=plan.file_sink,
                   **asked_of(plan))  # type: ignore[arg-type]

    def conflicts_with(self, plan: Plan) -> bool:
        return plan.params(RepartitionParams).partitions != self.partitions

    def execution(self) -> Execution:
        return SparkBatch(self.runner)

    @staticmethod
    def undo_unplanned(ckpt: Checkpoint, plan: Plan, backup: Backup, now: int) -> list[Restored]:
        return undo_spark_batch(ckpt, plan, backup, now)


@dataclass
class SparkBatch(Execution):
    """Spark writes the repartition batch, then the plan's steps (the sink log entries) are applied and the result
    verified. When Spark fails, what it wrote goes into the backup and the repair is recorded as undone."""

    runner: Repartitioner | None
    before: StateRows | None = None

    def check(self, plan: Plan, force: bool = False) -> None:
        if plan.params(RepartitionParams).partitions is None:
            return
        if self.runner is None:
            raise CheckpointError("running Spark's repartition needs a runner: RepartitionRequest(runner="
                                  "wmcheck.statestore.spark.repartition.SparkRepartitioner())")
        self.runner.check()

    def needed(self, plan: Plan) -> bool:
        return bool(plan.steps) or plan.params(RepartitionParams).partitions is not None

    def prepare(self, ckpt: Checkpoint, plan: Plan, fs_options: FsOptions) -> None:
        if self.runner is not None and plan.params(RepartitionParams).partitions is not None:
            self.before = self.runner.start(ckpt.location, fs_options)

    def carry_out(self, run: Run) -> Verification | None:
        partitions = run.plan.params(RepartitionParams).partitions
        if partitions is None:
            return super().carry_out(run)
        assert self.runner is not None and self.before is not None
        ckpt, plan, backup = run.ckpt, run.plan, run.backup
        write_journal(ckpt.fs, backup.backup_id, plan.command, "apply", run.now)
        run.guard()
        error = self.runner.repartition(ckpt.location, int(partitions), spark_confs(ckpt))
        if error is not None:  # the attempt's files go into the backup
            moved = remove_batch(open_checkpoint(ckpt.location, run.fs_options), plan, backup)
            backup.set_status(UNDONE, undone_ms=run.now)
            clear_journal(ckpt.fs)
            raise CheckpointError(f"Spark's repartition failed: {error}; the {moved} file(s) it wrote were moved into "
                                  f"backup {backup.backup_id}, so the checkpoint is as it was",
                                  hint="fix the cause and run the command again")
        apply(plan, backup, run.now, run.fail_after)  # no guard: Spark's batch was written just now, by the repair
        return self.runner.verify(ckpt.location, plan, self.before, run.fs_options)

    def restarts(self, plan: Plan) -> bool:
        return plan.params(RepartitionParams).batch is not None


def spark_confs(ckpt: Checkpoint) -> dict[str, str]:
    """The session confs Spark's repartition needs: the state store confs pinned in the last offsets, and the
    checkpoint format version, which Spark does not pin but refuses to repartition without
    (STATE_CHECKPOINT_FORMAT_VERSION_MISMATCH): 2 when the commit log is v2."""
    confs = {k: str(v) for k, v in ckpt.conf.items() if k.startswith("spark.sql.streaming.stateStore.")}
    done = ckpt.last_committed_batch
    if CHECKPOINT_FORMAT not in confs and done is not None:
        confs[CHECKPOINT_FORMAT] = "2" if ckpt.commit(done).version >= 2 else "1"
    return confs


def operator_notes(ckpt: Checkpoint, current: int) -> list[str]:
    out = []
    for op in ckpt.operators:
        files = [f for p in op.partitions for f in p.files]
        out.append(f"operator {op.operator_id} ({op.name or 'unknown'}): stores {', '.join(op.stores)}; "
                   f"{current} partitions; {len(files)} state files, {sum(p.bytes for p in op.partitions)} bytes")
    return out


def refusals(ckpt: Checkpoint, partitions: int) -> list[str]:
    """Why Spark would refuse (or wmcheck cannot vouch for) repartitioning this checkpoint now."""
    done, last = ckpt.last_committed_batch, ckpt.last_batch
    stuck = unfinished(ckpt)
    if stuck is not None:
        return [f"batch {stuck.batch} is an unfinished repartition ({stuck.from_partitions} -> {stuck.to_partitions}); "
                f"run wmcheck rewind CKPT --to-batch {stuck.batch - 1} --execute first (wmcheck check: WM035)"]
    if done is None:
        return ["no batch is committed yet: run the query until it commits a batch"]
    if last != done:
        return [f"batch {last} is planned but not committed: let the query finish it (an availableNow trigger stops "
                f"after a complete batch), or wmcheck rewind CKPT --to-batch {done}"]
    out = []
    provider = str(ckpt.conf.get(PROVIDER, "")) or "the default HDFS-backed provider"
    if provider != ROCKSDB_PROVIDER:
        out.append(f"the state store is {provider}: {HDFS_INSTEAD}")
    if not ckpt.operators:
        out.append("the query has no stateful operator: nothing to repartition (change spark.sql.shuffle.partitions freely)")
    for op in ckpt.operators:
        if op.metadata is None:
            out.append(f"operator {op.operator_id} has no operator metadata (written by Spark 4.0+): Spark cannot "
                       "repartition it; run the query once with Spark 4.2+ first")
        elif op.name not in REPARTITIONED_OPERATORS:
            out.append(f"operator {op.operator_id} is {op.name}: {unsupported(op.name)}")
        elif op.name == "symmetricHashJoin" and str(ckpt.conf.get(JOIN_STATE_FORMAT, "")) == "4":
            out.append(f"operator {op.operator_id} is a stream-stream join in state format 4: {JOIN_V4_MISPLACED}")
    if partitions == partitions_of(ckpt, done):
        out.append(f"the checkpoint already has {partitions} partitions (Spark: SHUFFLE_PARTITIONS_ALREADY_MATCH)")
    return out


def sink_entry_step(sink: FileSink, batch: int) -> Step:
    """Write the empty log entry of ``batch`` (and its Hadoop checksum) into the sink's ``_spark_metadata``."""
    return Step("write", "sink", FILE_SINK_LOG.path(batch), "sink", f"batch {batch} repartitioned the state and wrote no "
                "output: compaction of the sink log needs its entry", None, None, None, EMPTY_SINK_ENTRY, True, None)


def missing_sink_entries(ckpt: Checkpoint, sink: FileSink | None) -> list[int]:
    """Committed repartition batches the sink log has neither as its own file nor in a later compact file."""
    if sink is None:
        return []
    names = {i.name for i in sink.fs.list_dir(SINK_LOG)}
    compacts = [int(n.split(".")[0]) for n in names if n.endswith(".compact") and n.split(".")[0].isdigit()]
    return [r.batch for r in repartitions(ckpt) if r.committed and str(r.batch) not in names
            and not any(c >= r.batch for c in compacts)]


def plan_repartition(ckpt: Checkpoint, partitions: int | None, *, sink: FileSink | None = None,
                     created_ms: int = 0) -> Plan:
    """The plan of a repartition to ``partitions`` (None: complete the repartitions Spark made); RefusedError
    when Spark would refuse."""
    done = ckpt.last_committed_batch
    before = Position(ckpt.last_batch, done, watermark_ms=ckpt.watermark_ms)
    current = partitions_of(ckpt, done) if done is not None else None
    if partitions is None:
        lacking = missing_sink_entries(ckpt, sink)
        if sink is None:
            raise CheckpointError(f"nothing to do without {arg('partitions', 'N')} or {arg('file_sink', 'PATH')}",
                                  hint=f"{arg('partitions', 'N')} repartitions; {arg('file_sink', 'PATH')} alone completes a "
                                       "repartition Spark made (its sink log entry)", param="partitions")
        steps = tuple(sink_entry_step(sink, b) for b in lacking)
        return Plan("repartition", ckpt.location, sink.location, RepartitionParams(None, current, None),
                    before, before, steps, created_ms=created_ms,
                    notes=(f"completes Spark's repartition batch(es) {', '.join(map(str, lacking))}: the sink log entry "
                           "Spark did not write" if lacking else "the file sink log lacks no repartition batch",))
    if partitions < 1:
        raise CheckpointError(f"{arg('partitions')} must be at least 1, not {partitions}", param="partitions")
    reasons = refusals(ckpt, partitions)
    if reasons:
        raise RefusedError(f"cannot repartition to {partitions}: {reasons[0]}"
                           + (f" (and {len(reasons) - 1} more problems)" if len(reasons) > 1 else ""),
                           hint="; ".join(reasons[1:3]) or "see docs/repair.md#wmcheck-repartition")
    assert done is not None and current is not None
    batch = done + 1
    steps = tuple(sink_entry_step(sink, b) for b in [*missing_sink_entries(ckpt, sink), batch]) if sink else ()
    written = (f"Spark writes batch {batch}: offsets/{batch} (offsets/{done} with {SHUFFLE_PARTITIONS}={partitions}), "
               f"a snapshot of state version {batch + 1} in each of partitions 0..{partitions - 1} of every operator, "
               f"commits/{batch}" + (", state/<op>/_metadata/v2/" + str(batch) if any(
                   o.metadata is not None and getattr(o.metadata, "version", 1) == 2 for o in ckpt.operators) else ""))
    needs = ("Spark requires: pyspark 4.2+ (Spark Classic), the RocksDB provider, operator metadata, a stopped query "
             "whose last batch is committed; session confs from the checkpoint: "
             + ", ".join(f"{k}={v}" for k, v in sorted(spark_confs(ckpt).items())))
    warnings = () if sink else (
        f"no {arg('file_sink')} given: a file sink's log gets no entry for the repartition batch, and the sink log's next "
        "compaction fails (wmcheck check --file-sink: WM036)",)
    return Plan(
        "repartition", ckpt.location, sink.location if sink else None,
        RepartitionParams(partitions, current, batch),
        before,
        Position(batch, batch, watermark_ms=ckpt.watermark_ms, next_batch_partitions=partitions),
        steps, warnings, created_ms,
        notes=(f"{current} -> {partitions} partitions", *operator_notes(ckpt, current), written, needs),
        spark_writes=spark_writes(ckpt, batch, partitions),
    )


ROCKSDB_BASE = formats_of("rocksdb")[0]
"""The snapshot format Spark's repartition writes (RocksDB's ``V.zip``)."""


def spark_writes(ckpt: Checkpoint, batch: int, partitions: int) -> tuple[SparkWrite, ...]:
    """What Spark's repartition writes as batch ``batch`` (L+1) of the checkpoint, in the order it writes it: the
    offsets, per operator its v2 metadata and in each new partition a snapshot of every store (state version
    L+2; with checkpoint format v2 a unique id in its name, and its SST files where the partition holds rows),
    then the commit (tests/test_repartition.py, tests/test_repartition_kinds.py compare it with what Spark wrote)."""
    version = batch + 1
    snapshot = file_name(version, ROCKSDB_BASE.kind, "*" if spark_confs(ckpt).get(CHECKPOINT_FORMAT) == "2" else None)
    out = [SparkWrite(OFFSET_LOG.path(batch), "offsets", f"offsets/{batch - 1} with {SHUFFLE_PARTITIONS}={partitions}")]
    for op in ckpt.operators:
        top = f"state/{op.operator_id}"
        if op.metadata is not None and getattr(op.metadata, "version", 1) == 2:
            out.append(SparkWrite(f"{top}/_metadata/v2/{batch}", "state", "the operator's metadata of the batch"))
        stores = sorted({(p.store, p.directory) for p in op.partitions if p.partition == 0})
        for partition in range(partitions):
            for store, directory in stores:
                where = f"{top}/{partition}{directory[len(f'{top}/0'):]}"
                out += [SparkWrite(f"{where}/{snapshot}", "state", f"a snapshot of state version {version}: the {store} "
                                   f"rows of partition {partition} of {partitions}")]
                if _checksum_files(ckpt, directory):
                    out.append(SparkWrite(f"{where}/{snapshot}.crc", "state", "the snapshot's checksum file (the "
                                          "store's state files have them)"))
                out.append(SparkWrite(f"{where}/{SST_DIR}/*{SST_SUFFIX}", "state", "the snapshot's SST files, where the partition "
                                      "holds rows (Spark names them)", optional=True))
    out.append(SparkWrite(COMMIT_LOG.path(batch), "commits", f"batch {batch} committed"))
    return tuple(out)


def _checksum_files(ckpt: Checkpoint, directory: str) -> bool:
    """Whether a store's snapshots come with a checksum file ``NAME.zip.crc`` (its directory holds one already)."""
    return any(i.name.endswith(f".{ROCKSDB_BASE.kind}.crc") and not i.name.startswith(".") for i in ckpt.fs.list_dir(directory))


def spark_version_problem(version: str) -> str | None:
    """Why this pyspark cannot repartition (None when it can): Spark's repartition came with 4.2."""
    parts = [int(p) if p.isdigit() else 0 for p in version.split(".")[:2]]
    if tuple(parts + [0] * (2 - len(parts))) >= (4, 2):
        return None
    return f"pyspark {version} is installed: Spark's offline state repartition needs pyspark 4.2 or newer"


def batch_steps(ckpt: Checkpoint, plan: Plan) -> list[Step]:
    """Everything the repartition batch (the plan's ``batch``) wrote, as a rewind to the batch before removes it: its
    offsets and commit, state files of the versions after, their orphaned SSTs, later operator metadata; and the
    temp files of writes a kill interrupted (made since the repair started)."""
    batch = plan.params(RepartitionParams).batch
    assert batch is not None
    temps = [i for folder in (OFFSETS, COMMITS) for i in ckpt.fs.list_dir(folder) if is_temp(i.name)]
    temps += ckpt.state_layout.temp_files
    steps = [Step("remove", "checkpoint", i.path, "temp", "left by an interrupted write of the repartition", i.size,
                  i.mtime_ms) for i in temps if i.mtime_ms >= plan.created_ms]
    crcs = {i.path: i for i in ckpt.state_layout.crc_files}
    if ckpt.last_batch is not None and ckpt.last_batch >= batch:
        steps = list(plan_rewind(ckpt, batch - 1, keep_source_log=True, restoring=True).steps) + steps
    else:  # an undo killed after it removed the batch's logs: the logs' sidecars, and what a rewind to the batch
        # before removes from state/ (the state versions the batch wrote, their SSTs, its operator metadata v2)
        for folder in (COMMITS, OFFSETS):
            steps += [Step("remove", "checkpoint", i.path, folder, f"checksum of {folder}/{batch}", i.size, i.mtime_ms)
                      for i in ckpt.fs.list_dir(folder) if i.name == f".{batch}.crc"]
        steps += state_steps(RewindView(ckpt), batch - 1, [])
    planned = {s.path for s in steps}
    for info in sorted((i for op in ckpt.state_layout.operators for p in op.partitions for i in p.sst_files
                        if i.mtime_ms >= plan.created_ms and i.path not in planned), key=lambda i: i.path):
        steps += remove_steps("checkpoint", info, crcs.get, "state", "SST of a snapshot the killed repartition did "
                              "not finish (no snapshot references it)")
    planned = {s.path for s in steps}
    steps += [Step("remove", "checkpoint", i.path, "state", "checksum left by a killed undo (its file is in the backup)",
                   i.size, i.mtime_ms) for i in sorted(crcs.values(), key=lambda i: i.path)
              if i.mtime_ms >= plan.created_ms and i.path not in planned]
    return steps


def remove_batch(ckpt: Checkpoint, plan: Plan, backup: Backup) -> int:
    """Move what the repartition batch wrote into the backup (idempotent); returns how many files."""
    steps = batch_steps(ckpt, plan)
    for step in steps:
        apply_step(step, backup, False)
    return len(steps)


def undo_spark_batch(ckpt: Checkpoint, plan: Plan, backup: Backup, now: int) -> list[Restored]:
    """The first part of undoing a repartition: what Spark wrote goes into the backup (journaled as an undo)."""
    batch = plan.params(RepartitionParams).batch
    if batch is None:
        return []
    if ckpt.last_batch is not None and ckpt.last_batch > batch:
        raise RefusedError(f"the query ran since the repartition (batch {ckpt.last_batch} exists)",
                           hint=f"wmcheck rewind CKPT --to-batch {batch - 1} rolls it back instead")
    steps = batch_steps(ckpt, plan)
    write_journal(ckpt.fs, backup.backup_id, plan.command, "undo", now)
    for step in steps:
        apply_step(step, backup, False)
    return [Restored(-1, "remove", "checkpoint", s.path, "removed (written by Spark's repartition)") for s in steps]
