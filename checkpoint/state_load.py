"""Which state files Spark reads to load a store partition at a version, in its order and with its fallbacks,
and whether it reads them (their contents decoded by :mod:`.state_content`).

Spark 4.3 (``HDFSBackedStateStoreProvider.loadMap``, ``RocksDB.load``, ``AutoSnapshotLoader``): the newest full
copy at or below the version (HDFS ``V.snapshot``, RocksDB ``V.zip`` with the ``SSTs/`` files it names; with
checkpoint format 2 only the files of the unique ids the commit log names), then every increment after it
(``V.delta``, ``V.changelog``). A full copy that fails to load is skipped when automatic snapshot repair is on
(``stateStore.autoSnapshotRepair.enabled``, on by default outside Spark's own tests; for RocksDB only with
changelog checkpointing): the loader takes the next older one at or below the version, or the empty state 0,
at most ``maxChangeFileReplay`` (500) versions back, and then needs every increment from there. An increment
that fails to load fails the query (``CANNOT_LOAD_STATE_STORE``).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Collection, Iterable, Sequence

from .checksums import verify_hadoop_crc
from .errors import CheckpointError
from .fs import FileSystem
from .layout import hadoop_sidecar
from .row_checksums import RowPlace
from .state_content import Damage, Decoding, damage, shared_damage
from .state_files import StateFile, StorePartition

MAX_CHANGE_FILE_REPLAY = 500
"""``spark.sql.streaming.stateStore.autoSnapshotRepair.maxChangeFileReplay``'s default."""
READ_BATCH = 256
"""Files read in one round (through the file system's bounded thread pool)."""


@dataclass(frozen=True)
class StoreLoad:
    """The load of one store partition at ``version``: the files Spark reads (full copy first) and what happens."""

    part: StorePartition
    version: int
    unique_ids: dict[int, str] | None
    chain: tuple[StateFile, ...]
    missing: int | None
    """The version, walking down from ``version``, with neither a full copy nor an increment (Spark fails)."""
    failure: Damage | None = None
    """The file Spark fails on (content verified)."""
    skipped: tuple[Damage, ...] = ()
    """Full copies Spark fails to load and skips (automatic snapshot repair)."""
    fallback: int | None = None
    """The full copy's version Spark falls back to (0: the empty state) when it skips one."""

    @property
    def loadable(self) -> bool:
        return self.missing is None and self.failure is None


def resolve(part: StorePartition, version: int, unique_ids: dict[int, str] | None = None) -> StoreLoad:
    """The files Spark reads, by their names only."""
    chain, missing = part.restore_plan(version, unique_ids)
    return StoreLoad(part, version, unique_ids, tuple(chain), missing)


def auto_repair(part: StorePartition) -> bool:
    """Whether Spark 4.3 skips a full copy it cannot load: HDFS always, RocksDB with changelog checkpointing."""
    return part.provider == "hdfs" or any(f.format.role == "increment" for f in part.files)


def _increments(load: StoreLoad, after: int) -> list[StateFile] | None:
    """The increments of versions ``after+1..version`` (None when one is missing)."""
    ids = load.unique_ids
    by_version = {f.version: f for f in load.part.files if f.format.role == "increment"
                  and (ids is None or f.unique_id is None or ids.get(f.version) in (None, f.unique_id))}
    steps = [by_version.get(v) for v in range(after + 1, load.version + 1)]
    return None if any(s is None for s in steps) else [s for s in steps if s is not None]


def _older_bases(load: StoreLoad, below: int) -> list[StateFile]:
    ids = load.unique_ids
    return sorted((f for f in load.part.files if f.format.role == "base" and f.version < below
                   and load.version - f.version <= MAX_CHANGE_FILE_REPLAY
                   and (ids is None or f.unique_id is None or ids.get(f.version) in (None, f.unique_id))),
                  key=lambda f: -f.version)


class ContentCheck:
    """Decodes the files of loads, reading each file once."""

    def __init__(self, fs: FileSystem, decoding: Decoding,
                 read: Callable[[list[str]], dict[str, bytes]] | None = None,
                 checksum: Callable[[str], str | None] | None = None, sidecars: Collection[str] = ()) -> None:
        self.fs = fs
        self.sidecars = sidecars
        """The Hadoop checksum sidecars listed (``.name.crc``): those of SST files are verified as Spark copies them."""
        self.decoding = decoding
        self.read_many = read or fs.read_many
        self.checksum = checksum
        """Why a file read does not match its Spark checksum file (Spark fails to read it), None when it does."""
        self.data: dict[str, bytes] = {}
        self.unreadable: dict[str, CheckpointError] = {}

    def read(self, paths: Iterable[str]) -> None:
        wanted = [p for p in dict.fromkeys(paths) if p not in self.data]
        for start in range(0, len(wanted), READ_BATCH):
            chunk = wanted[start:start + READ_BATCH]
            try:
                got = self.read_many(chunk)
                self.data.update((p, got[p]) for p in chunk if p in got)
                if all(p in got for p in chunk):
                    continue
            except CheckpointError:
                pass
            for path in chunk:
                if path in self.data:
                    continue
                try:
                    self.data[path] = self.fs.read(path)
                except CheckpointError as exc:
                    self.data[path] = b""
                    self.unreadable[path] = exc

    def file_damage(self, part: StorePartition, f: StateFile) -> Damage | None:
        self.read([f.path])
        if f.path in self.unreadable:
            return Damage(f.path, None, f"cannot be read: {self.unreadable[f.path].message}", f.version)
        place = RowPlace(part.operator_id, part.store, part.partition, f.version, f.path)
        data = self.data[f.path]
        mismatch = self.checksum(f.path) if self.checksum else None
        found = Damage(f.path, None, f"{mismatch} (CHECKPOINT_FILE_CHECKSUM_VERIFICATION_FAILED)") if mismatch \
            else damage(data, f.format, self.decoding, f.path, place)
        if found is None and f.format.shared_dir:
            present = {f"{part.directory}/{f.format.shared_dir}/{i.name}": i.size for i in part.sst_files}
            found = shared_damage(data, f.path, f"{part.directory}/{f.format.shared_dir}", present, self.fs.read,
                                  self._sidecar)
        return None if found is None else replace(found, version=f.version)

    def _sidecar(self, path: str, data: bytes) -> str | None:
        """Why ``data`` does not match the Hadoop checksum sidecar of ``path`` (None: it does, or there is none)."""
        crc = hadoop_sidecar(path)
        if crc not in self.sidecars:
            return None
        try:
            found = verify_hadoop_crc(self.fs.read(crc), data, crc)
        except CheckpointError as exc:
            return f"its checksum sidecar {crc.rsplit('/', 1)[-1]} cannot be read: {exc.message}"
        return None if found.ok else f"{found.problem} ({crc.rsplit('/', 1)[-1]})"

    def verify(self, load: StoreLoad) -> StoreLoad:
        """``load`` with what Spark does with its files' contents."""
        if load.missing is not None or not load.chain:
            return load
        part, chain, skipped, fallback = load.part, list(load.chain), [], None
        later: Damage | None = None  # a data block the batch reads wrong, in the full copy that loads
        if chain[0].format.role == "base":
            bad = self.file_damage(part, chain[0])
            if bad is not None and bad.on_read:
                later = bad
            elif bad is not None:
                if not auto_repair(part):
                    return replace(load, failure=bad)
                found = self._fall_back(load, chain[0].version)
                if found is None:
                    return replace(load, failure=bad)
                skipped, (fallback, chain, later) = [bad], found
        for f in chain[1:] if chain and chain[0].format.role == "base" else chain:
            bad = self.file_damage(part, f)
            if bad is not None:
                return replace(load, chain=tuple(chain), failure=bad, skipped=tuple(skipped), fallback=fallback)
        return replace(load, chain=tuple(chain), skipped=tuple(skipped), fallback=fallback, failure=later)

    def _fall_back(self, load: StoreLoad, below: int) -> tuple[int, list[StateFile], Damage | None] | None:
        """(version, chain, a data block the batch reads wrong) of the older full copy Spark's snapshot repair loads
        instead (0: the empty state)."""
        for base in _older_bases(load, below):
            bad = self.file_damage(load.part, base)
            if bad is None or bad.on_read:
                steps = _increments(load, base.version)
                return None if steps is None else (base.version, [base, *steps], bad)
        if load.version > MAX_CHANGE_FILE_REPLAY:
            return None
        steps = _increments(load, 0)
        return None if steps is None else (0, steps, None)


def verify_loads(fs: FileSystem, loads: Sequence[StoreLoad], decoding: Decoding,
                 progress: Callable[[int, int], None] | None = None,
                 read: Callable[[list[str]], dict[str, bytes]] | None = None,
                 checksum: Callable[[str], str | None] | None = None,
                 sidecars: Collection[str] = ()) -> list[StoreLoad]:
    """Every load with its files' contents decoded (read in rounds, in parallel, by ``read``: default the file
    system's ``read_many``; ``checksum(path)``: why a file read does not match its Spark checksum file;
    ``sidecars``: the Hadoop checksum sidecars listed); ``progress(done, total)`` after each store partition."""
    check = ContentCheck(fs, decoding, read, checksum, sidecars)
    out = []
    for start in range(0, len(loads), 64):
        group = loads[start:start + 64]
        check.read(f.path for load in group if load.missing is None for f in load.chain)
        for load in group:
            out.append(check.verify(load))
            if progress is not None:
                progress(len(out), len(loads))
        check.data.clear()
    return out
