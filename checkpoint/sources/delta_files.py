"""The data files a Delta source read in one batch, from its table's ``_delta_log`` (no JVM): ``replay --delta-source``.

Delta's source (delta-spark 4.4, ``DeltaSource.scala``, ``DeltaSourceSnapshot.scala``) numbers the files it serves:
the starting snapshot's live files (``isStartingVersion``) sorted by ``(modificationTime, path)``, index 0..n-1; after
it, each commit's ``add`` actions with ``dataChange`` in the order the commit lists them, index 0..n-1. An offset
``(reservoirVersion, index)`` is the last file a batch read (index -1: none of that version yet); a batch reads the files
after the previous batch's offset up to its own. The first batch starts where ``DeltaSource.extractStartingState`` puts
it: at the query's ``startingVersion`` (its commits from that version on; not in the checkpoint: ``starting_version``);
without one, at the snapshot its end offset names (``isStartingVersion``), or, for an end past the snapshot, the
snapshot at the version before the end's. A partitioned table's files hold no partition columns: each file carries its
``partitionValues`` and the table's schema types them. tests/test_delta_replay.py replays every batch of
fixtures/delta_source_agg, of a query started with startingVersion, of one that read the whole snapshot in its first
batch, and of one over a partitioned table, and compares the rows with the rows the query read.
"""
from __future__ import annotations

from typing import Any, Mapping
from urllib.parse import unquote

from wmcheck.checkpoint.logs.source_offsets import SourceOffset
from wmcheck.checkpoint.records import dataclass

from ..errors import MissingFileError, UnsupportedError, arg
from ..logs.delta_log import LOG_DIR, checkpoint_rows, complete_checkpoints, log_actions, open_delta_table

PARAM = "delta_source"


@dataclass(frozen=True)
class DeltaFile:
    """One data file the source served: its version, its index there, its path as the ``add`` names it."""

    version: int
    index: int
    path: str
    size: int | None
    partition: tuple[tuple[str, str | None], ...] = ()
    """The ``partitionValues`` of its ``add`` (column, value as the log writes it; empty: the table is not partitioned)."""


def _file(version: int, index: int, add: dict[str, Any]) -> DeltaFile:
    values = dict(add.get("partitionValues") or {})  # a checkpoint's map column reads as (key, value) pairs
    return DeltaFile(version, index, str(add["path"]), add.get("size"),
                     tuple((str(k), None if v is None else str(v)) for k, v in sorted(values.items())))


@dataclass(frozen=True)
class _Position:
    version: int
    index: int
    starting: bool


def _position(offset: SourceOffset) -> _Position:
    value: dict[str, Any] = offset.value
    return _Position(int(value["reservoirVersion"]), int(value["index"]), bool(value.get("isStartingVersion")))


class DeltaSourceLog:
    """A Delta source's table, opened once, read commit by commit as batches need them."""

    def __init__(self, location: str, fs_options: Mapping[str, str] | None = None,
                 starting_version: int | None = None) -> None:
        self.fs = open_delta_table(location, fs_options, PARAM)
        self.location = self.fs.uri()
        self.starting_version = starting_version
        """The query's ``startingVersion`` option (None: none), where its first batch started reading."""
        self._commits: dict[int, list[dict[str, Any]]] = {}
        self._meta = self._metadata()
        self.table_id = str(self._meta.get("id")) if self._meta is not None else None
        self.schema_json = str(self._meta["schemaString"]) if self._meta and self._meta.get("schemaString") else None
        """The table's schema (``metaData.schemaString``: Spark's JSON of a StructType), for partition columns' types."""

    def _read(self, version: int) -> list[dict[str, Any]]:
        if version not in self._commits:
            path = f"{LOG_DIR}/{version:020d}.json"
            if not self.fs.exists(path):
                raise MissingFileError(f"the commit of version {version} is gone from the table's log: the files the "
                                       "source read then are unknown", path=f"{self.location}/{path}",
                                       hint="replay the batches after it", param=PARAM)
            self._commits[version] = list(log_actions(self.fs.read(path), path))
        return self._commits[version]

    def _metadata(self) -> dict[str, Any] | None:
        versions = sorted(int(n[:20]) for n in self.fs.names(LOG_DIR) if n.endswith(".json") and n[:20].isdigit())
        for version in reversed(versions):
            meta = next((a["metaData"] for a in self._read(version) if isinstance(a.get("metaData"), dict)), None)
            if meta is not None:
                return meta
        return None

    def latest(self) -> int:
        names = [int(n[:20]) for n in self.fs.names(LOG_DIR) if n.endswith(".json") and n[:20].isdigit()]
        return max(names, default=-1)

    def added(self, version: int) -> list[DeltaFile]:
        """The files commit ``version`` serves to the stream (its ``add`` actions with ``dataChange``)."""
        adds = [a["add"] for a in self._read(version) if isinstance(a.get("add"), dict) and a["add"].get("dataChange", True)]
        return [_file(version, i, a) for i, a in enumerate(adds)]

    def snapshot(self, version: int) -> list[DeltaFile]:
        """The live files at ``version`` in the order the source serves a starting snapshot: by modification time,
        then path. Rebuilt as Delta does: from the newest complete checkpoint at or before ``version`` whose JSON
        commits up to it are there, else from the JSON commits 0..version (:class:`~..errors.MissingFileError` when
        neither is there)."""
        present = {int(n[:20]) for n in self.fs.names(LOG_DIR) if n.endswith(".json") and n[:20].isdigit()}
        bases = sorted((c for c in complete_checkpoints(self.fs.names(LOG_DIR)).items() if c[0] <= version), reverse=True)
        base, parts = next(((c, p) for c, p in bases if all(v in present for v in range(c + 1, version + 1))), (-1, []))
        live: dict[str, dict[str, Any]] = {str(r["add"]["path"]): r["add"] for r in checkpoint_rows(self.fs, parts)
                                           if r.get("add")}
        for v in range(base + 1, version + 1):
            for action in self._read(v):
                if isinstance(action.get("add"), dict):
                    live[str(action["add"]["path"])] = action["add"]
                elif isinstance(action.get("remove"), dict):
                    live.pop(str(action["remove"]["path"]), None)
        ordered = sorted(live.values(), key=lambda a: (int(a.get("modificationTime") or 0), str(a["path"])))
        return [_file(version, i, a) for i, a in enumerate(ordered)]

    def batch_files(self, start: SourceOffset | None, end: SourceOffset) -> list[DeltaFile]:
        """The files after ``start`` (the previous batch's end offset; None: the first batch, which starts at the
        query's ``startingVersion``, else at its starting snapshot) up to ``end``."""
        to = _position(end)
        if start is None and self.starting_version is not None:
            if to.starting:
                raise UnsupportedError(f"the first batch ended inside the starting snapshot of version {to.version} "
                                       "(isStartingVersion): the query had no startingVersion",
                                       hint=f"omit {arg('delta_starting_version')}", param="delta_starting_version")
            if self.starting_version > to.version:
                raise UnsupportedError(f"the first batch ended at version {to.version}, before the startingVersion "
                                       f"{self.starting_version}: that is not the query's startingVersion",
                                       hint=f"pass the query's startingVersion option as {arg('delta_starting_version')}",
                                       param="delta_starting_version")
            begin = _Position(self.starting_version, -1, False)
        elif start is None:  # Delta's own first batch without startingVersion: the snapshot at the end's version, or
            begin = _Position(to.version if to.starting else to.version - 1, -1, True)  # the one before past it
        else:
            begin = _position(start)
        out: list[DeltaFile] = []
        if begin.starting:
            snap = self.snapshot(begin.version)
            last = to.index if to.starting and to.version == begin.version else len(snap) - 1
            out += [f for f in snap if begin.index < f.index <= last]
            if to.starting:
                return out
            begin = _Position(begin.version + 1, -1, False)
        for version in range(begin.version, min(to.version, self.latest()) + 1):
            files = self.added(version)
            low = begin.index if version == begin.version else -1
            high = to.index if version == to.version else len(files) - 1
            out += [f for f in files if low < f.index <= high]
        return out

    def location_of(self, file: DeltaFile) -> str:
        return f"{self.location.rstrip('/')}/{unquote(file.path)}"
