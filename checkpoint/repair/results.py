"""What repairs, ``undo`` and ``backups`` return: frozen dataclasses (the CLI turns them into JSON, rows, text)."""
from __future__ import annotations

from wmcheck.checkpoint.records import dataclass

from .plan import Action, Plan, Root


@dataclass(frozen=True)
class Resumed:
    """An interrupted repair found (and with ``execute`` finished) by re-running it."""

    backup_id: str
    steps_done_before: int
    steps: int


@dataclass(frozen=True)
class StoreCount:
    """State rows of one operator store, read with Spark's state reader before and after a repartition."""

    operator_id: int
    store: str
    before: int
    after: int


@dataclass(frozen=True)
class Verification:
    """What was checked after Spark's repartition: ``wmcheck check`` and the state row counts."""

    errors: tuple[str, ...]
    """``CODE path`` of every error ``wmcheck check`` finds (with the file sink when given)."""
    warnings: tuple[str, ...]
    """Its warnings (after a scale-down: WM019, the partitions above the new count)."""
    counts: tuple[StoreCount, ...]
    partitions: int | None
    """The partition count the next batch runs with."""
    unreadable: str | None = None
    """Spark's state reader's error on the repartitioned state (then ``counts`` is empty)."""

    @property
    def ok(self) -> bool:
        return not self.errors and self.unreadable is None and all(c.before == c.after for c in self.counts)


@dataclass(frozen=True)
class RepairResult:
    """A repair's plan and what became of it; ``warnings`` are the plan's plus the run's own."""

    plan: Plan
    executed: bool
    warnings: tuple[str, ...]
    backup_id: str | None = None
    backup: str | None = None
    """Where the backup's files are (None on a dry run or when nothing needed changing)."""
    resumed: Resumed | None = None
    verification: Verification | None = None
    """What the repair verified after it ran (Spark's repartition), None otherwise."""


@dataclass(frozen=True)
class Restored:
    """One step an undo reverted: ``restored`` is ``moved back`` or ``rewritten``."""

    step: int
    """The step's index in the plan (-1: a file the repair wrote that its plan could not list)."""
    action: Action
    root: Root
    path: str
    restored: str


@dataclass(frozen=True)
class UndoResult:
    """A finished undo: the backup, what it restored, and the checkpoint's state now (as before the repair)."""

    backup_id: str
    command: str
    checkpoint: str
    file_sink: str | None
    status: str
    was: str
    restored: tuple[Restored, ...]
    last_batch: int | None
    last_committed_batch: int | None
    watermark_ms: int | None
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class BackupRow:
    """One backup as ``wmcheck backups`` lists it."""

    backup_id: str
    command: str
    status: str
    created_ms: int | None
    target: str
    last_committed_before: int | None
    watermark_before_ms: int | None
    steps: int | None
    files: str
