"""The sink-side step of an executed rewind: after the checkpoint's steps (before the backup is marked applied, so a
kill in between leaves the repair journaled and interrupted), the Delta sink's table is restored to the version the
plan names in a commit that sets the query's ``txn`` to the rewind's batch (:mod:`..sinks.delta_restore`); undo
restores it again to the version it had, with the ``txn`` it had. Each half tells from the table's log whether it
is done, so a resumed run or undo does it once."""
from __future__ import annotations

from collections.abc import Mapping

from ..errors import CheckpointError, RefusedError
from ..model import Checkpoint
from ..sinks import SinkEffect, TableRestore
from ..sinks.delta import DeltaTableLog, read_delta_log
from ..sinks.delta_restore import RESTORE, check_deltalake, other_writers_problem, restore_table
from .backup import Backup, write_journal
from .execute import apply
from .plan import Plan
from .results import Restored, Verification
from .strategy import Execution, Run

FsOptions = Mapping[str, str] | None


def table_step(plan: Plan) -> tuple[SinkEffect, TableRestore] | None:
    """The plan's Delta sink section and its restore, when it has one."""
    return next(((s, s.restore) for s in plan.sinks if s.kind == "delta" and s.restore is not None), None)


def _restored_by(log: DeltaTableLog, version: int, query_id: str, txn: int) -> bool:
    """Whether the table's latest version is ``version``, a restore commit setting the query's txn to ``txn``."""
    commit = log.commit(version)
    return (log.version == version and commit is not None and commit.operation == RESTORE
            and commit.txns.get(query_id) == txn)


class DeltaSinkStep(Execution):
    """The plan's steps, then (when the plan restores a Delta sink) the table's restore."""

    def check(self, plan: Plan, force: bool = False) -> None:
        found = table_step(plan)
        if found is None:
            return
        problem = other_writers_problem(found[1])
        if problem and not force:
            raise RefusedError(problem, param="delta_sink")
        check_deltalake()

    def needed(self, plan: Plan) -> bool:
        return bool(plan.steps) or table_step(plan) is not None

    def prepare(self, ckpt: Checkpoint, plan: Plan, fs_options: FsOptions) -> None:
        found = table_step(plan)
        if found is None:
            return
        effect, restore = found
        now = read_delta_log(effect.location, fs_options).version
        if now != restore.from_version:
            raise RefusedError(f"the Delta table is at version {now}, not {restore.from_version} as when the rewind "
                               "was planned: something wrote to it since", param="delta_sink",
                               hint="stop every writer of the table, then plan again")

    def carry_out(self, run: Run) -> Verification | None:
        found = table_step(run.plan)
        then = (lambda: _restore(found[0], found[1], run.fs_options)) if found else None
        apply(run.plan, run.backup, run.now, run.fail_after, resume=run.resume, guard=run.guard, then=then)
        return None


def _restore(effect: SinkEffect, restore: TableRestore, fs_options: FsOptions) -> None:
    log = read_delta_log(effect.location, fs_options)
    if _restored_by(log, restore.from_version + 1, effect.app_id, restore.txn):
        return  # a killed run restored it already
    if log.version != restore.from_version:
        raise CheckpointError(f"the Delta table is at version {log.version}, not {restore.from_version} as planned: "
                              "the checkpoint is rewound, the table is not restored", path=effect.location,
                              hint="stop every writer of the table; 'wmcheck undo' reverts the checkpoint")
    restore_table(effect.location, restore.to_version, effect.app_id, restore.txn)


def undo_table(ckpt: Checkpoint, plan: Plan, backup: Backup, now: int) -> list[Restored]:
    """Restore the Delta table a rewind restored to the version it had before, with the query's txn as it was
    (journaled as an undo first); nothing when the repair never got to the table or an undo already restored it."""
    found = table_step(plan)
    if found is None:
        return []
    effect, restore = found
    log = read_delta_log(effect.location)
    before = restore.from_version
    if log.version == before or _restored_by(log, before + 2, effect.app_id, restore.txn_before):
        return []
    if not _restored_by(log, before + 1, effect.app_id, restore.txn):
        raise RefusedError(f"the Delta table is at version {log.version}: something wrote to it after the repair's "
                           f"restore (version {before + 1})", path=effect.location, param="delta_sink",
                           hint=f"nothing was changed; stop the writer: before the repair the table was at version "
                                f"{before}, the query's txn {restore.txn_before}")
    write_journal(ckpt.fs, backup.backup_id, plan.command, "undo", now)
    version = restore_table(effect.location, before, effect.app_id, restore.txn_before)
    return [Restored(-1, "write", "sink", effect.location,
                     f"Delta table restored to version {before} (as version {version}, txn {restore.txn_before})")]
