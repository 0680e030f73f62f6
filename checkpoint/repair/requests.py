"""What a repair is asked to do: one frozen request per repair, each with its planner and its execution
strategy, and the run options.

Adding a repair is one request class (``command``, ``plan``, ``from_plan``, ``label``, and ``execution`` when
its plan does not list every change) listed in :mod:`.registry`, plus its planner module.
"""
from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, ClassVar, Mapping

from wmcheck.checkpoint.records import dataclass

from ..activity import DEFAULT_IDLE_MS
from ..errors import CheckpointError, arg, on_param

if TYPE_CHECKING:
    from ..model import Checkpoint
    from .backup import Backup
    from .plan import Plan
    from .results import Restored
    from .rewind import FileSink
    from .sink_effects import SinksNamed
    from .strategy import Execution

# The planners are imported when a request plans, not with the request: check's findings name requests as their
# fixes, and ``show`` runs check's cheap part, so the requests stay light to import.

FsOptions = Mapping[str, str] | None


@dataclass(frozen=True)
class RunOptions:
    """How a repair runs: a dry run unless ``execute``; a saved plan; the idle check; where backups go."""

    execute: bool = False
    from_plan: str | None = None
    """A plan saved by ``plan_out``: applied only if planning the same request now gives the same steps."""
    plan_out: str | None = None
    idle_ms: int = DEFAULT_IDLE_MS
    force: bool = False
    backup_dir: str | None = None
    fs_options: FsOptions = None


class RepairRequest:
    """One repair's parameters; ``plan`` makes its plan without changing anything."""

    command: ClassVar[str]

    def plan(self, ckpt: Checkpoint, now: int, fs_options: FsOptions) -> Plan:
        raise NotImplementedError

    @classmethod
    def from_plan(cls, plan: Plan) -> "RepairRequest":
        """The request a plan of this command was made for (to plan it again and compare)."""
        raise NotImplementedError

    def conflicts_with(self, plan: Plan) -> bool:
        """Whether this request asks for something else than the (interrupted) ``plan``."""
        return False

    def execution(self) -> Execution:
        """How an executed plan of this request changes the checkpoint (made afresh for each run)."""
        from .strategy import STEPS

        return STEPS

    @staticmethod
    def undo_unplanned(ckpt: Checkpoint, plan: Plan, backup: Backup, now: int) -> list[Restored]:
        """What an undo of such a repair moves into the backup before it reverts the plan's steps: the files the
        repair wrote that its plan could not list (none by default); one entry per file, as ``undo`` reports."""
        return []


@dataclass(frozen=True)
class SinksAsked(RepairRequest):
    """The query's sinks besides a file sink, for a repair's section "what the sink does" (``set-watermark``,
    ``repartition``, ``reset-offsets``; ``rewind`` names the same parameters)."""

    delta_sink: str | None = None
    kafka_sink: str | None = None
    foreach_batch: bool = False
    bootstrap_server: str | None = None
    """The Kafka broker ``kafka_sink`` is asked of (when a batch runs again)."""
    kafka_options: Mapping[str, str] | None = field(default=None, compare=False)

    def sinks_named(self) -> SinksNamed:
        from ..sources.kafka_topics import KafkaTopics
        from .sink_effects import SinksNamed

        broker = KafkaTopics(self.bootstrap_server, self.kafka_options) if self.bootstrap_server else None
        return SinksNamed(self.delta_sink, self.kafka_sink, broker, self.foreach_batch)

    def with_sinks(self, plan: Plan, ckpt: Checkpoint, fs_options: FsOptions) -> Plan:
        """``plan`` with the section for each sink named."""
        from .sink_effects import with_sink_effects

        return with_sink_effects(plan, ckpt, self.sinks_named(), fs_options)


@dataclass(frozen=True)
class RewindRequest(RepairRequest):
    """Make an earlier batch the last committed one: exactly one of ``to_batch``, ``to_watermark``,
    ``to_time``, ``shift`` (none when resuming an interrupted rewind or with ``from_plan``)."""

    command: ClassVar[str] = "rewind"
    to_batch: int | None = None
    to_watermark: str | None = None
    to_time: str | None = None
    shift: int | None = None
    file_sink: str | None = None
    keep_next_offsets: bool = False
    keep_source_log: bool = False
    delta_sink: str | None = None
    """The query's Delta sink table: the plan says what it does with the re-run batches, and an executed rewind
    restores it so that they are written (:mod:`.sink_step`)."""
    delta_txn_app_id: str | None = None
    """The ``txn`` app id the Delta sink's writer uses (a foreachBatch function's ``txnAppId`` writer option; None:
    the query id, as Spark's Delta sink writes): the plan and the restore judge the table by it."""
    kafka_sink: str | None = None
    """The topic of the query's Kafka sink: the plan counts the records the re-run batches write again."""
    bootstrap_server: str | None = None
    """The Kafka broker ``kafka_sink`` is asked of."""
    kafka_options: Mapping[str, str] | None = field(default=None, compare=False)
    foreach_batch: bool = False
    """The query writes with foreachBatch: the plan names the batch ids its function sees again."""

    def plan(self, ckpt: Checkpoint, now: int, fs_options: FsOptions) -> Plan:
        from .rewind import plan_rewind
        from .sink_effects import with_sink_effects
        from .targets import resolve_target

        target = resolve_target(ckpt, to_batch=self.to_batch, to_watermark=self.to_watermark, to_time=self.to_time,
                                shift=self.shift, now=now)
        plan = plan_rewind(ckpt, target.batch, sink=repair_sink(self.file_sink, ckpt, fs_options),
                           keep_next_offsets=self.keep_next_offsets, keep_source_log=self.keep_source_log,
                           how=target.how, param=target.param, created_ms=now, sink_named=self.sinks_named().any())
        return with_sink_effects(plan, ckpt, self.sinks_named(), fs_options)

    def sinks_named(self) -> SinksNamed:
        from ..sources.kafka_topics import KafkaTopics
        from .sink_effects import SinksNamed

        broker = KafkaTopics(self.bootstrap_server, self.kafka_options) if self.bootstrap_server else None
        return SinksNamed(self.delta_sink, self.kafka_sink, broker, self.foreach_batch, self.delta_txn_app_id)

    @classmethod
    def from_plan(cls, plan: Plan) -> "RewindRequest":
        from .plan_params import RewindParams
        from .sink_effects import delta_sink_of, delta_txn_app_id_of

        req = plan.params(RewindParams)
        return cls(to_batch=req.batch, file_sink=plan.file_sink, keep_next_offsets=req.keep_next_offsets,
                   keep_source_log=req.keep_source_log, delta_sink=delta_sink_of(plan),
                   delta_txn_app_id=delta_txn_app_id_of(plan))

    def conflicts_with(self, plan: Plan) -> bool:
        from .plan_params import RewindParams

        return self.to_batch is not None and plan.params(RewindParams).batch != self.to_batch

    def execution(self) -> Execution:
        from .sink_step import DeltaSinkStep

        return DeltaSinkStep()

    @staticmethod
    def undo_unplanned(ckpt: Checkpoint, plan: Plan, backup: Backup, now: int) -> list[Restored]:
        """The Delta sink table a rewind restored, restored again (:func:`.sink_step.undo_table`)."""
        from .sink_step import undo_table

        return undo_table(ckpt, plan, backup, now)


@dataclass(frozen=True)
class SetWatermarkRequest(SinksAsked):
    """Set the watermark the next batch starts from. ``watermark``: TIME text (ISO-8601, epoch ms, or a
    duration relative to the current watermark) or epoch ms; ``window``: a duration text or ms."""

    command: ClassVar[str] = "set-watermark"
    watermark: str | int | None = None
    allow_raise: bool = False
    window: str | int | None = None
    file_sink: str | None = None
    """The query's file sink: the plan says what it does with a planned batch run again (its log is left alone)."""

    def plan(self, ckpt: Checkpoint, now: int, fs_options: FsOptions) -> Plan:
        from ..timeutil import parse_duration_ms, parse_time_ms
        from .watermark import plan_set_watermark

        if self.watermark is None:
            raise CheckpointError(f"set-watermark needs {arg('watermark', 'TIME')} (or {arg('from_plan', 'FILE')})",
                                  hint="e.g. " + arg("watermark", '"-2 hours"') + " (relative to the current watermark)",
                                  param="watermark")
        with on_param("watermark"):
            watermark_ms = self.watermark if isinstance(self.watermark, int) else parse_time_ms(
                self.watermark, now_ms=now, watermark_ms=ckpt.watermark_ms, default_anchor="watermark")
        with on_param("window"):
            window_ms = self.window if isinstance(self.window, int) or self.window is None else parse_duration_ms(self.window)
        from .sink_effects import with_file_sink

        plan = plan_set_watermark(ckpt, watermark_ms, allow_raise=self.allow_raise, window_ms=window_ms or None,
                                  created_ms=now)
        return with_file_sink(self.with_sinks(plan, ckpt, fs_options), ckpt,
                              repair_sink(self.file_sink, ckpt, fs_options))

    @classmethod
    def from_plan(cls, plan: Plan) -> "SetWatermarkRequest":
        from .plan_params import WatermarkParams
        from .sink_effects import asked_of

        req = plan.params(WatermarkParams)
        return cls(watermark=req.watermark_ms, allow_raise=req.allow_raise, window=req.window_ms,
                   file_sink=next((s.location for s in plan.sinks if s.kind == "file"), None),
                   **asked_of(plan))  # type: ignore[arg-type]


@dataclass(frozen=True)
class RelocateRequest(RepairRequest):
    """Make a copied or moved checkpoint name its own schema files and, with ``path_map`` (FROM prefix ->
    TO), its logged input files (and ``file_sink``'s output files) where they are now."""

    command: ClassVar[str] = "relocate"
    path_map: Mapping[str, str] | None = None
    file_sink: str | None = None

    def plan(self, ckpt: Checkpoint, now: int, fs_options: FsOptions) -> Plan:
        from .relocate import plan_relocate

        return plan_relocate(ckpt, path_map=self.path_map, sink=repair_sink(self.file_sink, ckpt, fs_options),
                             created_ms=now)

    @classmethod
    def from_plan(cls, plan: Plan) -> "RelocateRequest":
        from .plan_params import RelocateParams

        return cls(path_map=plan.params(RelocateParams).path_map, file_sink=plan.file_sink)


@dataclass(frozen=True)
class UndoRequest:
    """Restore the checkpoint (and file sink) from the backup of the interrupted repair, else of the latest one:
    what :func:`~.api.undo_repair` does (nothing to plan)."""

    command: ClassVar[str] = "undo"


def inside(path: str, parent: str) -> bool:
    """Whether location ``path`` is ``parent`` or lies under it."""
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def repair_sink(location: str | None, ckpt: Checkpoint, fs_options: FsOptions) -> FileSink | None:
    """The file sink directory a repair changes at ``location`` (None: no sink): a file sink
    (:func:`~..locations.open_file_sink`) that lies apart from the checkpoint."""
    from ..locations import open_file_sink
    from .rewind import FileSink

    if location is None:
        return None
    fs = open_file_sink(location, fs_options)
    if inside(fs.uri(), ckpt.location) or inside(ckpt.location, fs.uri()):
        raise CheckpointError(f"the file sink {fs.uri()} and the checkpoint {ckpt.location} overlap",
                              hint="pass the sink directory, not the checkpoint")
    return FileSink(fs, fs.uri())
