"""What a query's Delta sink does with batch ids a restart runs again, from its table's log (read by
:mod:`..delta_log`, which this module's names re-export for the sink's callers).

Spark's Delta sink skips a batch whose id is at most the table's ``txn`` version for the query id: its rows are
not written again (tests/test_delta_sink.py makes it happen).
"""
from __future__ import annotations

from typing import Iterable

from ..errors import CheckpointError, arg
from ..logs.delta_log import LOG_DIR, DeltaCommit, DeltaTableLog, open_delta_table, read_delta_log
from . import SinkBatch, SinkEffect

__all__ = ["LOG_DIR", "DeltaCommit", "DeltaTableLog", "open_delta_table", "read_delta_log", "rerun_effect",
           "check_txn_app_id"]


STATE_COMMIT_VALIDATION = "spark.sql.streaming.stateStore.commitValidation.enabled"
"""Spark 4.2's check that every state store of a foreachBatch query's batch committed (on by default)."""


def check_txn_app_id(app_id: str | None, delta_sink: str | None) -> str | None:
    """``app_id`` (``delta_txn_app_id``: the txn app id the Delta sink's writer uses) when it can be used: a
    CheckpointError when it is empty or given without ``delta_sink``."""
    if app_id is None:
        return None
    if not app_id.strip():
        raise CheckpointError(f"{arg('delta_txn_app_id')} is empty: expected the txnAppId writer option of the "
                              "table's writer", param="delta_txn_app_id",
                              hint=f"pass the app id, or omit {arg('delta_txn_app_id')} (the query id)")
    if delta_sink is None:
        raise CheckpointError(f"{arg('delta_txn_app_id')} names the txn app id of the Delta sink's table: it needs "
                              f"{arg('delta_sink', 'PATH')}", param="delta_txn_app_id",
                              hint=f"pass {arg('delta_sink', 'PATH')} (the table's directory) with it")
    return app_id


def rerun_effect(log: DeltaTableLog, query_id: str, batches: Iterable[int], app_id: str | None = None) -> SinkEffect:
    """What Spark's Delta sink does with ``batches`` run again by query ``query_id``: every batch id at most the
    table's ``txn`` version for the query is skipped (nothing written), the others are written. ``app_id``: the
    ``txn`` app id the writer uses instead (a foreachBatch function writing with ``txnAppId``/``txnVersion`` = the
    batch id, which Delta skips by the same rule: DeltaCommand.hasBeenExecuted)."""
    committed = log.txn_version(app_id if app_id is not None else query_id)
    wrote = log.batch_commits(app_id if app_id is not None else query_id)
    rows = []
    for batch in sorted(batches):
        commit = wrote.get(batch)
        skip = committed is not None and batch <= committed
        rows.append(SinkBatch(batch, "skip" if skip else "write", commit.version if commit else None,
                              len(commit.added) if commit else 0, commit.rows if commit else None))
    skipped = [b.batch for b in rows if b.action == "skip"]
    whose = "this query" if app_id is None else f"app id {app_id}"
    return SinkEffect("delta", log.location, query_id, committed, tuple(rows), _summary(committed, rows, skipped, whose),
                      txn_app_id=app_id)


def _span(ids: list[int]) -> str:
    return f"{ids[0]}" if len(ids) == 1 else f"{ids[0]}..{ids[-1]}"


def _summary(committed: int | None, rows: list[SinkBatch], skipped: list[int], whose: str) -> str:
    if not rows:
        return "no batch runs again"
    if not skipped:
        return (f"the table's txn for {whose} is at {committed}: the re-run batches {_span([b.batch for b in rows])} "
                "are written" if committed is not None else
                f"the table holds no txn for {whose}: the re-run batches {_span([b.batch for b in rows])} are written")
    lost = sum(b.rows or 0 for b in rows if b.action == "skip")
    sink = "Spark's Delta sink" if whose == "this query" else "Delta"
    text = (f"the table's txn for {whose} is at {committed}: {sink} skips the re-run batches "
            f"{_span(skipped)} and writes nothing for them (their {lost} row(s) stay as first written; restore the "
            f"table to the version before batch {skipped[0]}'s commit and lower the txn for the re-run batches to "
            "reach the table)")
    if whose == "this query":
        return text
    return (f"{text}; a stateful query then fails batch {skipped[0]} on Spark 4.2 unless "
            f"{STATE_COMMIT_VALIDATION}=false: the skipped write runs no job, so its state stores never commit "
            "(tested with delta-spark 4.4)")
