"""What ``compat`` found: frozen dataclasses, from the verdict down to the rows that changed."""
from __future__ import annotations

from dataclasses import field
from typing import Any, Mapping

from wmcheck.checkpoint.records import dataclass

RESTARTS, REFUSED = "restarts", "refused"
EXIT_SAME, EXIT_CHANGES, EXIT_REFUSED = 0, 1, 2


@dataclass(frozen=True)
class FieldChange:
    """One field of a schema, old and new side by side (``None``: absent on that side), with what changed:
    ``same``, ``added``, ``removed``, ``type`` or ``nullable``."""

    name: str
    old: str | None
    new: str | None
    change: str


@dataclass(frozen=True)
class SchemaChange:
    """A state schema (or the output's) that differs between the checkpoint and the new query."""

    operator_id: int | None
    store: str | None
    part: str
    """``key``, ``value`` or ``output``; for transformWithState the column family: ``value of count``."""
    fields: tuple[FieldChange, ...]
    old: str
    new: str

    @property
    def changed(self) -> tuple[FieldChange, ...]:
        return tuple(f for f in self.fields if f.change != "same")


@dataclass(frozen=True)
class OperatorChange:
    """The stateful operators the checkpoint has and the new query has, by operator id."""

    operator_id: int
    old: str | None
    new: str | None


@dataclass(frozen=True)
class Rule:
    """The rule of Spark's guide that the change falls under."""

    text: str
    url: str


@dataclass(frozen=True)
class Refusal:
    """Why Spark refused the new query on this checkpoint: its own error and a translation."""

    error_class: str
    """Spark's error condition (e.g. ``STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE``), else the failing Java class."""
    message: str
    """Spark's message (without the query's plan dump)."""
    explanation: str
    operator_id: int | None = None
    operator: str | None = None
    store: str | None = None
    schema: SchemaChange | None = None
    operators: tuple[OperatorChange, ...] = ()
    sources: tuple[int, int] | None = None
    """(sources in the checkpoint, sources the new query reads), when their number changed."""
    rule: Rule | None = None


@dataclass(frozen=True)
class RowSample:
    """A row only one side has (``side``: ``old`` or ``new``), as JSON values."""

    side: str
    row: Mapping[str, Any]


@dataclass(frozen=True)
class OutputChange:
    """The re-run batch's output against what the old code wrote for that batch."""

    sink: str
    """``file`` (read through its log), ``captured`` (the batch a foreachBatch or other sink was handed)."""
    new_rows: int
    old_rows: int | None
    """None when the old output cannot be read back (see ``note``)."""
    only_old: int | None
    only_new: int | None
    old_columns: tuple[str, ...] = ()
    new_columns: tuple[str, ...] = ()
    samples: tuple[RowSample, ...] = ()
    note: str | None = None
    changed_types: tuple[str, ...] = ()
    """``column: old type -> new type`` of the columns both outputs have (where the old files carry types)."""

    @property
    def differs(self) -> bool:
        """Other rows, or other columns: a batch that wrote nothing is compared by the columns the old code wrote."""
        return bool(self.only_old or self.only_new or self.changed_types) or (
            self.old_columns != self.new_columns and self.old_rows is not None)


@dataclass(frozen=True)
class StateChange:
    """One store's state after the re-run batch against the state the old code left (same version)."""

    operator_id: int
    store: str
    old_rows: int | None
    new_rows: int | None
    added: int = 0
    removed: int = 0
    changed: int = 0
    samples: tuple[RowSample, ...] = ()
    note: str | None = None

    @property
    def differs(self) -> bool:
        return bool(self.added or self.removed or self.changed)


@dataclass(frozen=True)
class WatermarkDelay:
    """A ``withWatermark`` of the new query (one per input, in plan order): its column, its old delay (from the old
    query's plan in the event log, else the checkpoint's state schema; None: unknown) and its new delay."""

    column: str
    old_ms: int | None
    new_ms: int | None
    sources: tuple[str, ...] = ()
    """The ids of the sources under it (the input it watermarks)."""
    old_from: str | None = None
    """Where the old delay was read: ``the plan of batch N`` (the event log) or ``the state schema``."""


@dataclass(frozen=True)
class LateRows:
    """Rows of the recorded batches the new delay would judge differently from the old one (global watermark)."""

    batches: tuple[int, int]
    rows: int
    old_late: int
    new_late: int
    samples: tuple[RowSample, ...] = ()
    """``old``: dropped before, kept with the new delay; ``new``: kept before, dropped with it."""
    note: str | None = None


@dataclass(frozen=True)
class WatermarkChange:
    """The watermark of the re-run batch, the one after it (old code, new code), delays and the policy."""

    batch_watermark_ms: int
    old_next_ms: int | None
    new_next_ms: int | None
    delays: tuple[WatermarkDelay, ...] = ()
    policy: str | None = None
    """The pinned ``multipleWatermarkPolicy`` (the one a restart keeps)."""
    session_policy: str | None = None
    late: LateRows | None = None
    notes: tuple[str, ...] = ()

    @property
    def differs(self) -> bool:
        return self.old_next_ms != self.new_next_ms or any(d.old_ms != d.new_ms for d in self.delays if d.old_ms is not None)


@dataclass(frozen=True)
class NotFed:
    """A source whose input compat cannot give the next batches (only a file source's files can be), so that the next
    batches were not run: they would read its live input."""

    source_id: str
    kind: str
    reason: str


@dataclass(frozen=True)
class NextBatches:
    """The batches a restart runs next (the input the sources hold now that their logs do not name, and the no-data
    batch that closes windows after it), run by the new code and by the old code (``baseline``) on two scratch copies:
    what each wrote, the old code's output against the new's."""

    baseline: str
    """The old code (``module:function``)."""
    batches: tuple[int, ...]
    """The batches the new code ran (the old code's, when they differ, in ``note``)."""
    output: OutputChange | None
    """None when no batch ran (no new input, a source compat cannot feed: ``not_run``) or a side failed (``note``)."""
    note: str | None = None
    not_run: tuple[NotFed, ...] = ()
    """The sources that kept the next batches from running (each with why)."""

    @property
    def differs(self) -> bool:
        return self.output is not None and self.output.differs


@dataclass(frozen=True)
class SourceNote:
    """What compat knows of one source of the re-run batch."""

    source_id: str
    kind: str
    replayed: bool
    note: str | None = None


@dataclass(frozen=True)
class CompatReport:
    """Will the new query restart on the checkpoint, and what will it change."""

    checkpoint: str
    query: str
    batch: int
    """The batch run with the new code."""
    how: str
    """``rerun``: a committed batch re-run (the copy rewound to the batch before it); ``pending``: the planned batch
    a restart re-runs; ``next``: the batch a restart plans next (the copy as it is)."""
    verdict: str
    """``restarts`` or ``refused``."""
    refusal: Refusal | None = None
    output: OutputChange | None = None
    state: tuple[StateChange, ...] = ()
    schemas: tuple[SchemaChange, ...] = ()
    """State schemas the new query evolved (Spark accepted them): old -> new per store."""
    watermark: WatermarkChange | None = None
    next: NextBatches | None = None
    """With a baseline (the old code): the next batches run by both, on the same input."""
    sources: tuple[SourceNote, ...] = ()
    notes: tuple[str, ...] = field(default=())
    seconds: float = 0.0

    @property
    def changes(self) -> bool:
        """The new code restarts but computes something else: output rows, state rows, state schemas, the
        watermark (the one after the batch, or a delay), or the output of the next batches against the old code's."""
        return self.verdict == RESTARTS and (
            (self.output is not None and self.output.differs) or any(s.differs for s in self.state) or bool(self.schemas)
            or (self.watermark is not None and self.watermark.differs) or (self.next is not None and self.next.differs))

    def exit_code(self, allow_output_change: bool = False) -> int:
        """0 compatible and the same output, 1 compatible but changes (0 with ``allow_output_change``), 2 refused."""
        if self.verdict == REFUSED:
            return EXIT_REFUSED
        return EXIT_CHANGES if self.changes and not allow_output_change else EXIT_SAME
