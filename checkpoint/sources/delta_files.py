"""The data files a Delta source read in one batch, from its table's ``_delta_log`` (no JVM): ``replay --delta-source``.

Delta's source (delta-spark 4.4, ``DeltaSource.scala``, ``DeltaSourceSnapshot.scala``) numbers the files it serves:
the starting snapshot's live files (``isStartingVersion``) sorted by ``(modificationTime, path)``, index 0..n-1; after
it, each commit's ``add`` actions with ``dataChange`` in the order the commit lists them, index 0..n-1. An offset
``(reservoirVersion, index)`` is the last file a batch read (index -1: none of that version yet); a batch reads the files
after the previous batch's offset up to its own. tests/test_delta_replay.py replays every batch of
fixtures/delta_source_agg and compares the rows with the rows the query read.
"""
from __future__ import annotations

from typing import Any, Mapping
from urllib.parse import unquote

from wmcheck.checkpoint.logs.source_offsets import SourceOffset
from wmcheck.checkpoint.records import dataclass

from ..errors import MissingFileError, UnsupportedError, arg
from ..logs.delta_log import LOG_DIR, log_actions, open_delta_table

PARAM = "delta_source"


@dataclass(frozen=True)
class DeltaFile:
    """One data file the source served: its version, its index there, its path as the ``add`` names it."""

    version: int
    index: int
    path: str
    size: int | None


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

    def __init__(self, location: str, fs_options: Mapping[str, str] | None = None) -> None:
        self.fs = open_delta_table(location, fs_options, PARAM)
        self.location = self.fs.uri()
        self._commits: dict[int, list[dict[str, Any]]] = {}
        self.table_id = self._table_id()

    def _read(self, version: int) -> list[dict[str, Any]]:
        if version not in self._commits:
            path = f"{LOG_DIR}/{version:020d}.json"
            if not self.fs.exists(path):
                raise MissingFileError(f"the commit of version {version} is gone from the table's log: the files the "
                                       "source read then are unknown", path=f"{self.location}/{path}",
                                       hint="replay the batches after it", param=PARAM)
            self._commits[version] = list(log_actions(self.fs.read(path), path))
        return self._commits[version]

    def _table_id(self) -> str | None:
        versions = sorted(int(n[:20]) for n in self.fs.names(LOG_DIR) if n.endswith(".json") and n[:20].isdigit())
        for version in reversed(versions):
            meta = next((a["metaData"] for a in self._read(version) if isinstance(a.get("metaData"), dict)), None)
            if meta is not None:
                return str(meta.get("id"))
        return None

    def latest(self) -> int:
        names = [int(n[:20]) for n in self.fs.names(LOG_DIR) if n.endswith(".json") and n[:20].isdigit()]
        return max(names, default=-1)

    def added(self, version: int) -> list[DeltaFile]:
        """The files commit ``version`` serves to the stream (its ``add`` actions with ``dataChange``)."""
        adds = [a["add"] for a in self._read(version) if isinstance(a.get("add"), dict) and a["add"].get("dataChange", True)]
        if any(a.get("partitionValues") for a in adds):
            raise UnsupportedError("the table is partitioned: its files do not hold the partition columns",
                                   path=f"{self.location}/{LOG_DIR}/{version:020d}.json",
                                   hint=f"replay it with delta-spark, or without {arg('delta_source')}")
        return [DeltaFile(version, i, str(a["path"]), a.get("size")) for i, a in enumerate(adds)]

    def snapshot(self, version: int) -> list[DeltaFile]:
        """The live files at ``version`` in the order the source serves a starting snapshot: by modification time,
        then path (from the JSON commits 0..version)."""
        live: dict[str, dict[str, Any]] = {}
        for v in range(version + 1):
            for action in self._read(v):
                if isinstance(action.get("add"), dict):
                    live[str(action["add"]["path"])] = action["add"]
                elif isinstance(action.get("remove"), dict):
                    live.pop(str(action["remove"]["path"]), None)
        ordered = sorted(live.values(), key=lambda a: (int(a.get("modificationTime") or 0), str(a["path"])))
        return [DeltaFile(version, i, str(a["path"]), a.get("size")) for i, a in enumerate(ordered)]

    def batch_files(self, start: SourceOffset | None, end: SourceOffset) -> list[DeltaFile]:
        """The files after ``start`` (the previous batch's end offset; None: the first batch, which starts at its own
        starting snapshot) up to ``end``."""
        to = _position(end)
        if start is None:
            if not to.starting:
                raise UnsupportedError("the first batch started where the query's startingVersion option said, which "
                                       "the checkpoint does not record", hint="replay from the second batch on",
                                       param=PARAM)
            begin = _Position(to.version, -1, True)
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
