"""What a query's sink holds and does with re-run batches, one module per sink kind (:mod:`.delta`, :mod:`.kafka`,
:mod:`.foreach_batch`), read without a JVM; :class:`SinkEffect` is what a repair's plan says about it."""
from __future__ import annotations

from typing import Any, Literal

from wmcheck.checkpoint.records import dataclass

SinkAction = Literal["skip", "write", "duplicate", "again"]


@dataclass(frozen=True)
class SinkBatch:
    """One batch id a restart runs again, and what the sink does with it: ``skip`` (it holds the batch: nothing is
    written), ``write``, ``duplicate`` (written a second time: ``rows`` then) or ``again`` (a foreachBatch function
    called with it again); ``version``: the table version that wrote it before (None: none); ``files`` and ``rows``
    that version added (``rows`` None: the log records no count)."""

    batch: int
    action: SinkAction
    version: int | None
    files: int
    rows: int | None

    def to_json(self) -> dict[str, Any]:
        return {"batch": self.batch, "action": self.action, "version": self.version, "files": self.files,
                "rows": self.rows}


@dataclass(frozen=True)
class TableRestore:
    """The sink-side step of an executed repair: restore the Delta table from version ``from_version`` (its latest
    when planned) to ``to_version`` (the version before the first re-run batch's commit) in a commit that sets the
    query's ``txn`` from ``txn_before`` to ``txn`` (the rewind's batch), so that the restart writes the re-run batches.
    ``rows`` and ``files``: what the versions after ``to_version`` added and the table still holds, which the restore
    removes (``rows`` None: not counted: a commit records no count, or lost some of its files since); ``other_writers``: versions after ``to_version`` whose commit has no ``txn`` of this
    query (another writer's, or a commit whose JSON file is gone)."""

    to_version: int
    from_version: int
    txn: int
    txn_before: int
    rows: int | None
    files: int
    other_writers: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"to_version": self.to_version, "from_version": self.from_version, "txn": self.txn,
                "txn_before": self.txn_before, "rows": self.rows, "files": self.files,
                "other_writers": list(self.other_writers)}

    @classmethod
    def from_json(cls, obj: Any) -> "TableRestore":
        return cls(int(obj["to_version"]), int(obj["from_version"]), int(obj["txn"]), int(obj["txn_before"]),
                   obj["rows"], int(obj["files"]), tuple(int(v) for v in obj["other_writers"]))


@dataclass(frozen=True)
class SinkEffect:
    """What the sink does with the batches a repair makes the query run again: ``kind`` (``delta``), where it is,
    the batch ids, and per id what happens; ``summary`` says it in one sentence."""

    kind: str
    location: str
    query_id: str
    committed: int | None
    """The last batch id the sink committed for this query (Delta: the ``txn`` version; None: none)."""
    batches: tuple[SinkBatch, ...]
    summary: str
    restore: TableRestore | None = None
    """What ``--execute`` does to the table (None: nothing, no re-run batch is skipped)."""
    txn_app_id: str | None = None
    """Delta: the ``txn`` app id the table is judged by when it is not the query id (the ``txnAppId`` writer option
    of a foreachBatch function's idempotent writes; None: the query id, as Spark's Delta sink writes)."""

    @property
    def app_id(self) -> str:
        """The ``txn`` app id whose version says which batches the table holds."""
        return self.txn_app_id if self.txn_app_id is not None else self.query_id

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "location": self.location, "query_id": self.query_id, "committed": self.committed,
                "batches": [b.to_json() for b in self.batches], "summary": self.summary,
                "restore": None if self.restore is None else self.restore.to_json(), "txn_app_id": self.txn_app_id}

    @classmethod
    def from_json(cls, obj: Any) -> "SinkEffect":
        return cls(str(obj["kind"]), str(obj["location"]), str(obj["query_id"]), obj["committed"],
                   tuple(SinkBatch(int(b["batch"]), b["action"], b["version"], int(b["files"]), b["rows"])
                         for b in obj["batches"]), str(obj["summary"]),
                   None if obj.get("restore") is None else TableRestore.from_json(obj["restore"]),
                   None if obj.get("txn_app_id") is None else str(obj["txn_app_id"]))
