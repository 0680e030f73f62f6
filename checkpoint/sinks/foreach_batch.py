"""A ``foreachBatch`` sink: the user's function is called again with the batch ids a repair makes the query run
again; what it writes then is the function's to decide (an idempotent writer, such as Delta's ``txnAppId`` and
``txnVersion`` options keyed on the batch id, skips them; a plain append writes them twice)."""
from __future__ import annotations

from typing import Iterable

from ..model import Checkpoint
from . import SinkBatch, SinkEffect


def rerun_effect(ckpt: Checkpoint, batches: Iterable[int]) -> SinkEffect:
    """The batches whose input the function sees again (``again``: it was called with the id before; ``write``:
    never), from the first re-run batch id on."""
    rows = tuple(SinkBatch(b, "again" if b in ckpt.commit_ids else "write", None, 0, None) for b in sorted(batches))
    meta = ckpt.query_metadata
    again = [b.batch for b in rows if b.action == "again"]
    if not again:
        summary = "no batch the function saw runs again"
    else:
        ids = f"{again[0]}..{again[-1]}" if len(again) > 1 else str(again[0])
        summary = (f"the function is called again from batch id {again[0]} with the input of batches {ids}: with the "
                   "rate limits they ran with (maxOffsetsPerTrigger, maxFilesPerTrigger) in the same batches, else "
                   "planned anew into as many batches as the limits give; a plain append writes their rows twice, a "
                   f"writer keyed on the batch id (Delta's txnAppId/txnVersion) skips every id up to {again[-1]}, "
                   "whatever input is planned into it")
    return SinkEffect("foreachBatch", "", meta.query_id if meta else "", None, rows, summary)
