"""One recommended repair per checkpoint: when the errors advise different wmcheck repairs, the one to run."""
from __future__ import annotations

from typing import Iterable

from ..repair.requests import RepairRequest, RewindRequest, UndoRequest
from .definition import ERROR, Finding, Instruction


def recommended_repair(findings: Iterable[Finding]) -> RepairRequest | UndoRequest | None:
    """The repair that makes the restart work when the errors advise several: an interrupted repair is undone
    first; among rewinds the earliest batch (a rewind there also drops every later problem, and the restart
    oracle's cases prove it), with the file sink when any of them has it (else the sink is left ahead of the
    checkpoint, WM024), keeping the next offsets only when every rewind to that batch does; else the one other
    repair the errors agree on. None when no error advises a repair, or
    they advise different repairs that are not rewinds."""
    fixes = [f.fix for f in findings if f.severity == ERROR and not isinstance(f.fix, Instruction)]
    undo = next((fix for fix in fixes if isinstance(fix, UndoRequest)), None)
    if undo is not None:
        return undo
    rewinds = [fix for fix in fixes if isinstance(fix, RewindRequest) and fix.to_batch is not None]
    if rewinds:
        batch = min(r.to_batch for r in rewinds if r.to_batch is not None)
        there = [r for r in rewinds if r.to_batch == batch]
        return RewindRequest(to_batch=batch, file_sink=next((r.file_sink for r in rewinds if r.file_sink), None),
                             keep_next_offsets=all(r.keep_next_offsets for r in there),
                             delta_sink=next((r.delta_sink for r in rewinds if r.delta_sink), None),
                             delta_txn_app_id=next((r.delta_txn_app_id for r in rewinds if r.delta_txn_app_id), None))
    distinct = [fix for i, fix in enumerate(fixes) if fix not in fixes[:i]]  # requests with a path map do not hash
    return distinct[0] if len(distinct) == 1 else None
