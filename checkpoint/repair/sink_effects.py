"""The plan's section "what the sink does with the re-run batches": the batch ids a repair makes the query run again
and, per id, what the sink does: a Delta sink (``delta_sink``) skips or writes it (its ``txn``), with the table's
restore ``--execute`` makes so that the skipped ones are written (:mod:`.sink_step`); a Kafka sink (``kafka_sink``,
asked of the broker) writes its records again; a ``foreachBatch`` function is called with it again."""
from __future__ import annotations

import dataclasses
from typing import Mapping

from wmcheck.checkpoint.records import dataclass

from ..errors import CheckpointError, arg
from ..model import Checkpoint
from ..sinks import SinkEffect, file_sink, foreach_batch, kafka
from ..sinks.delta import check_txn_app_id, read_delta_log, rerun_effect
from ..sinks.delta_restore import plan_restore, restore_text
from ..sources.kafka_topics import KafkaTopics
from .plan import Plan
from .rewind import FileSink


@dataclass(frozen=True)
class SinksNamed:
    """The sinks a repair's request names besides a file sink."""

    delta_sink: str | None = None
    kafka_sink: str | None = None
    broker: KafkaTopics | None = None
    foreach_batch: bool = False
    delta_txn_app_id: str | None = None
    """The ``txn`` app id the Delta sink's writer uses (None: the query id)."""

    def any(self) -> bool:
        return self.delta_sink is not None or self.kafka_sink is not None or self.foreach_batch


def rerun_batches(plan: Plan) -> range:
    """The batch ids a plan makes the query run again: after its new last committed batch, up to the old last."""
    before, after = plan.before.last_batch, plan.after.last_committed_batch
    return range((after if after is not None else -1) + 1, (before if before is not None else -1) + 1)


NO_RERUN = "no batch runs again: the sink gets the next batch only"


def with_sink_effects(plan: Plan, ckpt: Checkpoint, named: SinksNamed, fs_options: Mapping[str, str] | None) -> Plan:
    """``plan`` with each named sink's effect added (when the plan runs no batch again, each sink's is that it gets
    the next batch only; a Delta sink's table is read all the same, so that a path that is not one is refused)."""
    if not rerun_batches(plan) and named.any():
        return dataclasses.replace(plan, sinks=(*plan.sinks, *_no_rerun(ckpt, named, fs_options)))
    effects = []
    if named.kafka_sink is not None:
        if named.broker is None:
            raise CheckpointError(f"{arg('kafka_sink')} asks the broker: pass {arg('bootstrap_server', 'HOST:PORT')}",
                                  param="bootstrap_server")
        effects.append(kafka.rerun_effect(ckpt, named.kafka_sink, named.broker, rerun_batches(plan)))
    if named.foreach_batch:
        effects.append(foreach_batch.rerun_effect(ckpt, rerun_batches(plan)))
    plan = dataclasses.replace(plan, sinks=(*plan.sinks, *effects)) if effects else plan
    return _with_delta(plan, ckpt, named, fs_options)


def with_file_sink(plan: Plan, ckpt: Checkpoint, sink: FileSink | None) -> Plan:
    """``plan`` with the file sink's effect (a repair that leaves its log alone: set-watermark)."""
    if sink is None:
        return plan
    meta = ckpt.query_metadata
    query_id = meta.query_id if meta else ""
    batches = rerun_batches(plan)
    effect = (file_sink.rerun_effect(sink.fs, sink.location, query_id, batches) if batches else
              SinkEffect("file", sink.location, query_id, None, (), NO_RERUN))
    return dataclasses.replace(plan, sinks=(*plan.sinks, effect))


def _no_rerun(ckpt: Checkpoint, named: SinksNamed, fs_options: Mapping[str, str] | None) -> tuple[SinkEffect, ...]:
    meta = ckpt.query_metadata
    query_id = meta.query_id if meta else ""
    out = []
    if named.delta_sink is not None:
        log = read_delta_log(named.delta_sink, fs_options)
        app_id = check_txn_app_id(named.delta_txn_app_id, named.delta_sink)
        out.append(SinkEffect("delta", log.location, query_id, log.txn_version(app_id or query_id), (), NO_RERUN,
                              txn_app_id=app_id))
    if named.kafka_sink is not None:
        out.append(SinkEffect("kafka", named.kafka_sink, query_id, None, (), NO_RERUN))
    if named.foreach_batch:
        out.append(SinkEffect("foreachBatch", "", query_id, None, (), NO_RERUN))
    return tuple(out)


def _with_delta(plan: Plan, ckpt: Checkpoint, named: SinksNamed, fs_options: Mapping[str, str] | None) -> Plan:
    delta_sink, app_id = named.delta_sink, check_txn_app_id(named.delta_txn_app_id, named.delta_sink)
    if delta_sink is None:
        return plan
    meta = ckpt.query_metadata
    if meta is None:
        raise CheckpointError("the checkpoint has no metadata file: its query id, which the Delta sink's txn names, "
                              "is unknown", path="metadata", param="delta_sink")
    log = read_delta_log(delta_sink, fs_options)
    after = plan.after.last_committed_batch
    effect = rerun_effect(log, meta.query_id, rerun_batches(plan), app_id)
    restore = plan_restore(log, effect, after) if after is not None else None
    effect = dataclasses.replace(effect, restore=restore)
    notes = (f"Delta sink: {restore_text(restore, app_id)}",) if restore else ()
    return dataclasses.replace(plan, sinks=(*plan.sinks, effect), notes=(*plan.notes, *notes))


def delta_sink_of(plan: Plan) -> str | None:
    """The Delta sink a plan's section names (None: none)."""
    return next((s.location for s in plan.sinks if s.kind == "delta"), None)


def delta_txn_app_id_of(plan: Plan) -> str | None:
    """The txn app id a plan's Delta sink section is judged by when it is not the query id (None: the query id)."""
    return next((s.txn_app_id for s in plan.sinks if s.kind == "delta"), None)


def asked_of(plan: Plan) -> dict[str, str | bool | None]:
    """The sink parameters a plan's section was made for (to plan it again from a saved plan)."""
    delta = next((s.location for s in plan.sinks if s.kind == "delta"), None)
    topic = next((s.location for s in plan.sinks if s.kind == "kafka"), None)
    return {"delta_sink": delta, "kafka_sink": topic, "foreach_batch": any(s.kind == "foreachBatch" for s in plan.sinks)}
