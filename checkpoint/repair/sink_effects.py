"""The plan's section "what the sink does with the re-run batches": for a Delta sink (``delta_sink``), the batch
ids a repair makes the query run again and, per id, whether Spark's Delta sink skips or writes it (its ``txn``), and
the table's restore ``--execute`` makes so that the skipped ones are written (:mod:`.sink_step`)."""
from __future__ import annotations

import dataclasses
from typing import Mapping

from ..errors import CheckpointError
from ..model import Checkpoint
from ..sinks.delta import read_delta_log, rerun_effect
from ..sinks.delta_restore import plan_restore, restore_text
from .plan import Plan


def with_sink_effects(plan: Plan, ckpt: Checkpoint, delta_sink: str | None,
                      fs_options: Mapping[str, str] | None) -> Plan:
    """``plan`` with the Delta sink's effect added (unchanged without ``delta_sink``)."""
    if delta_sink is None:
        return plan
    meta = ckpt.query_metadata
    if meta is None:
        raise CheckpointError("the checkpoint has no metadata file: its query id, which the Delta sink's txn names, "
                              "is unknown", path="metadata", param="delta_sink")
    log = read_delta_log(delta_sink, fs_options)
    before, after = plan.before.last_batch, plan.after.last_committed_batch
    rerun = range((after if after is not None else -1) + 1, (before if before is not None else -1) + 1)
    effect = rerun_effect(log, meta.query_id, rerun)
    restore = plan_restore(log, effect, after) if after is not None else None
    effect = dataclasses.replace(effect, restore=restore)
    notes = (f"Delta sink: {restore_text(restore)}",) if restore else ()
    return dataclasses.replace(plan, sinks=(*plan.sinks, effect), notes=(*plan.notes, *notes))


def delta_sink_of(plan: Plan) -> str | None:
    """The Delta sink a plan's section names (None: none)."""
    return next((s.location for s in plan.sinks if s.kind == "delta"), None)
