"""The plan's section "what the sink does" for a repair that runs no batch id again but moves a Kafka source
(``reset-offsets``): batch L+1 is written with the new end offsets, and the restarted query runs batch L+2 from them.

Moving back, the records between NEW and CURRENT are read again and reach the sink in batch ids it never saw: a
Delta sink writes them (the ids are above its ``txn``: the rows land twice), a Kafka sink writes them again, a
``foreachBatch`` function is called with new ids and records it saw before, a file sink writes them again (its log
holds no entry for the new ids). Moving forward, the records between CURRENT and NEW are never read: no sink gets
them. The counts are the source's records (per partition, from the offsets); a query that filters or aggregates
writes as many rows as its plan makes of them."""
from __future__ import annotations

from typing import Mapping

from wmcheck.checkpoint.records import dataclass

from ..errors import CheckpointError
from ..model import Checkpoint
from ..sinks import SinkAction, SinkBatch, SinkEffect
from ..sinks.delta import read_delta_log
from .reset_offsets import Offsets


@dataclass(frozen=True)
class Rereads:
    """What a reset moves: ``batch``, the first batch id the restarted query runs from the new offsets; per partition
    the records read again (moved back) and skipped (moved forward)."""

    batch: int
    reread: Offsets
    skipped: Offsets

    @classmethod
    def of(cls, batch: int, current: Offsets, new: Offsets) -> "Rereads":
        return cls(batch, {tp: current[tp] - o for tp, o in new.items() if o < current[tp]},
                   {tp: o - current[tp] for tp, o in new.items() if o > current[tp]})

    def counted(self) -> str:
        """The records read again and skipped, per partition, in words."""
        def per(offsets: Offsets) -> str:
            return ", ".join(f"{t}/{p}: {n}" for (t, p), n in sorted(offsets.items()))
        parts = []
        if self.reread:
            parts.append(f"{sum(self.reread.values())} record(s) read again ({per(self.reread)})")
        if self.skipped:
            parts.append(f"{sum(self.skipped.values())} record(s) skipped, never read by the query and never reaching "
                         f"the sink ({per(self.skipped)})")
        return "; ".join(parts) if parts else "no record is read again or skipped"


def reread_effects(ckpt: Checkpoint, moved: Rereads, *, delta_sink: str | None, kafka_sink: str | None,
                   foreach_batch: bool, file_sink: str | None,
                   fs_options: Mapping[str, str] | None) -> tuple[SinkEffect, ...]:
    """Each named sink's effect of a reset: what batch ``moved.batch`` and those after it bring it."""
    meta = ckpt.query_metadata
    query_id = meta.query_id if meta else ""
    count = sum(moved.reread.values())
    action: SinkAction = "duplicate" if count else "write"
    rows = (SinkBatch(moved.batch, action, None, 0, count),)
    ids = f"from batch {moved.batch} on (batch ids the sink never saw)"
    out = []
    if delta_sink is not None:
        out.append(_delta(ckpt, moved, delta_sink, fs_options, ids))
    if kafka_sink is not None:
        said = (f"Spark's Kafka sink writes the records read again to {kafka_sink} a second time {ids}" if count else
                f"the records reach {kafka_sink} once {ids}")
        out.append(SinkEffect("kafka", kafka_sink, query_id, None, rows, f"{said}: {moved.counted()}"))
    if foreach_batch:
        said = (f"the function is called {ids} with records it was called with before under other ids: a plain append "
                "writes them twice, and a writer keyed on the batch id (Delta's txnAppId/txnVersion) writes them too"
                if count else f"the function is called {ids}")
        out.append(SinkEffect("foreachBatch", "", query_id, None, rows, f"{said}: {moved.counted()}"))
    if file_sink is not None:
        said = (f"the file sink writes the records read again a second time {ids}: its log has no entry for them"
                if count else f"the file sink writes the records {ids}")
        out.append(SinkEffect("file", file_sink, query_id, None, rows, f"{said}: {moved.counted()}"))
    return tuple(out)


def _delta(ckpt: Checkpoint, moved: Rereads, location: str, fs_options: Mapping[str, str] | None,
           ids: str) -> SinkEffect:
    meta = ckpt.query_metadata
    if meta is None:
        raise CheckpointError("the checkpoint has no metadata file: its query id, which the Delta sink's txn names, "
                              "is unknown", path="metadata", param="delta_sink")
    log = read_delta_log(location, fs_options)
    committed = log.txn_version(meta.query_id)
    count = sum(moved.reread.values())
    if committed is not None and moved.batch <= committed:
        return SinkEffect("delta", log.location, meta.query_id, committed,
                          (SinkBatch(moved.batch, "skip", None, 0, count),),
                          f"the table's txn for this query is at {committed}: Spark's Delta sink skips batch ids up "
                          f"to it, so what batches {moved.batch}..{committed} read is not written: {moved.counted()}")
    txn = f"the table's txn for this query is at {committed}" if committed is not None else \
        "the table holds no txn for this query"
    said = (f"{txn}: Spark's Delta sink writes the records read again {ids}, so their rows land in the table twice"
            if count else f"{txn}: Spark's Delta sink writes the records {ids}")
    return SinkEffect("delta", log.location, meta.query_id, committed,
                      (SinkBatch(moved.batch, "duplicate" if count else "write", None, 0, count),),
                      f"{said}: {moved.counted()}")
