"""A query's Delta Lake *source* tables as they are now (``check --delta-source PATH``), their ``_delta_log`` read without
a JVM (:mod:`..delta_log`), each matched to the checkpoint's Delta source whose offsets name its table id.

A Delta source's offset (``offsets/N``) is ``{"sourceVersion", "reservoirId", "reservoirVersion", "index",
"isStartingVersion"}``: ``reservoirId`` is the table id (``metaData.id``) the query read, ``reservoirVersion``/``index``
the table version and file index it read up to. The next batch starts at the last committed batch's end offset: it reads
the table's commits from ``reservoirVersion`` on (``isStartingVersion``: the snapshot at that version, from ``index`` on).

Rules (delta-spark 4.4's ``DeltaSource.scala``, ``DeltaSourceOffset.scala``; tests/test_delta_source_check.py restarts
the query after each): an offset whose ``reservoirId`` is not the table's id fails the restart
(``DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE``); commits from the start version on that the log no longer holds fail
it too (``DELTA_MISSING_FILES_UNEXPECTED_VERSION``) unless the source has ``failOnDataLoss=false``, which starts at the
oldest commit left. A next batch that goes on inside the starting snapshot (``isStartingVersion``) needs that snapshot
rebuilt (``DeltaSource.getSnapshotAt``): a log that cannot fails the restart with
``DELTA_LOG_FILE_NOT_FOUND_FOR_STREAMING_SOURCE``, also with ``failOnDataLoss=false``; its files after the offset's
index that are gone fail the batch that reads them, those before it are never read again
(tests/test_delta_source_snapshot.py).
"""
from __future__ import annotations

from typing import Mapping, Sequence
from urllib.parse import unquote

from wmcheck.checkpoint.logs.source_offsets import SourceOffset
from wmcheck.checkpoint.records import dataclass

from ..errors import MissingFileError, arg
from ..fs import open_fs
from ..logs.delta_log import DeltaTableLog, read_delta_log
from .delta_files import DeltaSourceLog

PARAM = "delta_source"


@dataclass(frozen=True)
class DeltaSourceTable:
    """One Delta source of the checkpoint with its table now: ``source`` its index in ``offsets/N``; ``reservoir_id``
    the table id its offsets name; ``batch`` the offsets file the start position comes from (the last committed
    batch's); ``start_version``/``start_index``/``starting``: where the next batch reads from."""

    source: int
    reservoir_id: str
    batch: int
    start_version: int
    start_index: int
    starting: bool
    log: DeltaTableLog
    gone_files: tuple[tuple[int, str], ...] = ()
    """The data files that the commits the next batch reads add and that are not in the table's directory (version,
    path as the ``add`` action names it): from the start version on, or after it inside the starting snapshot."""
    gone_in_snapshot: tuple[str, ...] = ()
    """Inside the starting snapshot: its files after ``start_index`` (in the order Delta serves them) that are not in
    the table's directory."""
    snapshot_lost: bool = False
    """Inside the starting snapshot: the log can no longer rebuild it (no JSON commits from version 0 up to it, nor a
    complete checkpoint at or before it with the JSON commits after that up to it)."""
    shown: str = ""
    """How findings name the table (relative to the checkpoint where it can be)."""

    @property
    def earliest_commit(self) -> int | None:
        """The oldest table version whose JSON commit is there (None: none)."""
        return self.log.commits[0].version if self.log.commits else None

    @property
    def replaced(self) -> bool:
        """The table at the path has another id than the one the query read (dropped and re-created there)."""
        return self.log.table_id is not None and self.log.table_id != self.reservoir_id

    @property
    def missing_versions(self) -> tuple[int, int] | None:
        """The versions from the start version on that the next batch reads and the log no longer holds (first, last);
        None when it holds them, the table has no version at or after the start yet, or the next batch goes on inside
        the starting snapshot (``snapshot_lost`` says whether Delta can rebuild it)."""
        earliest = self.earliest_commit
        if self.log.version < self.start_version or self.starting:
            return None
        if earliest is not None and earliest <= self.start_version:
            return None
        return self.start_version, (earliest - 1) if earliest is not None else self.log.version


def match_delta_sources(batch: int | None, sources: Sequence[tuple[int, SourceOffset]], locations: Sequence[str],
                        fs_options: Mapping[str, str] | None = None) -> tuple[DeltaSourceTable, ...]:
    """Each table at ``locations`` matched to the Delta source (index, end offset of ``batch``, the last committed
    one: where the next batch starts) whose ``reservoirId`` is its table id; a table of another id is the source's
    when there is exactly one Delta source (re-created at its path). :class:`~..errors.MissingFileError` for a path that
    is not a Delta table, or a table that is none of the query's sources."""
    logs = [read_delta_log(loc, fs_options, PARAM) for loc in locations]
    if not logs:
        return ()
    if batch is None or not sources:
        raise MissingFileError(f"the checkpoint's last committed offsets name no Delta source: {logs[0].location} is "
                               "not the query's source", hint=f"pass {arg('delta_source')} only for a query that reads a Delta "
                               "table", param=PARAM)
    out = []
    for log in logs:
        same = [(i, s) for i, s in sources if s.value.get("reservoirId") == log.table_id]
        if not same and len(sources) > 1:
            ids = ", ".join(str(s.value.get("reservoirId")) for _, s in sources)
            raise MissingFileError(f"the table at {log.location} (id {log.table_id}) is none of the query's Delta "
                                   f"sources (their reservoirIds: {ids})", hint="pass the path of a table the query "
                                   "reads", param=PARAM)
        index, offset = (same or sources)[0]
        value = offset.value
        start, at, starting = int(value["reservoirVersion"]), int(value["index"]), bool(value.get("isStartingVersion"))
        fs = open_fs(log.location, fs_options)
        gone = tuple((c.version, path) for c in log.commits if c.version > start or (c.version == start and not starting)
                     for path in c.added if not fs.exists(unquote(path)))
        in_snapshot: tuple[str, ...] = ()
        lost = False
        if starting and log.table_id == value.get("reservoirId"):
            try:  # the snapshot the next batch goes on reading, rebuilt as Delta does
                snapshot = DeltaSourceLog(log.location, fs_options).snapshot(start)
            except MissingFileError:
                lost = True
            else:
                in_snapshot = tuple(f.path for f in snapshot if f.index > at and not fs.exists(unquote(f.path)))
        out.append(DeltaSourceTable(index, str(value.get("reservoirId")), batch, start, at, starting, log, gone,
                                    in_snapshot, lost))
    return tuple(out)
