"""What a query's Delta sink does with batch ids a restart runs again, from its table's log (read by
:mod:`..delta_log`, which this module's names re-export for the sink's callers).

Spark's Delta sink skips a batch whose id is at most the table's ``txn`` version for the query id: its rows are
not written again (tests/test_delta_sink.py makes it happen).
"""
from __future__ import annotations

from typing import Iterable

from ..logs.delta_log import LOG_DIR, DeltaCommit, DeltaTableLog, open_delta_table, read_delta_log
from . import SinkBatch, SinkEffect

__all__ = ["LOG_DIR", "DeltaCommit", "DeltaTableLog", "open_delta_table", "read_delta_log", "rerun_effect"]


def rerun_effect(log: DeltaTableLog, query_id: str, batches: Iterable[int]) -> SinkEffect:
    """What Spark's Delta sink does with ``batches`` run again by query ``query_id``: every batch id at most the
    table's ``txn`` version for the query is skipped (nothing written), the others are written."""
    committed = log.txn_version(query_id)
    wrote = log.batch_commits(query_id)
    rows = []
    for batch in sorted(batches):
        commit = wrote.get(batch)
        skip = committed is not None and batch <= committed
        rows.append(SinkBatch(batch, "skip" if skip else "write", commit.version if commit else None,
                              len(commit.added) if commit else 0, commit.rows if commit else None))
    skipped = [b.batch for b in rows if b.action == "skip"]
    return SinkEffect("delta", log.location, query_id, committed, tuple(rows), _summary(committed, rows, skipped))


def _span(ids: list[int]) -> str:
    return f"{ids[0]}" if len(ids) == 1 else f"{ids[0]}..{ids[-1]}"


def _summary(committed: int | None, rows: list[SinkBatch], skipped: list[int]) -> str:
    if not rows:
        return "no batch runs again"
    if not skipped:
        return (f"the table's txn for this query is at {committed}: the re-run batches {_span([b.batch for b in rows])} "
                "are written" if committed is not None else
                f"the table holds no txn for this query: the re-run batches {_span([b.batch for b in rows])} are written")
    lost = sum(b.rows or 0 for b in rows if b.action == "skip")
    return (f"the table's txn for this query is at {committed}: Spark's Delta sink skips the re-run batches "
            f"{_span(skipped)} and writes nothing for them (their {lost} row(s) stay as first written; restore the "
            f"table to the version before batch {skipped[0]}'s commit and lower the txn for the re-run batches to "
            "reach the table)")
