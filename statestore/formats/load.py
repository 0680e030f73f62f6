"""Which state files Spark reads to load a store partition at a version, in its order and with its fallbacks,
and whether it reads them (their contents decoded by :mod:`wmcheck.statestore.formats.content`).

Spark 4.3 (``HDFSBackedStateStoreProvider.loadMap``, ``RocksDB.load``, ``AutoSnapshotLoader``): the newest full
copy at or below the version (HDFS ``V.snapshot``, RocksDB ``V.zip`` with the ``SSTs/`` files it names), then every
increment after it (``V.delta``, ``V.changelog``). A full copy that fails to load is skipped when automatic snapshot
repair is on (``stateStore.autoSnapshotRepair.enabled``, on by default outside Spark's own tests; for RocksDB only
with changelog checkpointing): the loader takes the next older one at or below the version, or the empty state 0,
at most ``maxChangeFileReplay`` (500) versions back, and then needs every increment from there. An increment
that fails to load fails the query (``CANNOT_LOAD_STATE_STORE``).

Checkpoint format 2 (``RocksDB.loadWithCheckpointId``): the last commit names the unique id of the version to load
(``commits/V-1``), and the rest comes from the lineage Spark recorded, not from older commits: ``V_<id>.zip`` when
it exists, else the lineage in the header of ``V_<id>.changelog`` (the versions and unique ids from the full copy
its run loaded to ``V-1``). The full copies it can start from are the ``V'_<id'>.zip`` of that lineage (newest
first, then the empty state, which needs the lineage to reach version 1); the changelogs replayed are the
lineage's. When that first attempt fails, snapshot repair walks the lineages of older changelogs back
(``getFullLineage``, at most ``maxChangeFileReplay`` versions) for older full copies.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Collection, Iterable, Sequence

from wmcheck.checkpoint.checksums import verify_hadoop_crc
from wmcheck.checkpoint.errors import CheckpointError
from wmcheck.checkpoint.fs import FileSystem
from wmcheck.checkpoint.layout import hadoop_sidecar
from wmcheck.checkpoint.records import dataclass
from wmcheck.statestore.formats.codecs import decompress
from wmcheck.statestore.formats.content import Damage, Decoding, damage, shared_damage
from wmcheck.statestore.formats.files import StateFile, StorePartition
from wmcheck.statestore.formats.records import LineageItem, changelog_lineage
from wmcheck.statestore.formats.registry import Role
from wmcheck.statestore.formats.row_checksums import RowPlace
from wmcheck.statestore.rocksdb.sst import CheckedTable, checked

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
    lineage: tuple[LineageItem, ...] | None = None
    """Checkpoint format 2 resolved as Spark does: the versions and unique ids Spark follows (the lineage recorded
    in the version's changelog, with the version itself); None: by file names (and the commits' unique ids)."""
    missing_id: str | None = None
    """The unique id of :attr:`missing`'s file that Spark looks for (checkpoint format 2)."""

    @property
    def loadable(self) -> bool:
        return self.missing is None and self.failure is None


class Lineages:
    """The lineage recorded in checkpoint format 2 changelogs, read from their headers (the first blocks of the
    stream, as Spark's changelog reader reads it: the rest of the file is not read), each file once."""

    HEAD = 1 << 16
    """Bytes read for a header: more than a compressed block of Spark's codecs (32 KiB)."""

    def __init__(self, fs: FileSystem, codec: str) -> None:
        self.fs, self.codec = fs, codec
        self.known: dict[str, tuple[LineageItem, ...] | CheckpointError] = {}

    def __call__(self, f: StateFile) -> tuple[LineageItem, ...]:
        """The lineage ``f`` records; CheckpointError when Spark cannot read it."""
        if f.path not in self.known:
            try:
                head = self.fs.read_head(f.path, self.HEAD)
                try:
                    self.known[f.path] = changelog_lineage(decompress(head, self.codec, f.path, 1), f.path)
                except CheckpointError:
                    if len(head) < self.HEAD:
                        raise
                    data = self.fs.read(f.path)  # a header longer than the first blocks
                    self.known[f.path] = changelog_lineage(decompress(data, self.codec, f.path), f.path)
            except CheckpointError as exc:
                self.known[f.path] = exc
        found = self.known[f.path]
        if isinstance(found, CheckpointError):
            raise found
        return found


def resolve(part: StorePartition, version: int, unique_ids: dict[int, str] | None = None,
            lineages: Lineages | None = None) -> StoreLoad:
    """The files Spark reads, by their names only; checkpoint format 2 with ``lineages``: as Spark follows the
    version's lineage (reading changelog headers), else by the unique ids of the commits."""
    uid = unique_ids.get(version) if unique_ids else None
    if lineages is not None and uid is not None and version > 0:
        return LineageLoad(part, version, uid, lineages, None).load(unique_ids)
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


def replays(load: StoreLoad) -> list[StoreLoad]:
    """The loads of the version of ``load``'s full copy from increments instead, newest first: from each older full
    copy (within ``maxChangeFileReplay``), then from the empty state, with every increment up to that version, as
    Spark's snapshot repair would read them (the routes some increment is missing from left out); none without a
    full copy first in the chain (checkpoint format 2 lineages: not resolved here)."""
    if not load.chain or load.chain[0].format.role != "base" or load.lineage is not None:
        return []
    copy = load.chain[0]
    at = replace(load, version=copy.version, chain=(copy,))
    out = []
    for base in [*_older_bases(at, copy.version), None]:
        steps = _increments(at, base.version if base is not None else 0)
        if steps:
            out.append(replace(at, chain=tuple([base, *steps] if base is not None else steps)))
    return out


def _older_bases(load: StoreLoad, below: int) -> list[StateFile]:
    ids = load.unique_ids
    return sorted((f for f in load.part.files if f.format.role == "base" and f.version < below
                   and load.version - f.version <= MAX_CHANGE_FILE_REPLAY
                   and (ids is None or f.unique_id is None or ids.get(f.version) in (None, f.unique_id))),
                  key=lambda f: -f.version)


class LineageLoad:
    """Checkpoint format 2: ``RocksDB.loadWithCheckpointId`` of version ``version`` with unique id ``uid``, its
    files judged by ``damage`` (None: every file present loads)."""

    def __init__(self, part: StorePartition, version: int, uid: str, lineages: Lineages,
                 damage: Callable[[StateFile], Damage | None] | None) -> None:
        self.part, self.version, self.uid, self.lineages = part, version, uid, lineages
        self.judge = damage or (lambda f: None)
        self.judged: dict[str, Damage | None] = {}
        self.files: dict[tuple[int, str | None, Role], StateFile] = {(f.version, f.unique_id, f.format.role): f
                                                                     for f in part.files}

    def _file(self, version: int, uid: str, role: Role) -> StateFile | None:
        """The full copy (``base``) or the changelog (``increment``) of ``version`` with unique id ``uid``."""
        return self.files.get((version, uid, role))

    def damage(self, f: StateFile) -> Damage | None:
        """What Spark does with ``f``'s contents, judged once."""
        if f.path not in self.judged:
            self.judged[f.path] = self.judge(f)
        return self.judged[f.path]

    def _lineage(self, version: int, uid: str) -> dict[int, str] | Damage | None:
        """version -> unique id Spark follows to load ``version``: the version alone when its full copy exists, else
        the lineage of its changelog and itself; None when neither file exists, Damage when the lineage cannot be
        read."""
        if self._file(version, uid, "base") is not None:
            return {version: uid}
        log = self._file(version, uid, "increment")
        if log is None:
            return None
        try:
            items = dict(self.lineages(log))
        except CheckpointError as exc:
            return self.damage(log) or Damage(log.path, exc.byte, exc.message, version)
        return {**items, version: uid}

    def _full(self) -> dict[int, str] | None:
        """``getFullLineage``: the lineages of older changelogs followed back to ``max(1, V - maxChangeFileReplay)``;
        None where Spark's walk fails (a changelog missing or unreadable, a gap), and Spark keeps the first lineage."""
        start, found = max(1, self.version - MAX_CHANGE_FILE_REPLAY), {self.version: self.uid}
        earliest = self.version
        while earliest > start:
            log = self._file(earliest, found[earliest], "increment")
            if log is None:
                return None
            try:
                older = {v: i for v, i in self.lineages(log) if start <= v < earliest}
            except CheckpointError:
                return None
            if not older:
                return None
            found.update(older)
            earliest = min(older)
        return found if set(found) == set(range(start, self.version + 1)) else None

    def _bases(self, lineage: dict[int, str]) -> list[int]:
        """``getSnapshotVersionsAndUniqueIdsFromLineage``: the versions of the lineage whose full copy exists, newest
        first."""
        return [v for v, i in sorted(lineage.items(), reverse=True) if self._file(v, i, "base") is not None]

    def _gap(self, base: int, lineage: dict[int, str]) -> Damage | None:
        """Why the lineage cannot rebuild the version from ``base`` (0: the empty state): versions it does not name."""
        gaps = [v for v in range(base + 1, self.version + 1) if v not in lineage]
        if not gaps:
            return None
        head = self._file(self.version, self.uid, "increment")
        return Damage(head.path if head is not None else self.part.directory, None,
                      f"its lineage does not name version{f's {gaps[0]}..{gaps[-1]}' if len(gaps) > 1 else f' {gaps[0]}'}, "
                      f"which a load from {'the empty state' if base == 0 else f'the snapshot of version {base}'} "
                      f"replays (IllegalStateException)", self.version)

    def _zip(self, base: int, lineage: dict[int, str]) -> StateFile | None:
        return self._file(base, lineage[base], "base") if base else None

    def _repair(self, candidates: list[int], lineage: dict[int, str], skipped: list[Damage]) -> int | None:
        """The first of ``candidates`` (full copies, newest first) within ``maxChangeFileReplay`` that loads; the
        damaged ones go into ``skipped``."""
        for base in candidates:
            if self.version - base > MAX_CHANGE_FILE_REPLAY:
                continue
            copy = self._zip(base, lineage)
            bad = self._gap(base, lineage) or (self.damage(copy) if copy is not None else None)
            if bad is None or bad.on_read:
                return base
            skipped += [bad] if copy is not None else []
        return None

    def load(self, unique_ids: dict[int, str] | None) -> StoreLoad:
        """What Spark does: the files it reads, the full copies it skips, the file or version it fails on."""
        found = self._lineage(self.version, self.uid)
        if found is None:
            return StoreLoad(self.part, self.version, unique_ids, (), self.version, missing_id=self.uid, lineage=())
        if isinstance(found, Damage):
            return StoreLoad(self.part, self.version, unique_ids, (), None, failure=found, lineage=())
        lineage, skipped = found, []
        bases = self._bases(lineage) + [0]
        chosen = bases[0]
        first = self._zip(chosen, lineage)
        problem = self._gap(chosen, lineage) or (self.damage(first) if first is not None else None)
        if problem is not None and not problem.on_read:
            done = StoreLoad(self.part, self.version, unique_ids, (), None, failure=problem,
                             lineage=tuple(sorted(lineage.items())))
            if not auto_repair(self.part):
                return done
            skipped += [problem] if first is not None else []
            full = self._full()
            lineage = full or lineage
            repaired = self._repair(sorted({*bases, *self._bases(full or {}), 0} - {chosen}, reverse=True), lineage,
                                    skipped)
            if repaired is None:
                return replace(done, skipped=tuple(skipped), lineage=tuple(sorted(lineage.items())))
            chosen = repaired
        base_file = self._zip(chosen, lineage)
        chain = [base_file] if base_file is not None else []
        repaired = problem is not None and not problem.on_read
        done = StoreLoad(self.part, self.version, unique_ids, (), None, skipped=tuple(skipped),
                         fallback=chosen if repaired else None, lineage=tuple(sorted(lineage.items())))
        for v in range(chosen + 1, self.version + 1):
            log = self._file(v, lineage[v], "increment")
            if log is None:
                return replace(done, chain=tuple(chain), missing=v, missing_id=lineage[v])
            chain.append(log)
        for f in chain[1 if base_file is not None else 0:]:
            bad = self.damage(f)
            if bad is not None:
                return replace(done, chain=tuple(chain), failure=replace(bad, version=f.version))
        later = self.damage(base_file) if base_file is not None else None  # a data block the batch fails on
        return replace(done, chain=tuple(chain), failure=later if later is not None and later.on_read else None)


class ContentCheck:
    """Decodes the files of loads, reading each file once."""

    def __init__(self, fs: FileSystem, decoding: Decoding,
                 read: Callable[[list[str]], dict[str, bytes]] | None = None,
                 checksum: Callable[[str], str | None] | None = None, lineages: Lineages | None = None,
                 sidecars: Collection[str] = (), on_table: Callable[[str, CheckedTable], None] | None = None,
                 copied: Callable[[str], str | None] | None = None) -> None:
        self.fs = fs
        self.copied = copied
        """Why a file ``read`` read does not match its Hadoop sidecar, as verified on the way (else read here)."""
        self.on_table = on_table
        """Called with each snapshot table file (SST) read, verified."""
        self.sidecars = sidecars
        """The Hadoop checksum sidecars listed (``.name.crc``): those of SST files are verified as Spark copies them."""
        self.decoding = decoding
        self.read_many = read or fs.read_many
        self.checksum = checksum
        """Why a file read does not match its Spark checksum file (Spark fails to read it), None when it does."""
        self.data: dict[str, bytes] = {}
        self.unreadable: dict[str, CheckpointError] = {}
        self.lineages = lineages or Lineages(fs, decoding.codec)

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
            # Spark unzips a snapshot through Hadoop's checksummed file system
            copied = self.copied(f.path) if self.copied else self._sidecar(f.path, data)
            if copied is not None:
                return Damage(f.path, None, f"{copied} (Spark unzips the snapshot through Hadoop's checksummed file "
                                            "system: ChecksumException)", f.version)
            present = {f"{part.directory}/{f.format.shared_dir}/{i.name}": i.size for i in part.sst_files}
            found = shared_damage(data, f.path, f"{part.directory}/{f.format.shared_dir}", present, self._table,
                                  self._sidecar)
        return None if found is None else replace(found, version=f.version)

    def _table(self, path: str) -> CheckedTable:
        table = checked(self.fs.read(path))
        if self.on_table is not None:
            self.on_table(path, table)
        return table

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
        if load.lineage is not None and load.unique_ids:
            uid = load.unique_ids[load.version]
            return LineageLoad(load.part, load.version, uid, self.lineages,
                               lambda f: self.file_damage(load.part, f)).load(load.unique_ids)
        if load.missing is not None or not load.chain:
            return load
        part, chain, skipped, fallback = load.part, list(load.chain), [], None
        later: Damage | None = None  # a data block the batch fails on, in the full copy that loads
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
        """(version, chain, a data block the batch fails on) of the older full copy Spark's snapshot repair loads
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
                 lineages: Lineages | None = None, sidecars: Collection[str] = (),
                 on_table: Callable[[str, CheckedTable], None] | None = None,
                 copied: Callable[[str], str | None] | None = None) -> list[StoreLoad]:
    """Every load with its files' contents decoded (read in rounds, in parallel, by ``read``: default the file
    system's ``read_many``; ``checksum(path)``: why a file read does not match its Spark checksum file;
    ``lineages``: the checkpoint format 2 lineages already read; ``sidecars``: the Hadoop checksum sidecars listed);
    ``progress(done, total)`` after each store partition; ``on_table(path, table)`` for each snapshot table file
    read, verified (:class:`wmcheck.statestore.rocksdb.sst.CheckedTable`: readers of it hash no block again); ``copied(path)``: why a
    file ``read`` read does not match its Hadoop sidecar (verified as it was read)."""
    check = ContentCheck(fs, decoding, read, checksum, lineages, sidecars, on_table, copied)
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
