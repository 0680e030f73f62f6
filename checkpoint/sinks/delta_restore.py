"""Restoring a query's Delta sink so the batches a rewind makes it run again reach the table: which version to restore
to and what that removes (planned from the log alone), and the restore itself through ``deltalake`` (the ``delta``
extra), in one commit that also sets the query's ``txn``.

Spark's Delta sink skips a batch id at most the table's ``txn`` version for the query; a restore keeps the ``txn``
(a ``RESTORE`` commit carries none of its own), so the restore commit sets it to the rewind's batch
(tests/test_delta_sink.py proves both by restarts).
"""
from __future__ import annotations

from typing import Any

from ..errors import CheckpointError, RefusedError, arg
from ..extras import optional_module
from . import SinkEffect, TableRestore
from .delta import DeltaCommit, DeltaTableLog

RESTORE = "RESTORE"
"""``commitInfo.operation`` of a restore commit (deltalake's and Delta's)."""


def plan_restore(log: DeltaTableLog, effect: SinkEffect, batch: int) -> TableRestore | None:
    """The restore that makes the re-run batches of ``effect`` reach the table after a rewind to ``batch`` (None: no
    batch is skipped, nothing to restore); RefusedError when the log no longer has the commit to restore before."""
    skipped = [b for b in effect.batches if b.action == "skip"]
    if not skipped or effect.committed is None:
        return None
    first = skipped[0]
    if first.version is None:
        raise RefusedError(f"the Delta table's log no longer has the commit of batch {first.batch} (its JSON file was "
                           "cleaned up): the version to restore to is unknown", param="delta_sink",
                           hint=f"restore the table by hand, or leave out {arg('delta_sink')} (the re-run batches then "
                                "write nothing)")
    to_version = first.version - 1
    later = [log.commit(v) for v in range(to_version + 1, log.version + 1)]
    others = tuple(v for v, c in zip(range(to_version + 1, log.version + 1), later)
                   if c is None or effect.app_id not in c.txns)
    counts = [_live_rows(c, log.files) for c in later]
    rows = None if None in counts else sum(n for n in counts if n is not None)
    files = sum(len([p for p in c.added if p in log.files]) for c in later if c is not None)
    return TableRestore(to_version, log.version, batch, effect.committed, rows, files, others)


def _live_rows(commit: DeltaCommit | None, live: frozenset[str]) -> int | None:
    """The rows a commit added that the table still holds (None: not known: its JSON file is gone, it records no
    count, or some of its files are gone since, e.g. by an earlier restore)."""
    if commit is None:
        return None
    kept = [p for p in commit.added if p in live]
    if not kept:
        return 0
    return commit.rows if len(kept) == len(commit.added) else None


def restore_text(r: TableRestore, app_id: str | None = None) -> str:
    """The plan's line for the sink-side step (``app_id``: the txn's app id when it is not the query id)."""
    removed = f"{r.rows} row(s)" if r.rows is not None else "rows (uncounted)"
    whose = "query's txn" if app_id is None else f"txn of app id {app_id}"
    return (f"restore the table from version {r.from_version} to version {r.to_version} in a commit that sets the "
            f"{whose} from {r.txn_before} to {r.txn} (removes {removed} in {r.files} file(s) of versions "
            f"{r.to_version + 1}..{r.from_version})")


def other_writers_problem(r: TableRestore) -> str | None:
    """Why a restore is refused without ``force``: versions after its target that another writer committed."""
    if not r.other_writers:
        return None
    shown = ", ".join(map(str, r.other_writers[:5]))
    return (f"the Delta table has commits after version {r.to_version} that are not this query's (no txn of its id, "
            f"or no JSON file): version(s) {shown}; restoring removes what they wrote ({arg('force')} restores anyway)")


def _deltalake() -> Any:
    return optional_module("deltalake", "restoring the Delta table", "delta")


def check_deltalake() -> None:
    """Raise a CheckpointError naming the extra when ``deltalake`` is not installed."""
    _deltalake()


def restore_table(location: str, version: int, app_id: str, txn: int) -> int:
    """Restore the table at ``location`` to ``version`` in one commit whose ``txn`` for ``app_id`` is ``txn``;
    returns the new table version."""
    lake = _deltalake()
    try:
        table = lake.DeltaTable(location)
        table.restore(version, commit_properties=lake.CommitProperties(
            app_transactions=[lake.Transaction(app_id=app_id, version=txn)]))
        return int(table.version())
    except Exception as exc:  # deltalake raises its own errors (DeltaError, OSError, ...)
        raise CheckpointError(f"deltalake could not restore the table to version {version}: "
                              f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
                              path=location) from None
