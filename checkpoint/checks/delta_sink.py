"""Checks of the query's Delta sink table against the checkpoint (``check --delta-sink PATH``): the table re-created
at its path (it holds no ``txn`` of the query) and the table restored below batches the query committed (their rows
gone while the ``txn`` stays), each judged by the ``txn`` of the query id or of ``--delta-txn-app-id`` (a foreachBatch
function's ``txnAppId``, which Delta checks by the same rule: DeltaCommand.hasBeenExecuted). Spark's Delta sink
writes a batch only when its id is above the table's ``txn`` version for the query id (tests/test_delta_check.py
restarts the query after each; tests/test_delta_txn_app_id.py a foreachBatch writer's)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from ..errors import arg
from ..logs.delta_log import LOG_DIR
from ..timeutil import format_ms
from .context import Context
from .definition import ERROR, Instruction, Issue, check
from .text import plural

if TYPE_CHECKING:
    from ..logs.delta_log import DeltaTableLog


def _span(ids: list[int]) -> str:
    return f"{ids[0]}" if len(ids) == 1 else f"{ids[0]}..{ids[-1]}"


def _app_id(ctx: Context, query_id: str) -> str:
    return ctx.delta_app_id if ctx.delta_app_id is not None else query_id


@check("WM086", ERROR, "the Delta sink's table holds no txn of the query (re-created)")
def table_recreated(ctx: Context) -> Iterator[Issue]:
    log, done, meta = ctx.delta, ctx.ckpt.last_committed_batch, ctx.query_metadata
    if log is None or done is None or meta is None or log.txn_version(_app_id(ctx, meta.query_id)) is not None:
        return
    first = log.commit(0)
    created = f" (its version 0 was written at {format_ms(first.timestamp_ms, ctx.tz)})" if first and \
        first.timestamp_ms is not None else ""
    whose = f"query {meta.query_id}" if ctx.delta_app_id is None else \
        f"app id {ctx.delta_app_id} ({arg('delta_txn_app_id')}) of query {meta.query_id}"
    others = sorted(log.txns)
    if ctx.delta_app_id is None and len(others) == 1:  # a foreachBatch function's txnAppId, or another writer's
        other = others[0]
        message = (
            f"the Delta table holds no txn of query {meta.query_id}, whose checkpoint committed batches up to {done}, "
            f"but one of app id {other} at {log.txns[other]}: if the query's foreachBatch function writes the table "
            f"with the writer options txnAppId={other} and txnVersion=the batch id (Delta then skips a batch id at "
            f"most that txn), pass {arg('delta_txn_app_id', other)} to check it by that app id; else the table was "
            f"re-created at its path{created} and written by another writer, or is another table, and the restart "
            f"writes batches {done + 1} on only: the rows batches 0..{done} wrote are not in the table and are not "
            "written again (tested with delta-spark 4.4)")
    else:
        message = (
            f"the Delta table holds no txn of {whose}, whose checkpoint committed batches up to {done}: the table was "
            f"re-created at its path{created}, or is another table. The restart writes batches {done + 1} on only: "
            f"the rows batches 0..{done} wrote are not in the table and are not written again (tested with "
            "delta-spark 4.4)")
    yield Issue(f"{ctx.delta_shown}/{LOG_DIR}", message, Instruction(
        "for the table to hold the query's whole output, start the query from a new checkpoint (it writes every "
        "batch again); to keep only what comes next, nothing to do"))


def present_batches(log: DeltaTableLog, app_id: str) -> frozenset[int] | None:
    """The batch ids (``txn`` versions of ``app_id``) whose rows the table holds at its latest version, followed through its commits
    (a ``RESTORE`` goes back to what its target version held); None when a restore's target is not followed (its
    commit is before the oldest JSON commit, or named by time)."""
    seen: dict[int, frozenset[int] | None] = {}
    now: frozenset[int] | None = frozenset() if log.commits and log.commits[0].version == 0 else None
    for commit in log.commits:
        if commit.operation == "RESTORE":
            now = seen.get(commit.restored_to) if commit.restored_to is not None else None
        if app_id in commit.txns and commit.operation != "RESTORE" and now is not None:
            now = now | {commit.txns[app_id]}
        seen[commit.version] = now
    return now


@check("WM087", ERROR, "the Delta sink's table restored below batches the query committed")
def table_restored_below(ctx: Context) -> Iterator[Issue]:
    log, done, meta = ctx.delta, ctx.ckpt.last_committed_batch, ctx.query_metadata
    if log is None or done is None or meta is None:
        return
    app_id = _app_id(ctx, meta.query_id)
    txn = log.txn_version(app_id)
    present = present_batches(log, app_id)
    if txn is None or present is None:
        return
    lost = sorted(b for b in log.batch_commits(app_id) if b not in present and (b <= txn or b <= done))
    if not lost:
        return
    restore = next(c for c in reversed(log.commits) if c.operation == "RESTORE")
    rows = [log.batch_commits(app_id)[b].rows for b in lost]
    whose = "the query" if ctx.delta_app_id is None else f"app id {app_id}"
    counted = f"{sum(r for r in rows if r is not None)} row(s)" if None not in rows else "the rows"
    yield Issue(f"{ctx.delta_shown}/{LOG_DIR}/{restore.version:020d}.json", (
        f"the Delta table was restored to version {restore.restored_to} (version {restore.version}) below "
        f"{plural(len(lost), 'batch', 'batches')} the query committed ({_span(lost)}): their {counted} are gone from "
        f"it while its txn for {whose} stays at {txn}. The restart writes batches {done + 1} on only and never "
        f"writes {_span(lost)} again (tested with delta-spark 4.4). The rewind restores the table to before batch "
        f"{lost[0]}'s commit with the txn lowered, so that the restart writes them again (its own restore commit "
        f"counts as another writer's: {arg('execute')} needs {arg('force')})"), ctx.rewind(lost[0] - 1, delta_sink=log.location))
