"""A Delta Lake table's ``_delta_log``, read without a JVM and without the ``deltalake`` package: the query's Delta
sink (:mod:`.sinks.delta`) and Delta source tables (:mod:`.sources`) both read it here.

The log is one JSON file per table version (``00000000000000000012.json``), each line one action: ``txn``
(``appId``, ``version``: Spark's Delta sink writes app id = the query id, version = the batch id, in the same
commit as the batch's files), ``add``, ``remove``, ``metaData``, ``protocol``, ``commitInfo``. Every few versions a
Parquet checkpoint (``N.checkpoint.parquet``, or ``N.checkpoint.K.M.parquet`` in parts) holds the table's state at N:
the live files, the latest ``txn`` per app id; the JSON files before it may have been cleaned up. pyarrow reads it.
"""
from __future__ import annotations

import json
import re
from typing import Any, Iterable, Iterator, Mapping

from wmcheck.checkpoint.records import dataclass

from ..errors import MalformedFileError, MissingFileError, arg
from ..fs import FileSystem, open_fs

LOG_DIR = "_delta_log"
_HINTS = {"delta_sink": f"pass the table's directory (the path the query writes to), or omit {arg('delta_sink')}",
          "delta_source": f"pass the table's directory (the path the query reads), or omit {arg('delta_source')}"}
"""What to pass instead of a path that is not a Delta table, by the parameter that named it."""
_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet$")


@dataclass(frozen=True)
class DeltaCommit:
    """One table version whose JSON commit file is there: the transactions it records (app id -> version), the
    data files it added and removed, its operation (``commitInfo.operation``: ``STREAMING UPDATE``, ``RESTORE``,
    ...) and time, and the rows it added (the ``add`` actions' ``numRecords`` stats; None when one has none)."""

    version: int
    timestamp_ms: int | None
    operation: str | None
    txns: Mapping[str, int]
    added: tuple[str, ...]
    removed: tuple[str, ...]
    rows: int | None
    restored_to: int | None = None
    """A ``RESTORE`` commit's target version (``operationParameters.version``; None: another operation, or a restore
    named by time)."""


@dataclass(frozen=True)
class DeltaTableLog:
    """A Delta table's log as read: ``version`` is the latest table version; ``commits`` every version whose JSON
    file is there, oldest first; ``txns`` the latest ``txn`` version per app id at ``version``; ``files`` the data
    files live at ``version``; ``checkpoint`` the version of the Parquet checkpoint read (None: none)."""

    location: str
    table_id: str | None
    version: int
    commits: tuple[DeltaCommit, ...]
    txns: Mapping[str, int]
    files: frozenset[str]
    checkpoint: int | None
    checkpoints: tuple[int, ...] = ()
    """Every version with a complete Parquet checkpoint, oldest first (Delta rebuilds an older snapshot from one)."""

    def txn_version(self, app_id: str) -> int | None:
        """The last batch id Delta committed for query ``app_id`` (None: none: every batch id is written)."""
        return self.txns.get(app_id)

    def batch_commits(self, app_id: str) -> dict[int, DeltaCommit]:
        """Batch id -> the (latest) table version whose commit wrote it for query ``app_id`` (a ``RESTORE`` commit
        that sets the query's txn, as ``rewind --delta-sink --execute`` makes, writes no batch)."""
        return {c.txns[app_id]: c for c in self.commits if app_id in c.txns and c.operation != "RESTORE"}

    def commit(self, version: int) -> DeltaCommit | None:
        return next((c for c in self.commits if c.version == version), None)


def open_delta_table(location: str, fs_options: Mapping[str, str] | None = None,
                     param: str = "delta_sink") -> FileSystem:
    """The file system rooted at a Delta table (the directory holding ``_delta_log/`` with a commit or checkpoint)."""
    fs = open_fs(location, fs_options)
    names = fs.names(LOG_DIR) if fs.exists(LOG_DIR) else []
    if not any(_COMMIT.match(n) or _CHECKPOINT.match(n) for n in names):
        raise MissingFileError(f"no {LOG_DIR}/ commits in {fs.uri()}: not a Delta table",
                               hint=_HINTS.get(param, _HINTS["delta_sink"]),
                               param=param)
    return fs


def read_delta_log(location: str, fs_options: Mapping[str, str] | None = None,
                   param: str = "delta_sink") -> DeltaTableLog:
    """Read the table at ``location``; :class:`~..errors.MissingFileError` when it is not a Delta table,
    :class:`~..errors.MalformedFileError` when its log cannot be read."""
    fs = open_delta_table(location, fs_options, param)
    names = fs.names(LOG_DIR)
    versions = sorted(int(m[1]) for m in map(_COMMIT.match, names) if m)
    complete = complete_checkpoints(names)
    checkpoint, parts = max(complete.items()) if complete else (None, [])
    commits = tuple(_commit(v, fs.read(f"{LOG_DIR}/{v:020d}.json")) for v in versions)
    txns: dict[str, int] = {}
    files: set[str] = set()
    table_id = None
    if checkpoint is not None:
        table_id = _read_checkpoint(fs, parts, txns, files)
    start = -1 if checkpoint is None else checkpoint
    after = [c for c in commits if c.version > start]
    if [c.version for c in after] != list(range(start + 1, start + 1 + len(after))):
        raise MalformedFileError(f"the log of versions after {start} has gaps: {[c.version for c in after]}",
                                 path=f"{fs.uri()}/{LOG_DIR}")
    for v in (c.version for c in after):
        table_id = _replay(fs.read(f"{LOG_DIR}/{v:020d}.json"), f"{LOG_DIR}/{v:020d}.json", txns, files) or table_id
    head = after[-1].version if after else start
    return DeltaTableLog(fs.uri(), table_id, head, commits, txns, frozenset(files), checkpoint, tuple(sorted(complete)))


def complete_checkpoints(names: Iterable[str]) -> dict[int, list[str]]:
    """Each version whose checkpoint has all of its parts there -> its files (under the table)."""
    found: dict[int, list[tuple[int, int, str]]] = {}
    for name in names:
        m = _CHECKPOINT.match(name)
        if m:
            found.setdefault(int(m[1]), []).append((int(m[2] or 1), int(m[3] or 1), name))
    out = {}
    for version, parts in found.items():
        parts.sort()
        if [p[0] for p in parts] == list(range(1, parts[0][1] + 1)):
            out[version] = [f"{LOG_DIR}/{p[2]}" for p in parts]
    return out


def log_actions(data: bytes, path: str) -> Iterator[dict[str, Any]]:
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            action = json.loads(line)
        except ValueError as exc:
            raise MalformedFileError(f"not a JSON action ({exc})", path=path, line=number) from None
        if not isinstance(action, dict):
            raise MalformedFileError("a Delta action is a JSON object", path=path, line=number)
        yield action


def _records(stats: object) -> int | None:
    try:
        value = json.loads(stats)["numRecords"] if isinstance(stats, str) else None
    except (ValueError, KeyError, TypeError):
        return None
    return value if isinstance(value, int) else None


def _commit(version: int, data: bytes) -> DeltaCommit:
    path = f"{LOG_DIR}/{version:020d}.json"
    txns: dict[str, int] = {}
    added: list[str] = []
    removed: list[str] = []
    info: dict[str, Any] = {}
    counts: list[int | None] = []
    for action in log_actions(data, path):
        if isinstance(action.get("txn"), dict):
            txns[str(action["txn"].get("appId"))] = int(action["txn"].get("version"))
        elif isinstance(action.get("add"), dict):
            added.append(str(action["add"].get("path")))
            counts.append(_records(action["add"].get("stats")))
        elif isinstance(action.get("remove"), dict):
            removed.append(str(action["remove"].get("path")))
        elif isinstance(action.get("commitInfo"), dict):
            info = action["commitInfo"]
    rows = None if None in counts else sum(c for c in counts if c is not None)
    stamp = info.get("timestamp")
    params = info.get("operationParameters")
    target = params.get("version") if info.get("operation") == "RESTORE" and isinstance(params, dict) else None
    return DeltaCommit(version, stamp if isinstance(stamp, int) else None, info.get("operation"), txns,
                       tuple(added), tuple(removed), rows, _version(target))


def _version(value: object) -> int | None:
    """A version as a commit's parameters give it (a number, or its text)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return int(value) if isinstance(value, str) and value.isdigit() else None


def _replay(data: bytes, path: str, txns: dict[str, int], files: set[str]) -> str | None:
    """Apply one commit's actions to the table's state; its ``metaData`` id, if it has one."""
    table_id = None
    for action in log_actions(data, path):
        if isinstance(action.get("txn"), dict):
            txns[str(action["txn"]["appId"])] = int(action["txn"]["version"])
        elif isinstance(action.get("add"), dict):
            files.add(str(action["add"]["path"]))
        elif isinstance(action.get("remove"), dict):
            files.discard(str(action["remove"]["path"]))
        elif isinstance(action.get("metaData"), dict):
            table_id = action["metaData"].get("id")
    return table_id


def checkpoint_rows(fs: FileSystem, parts: list[str]) -> Iterator[dict[str, Any]]:
    """The actions of a Parquet checkpoint (its ``txn``, ``add`` and ``metaData`` columns), one row each."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for part in parts:
        try:
            table = pq.read_table(pa.BufferReader(fs.read(part)), columns=["txn", "add", "metaData"])
        except (OSError, ValueError, KeyError, pa.ArrowException) as exc:
            raise MalformedFileError(f"not a Delta checkpoint ({exc})", path=part) from None
        yield from table.to_pylist()


def _read_checkpoint(fs: FileSystem, parts: list[str], txns: dict[str, int], files: set[str]) -> str | None:
    table_id = None
    for row in checkpoint_rows(fs, parts):
        if row.get("txn"):
            txns[str(row["txn"]["appId"])] = int(row["txn"]["version"])
        if row.get("add"):
            files.add(str(row["add"]["path"]))
        if row.get("metaData"):
            table_id = row["metaData"].get("id")
    return table_id
