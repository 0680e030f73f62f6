"""The state a store partition loads at a version, read whole from its files for the checks that judge every row
(within a budget of bytes per check)."""
from __future__ import annotations

from typing import Iterable, Iterator

from wmcheck.statestore.formats.codecs import decompress
from wmcheck.statestore.formats.content import Decoding
from wmcheck.statestore.formats.files import StateFile, StorePartition
from wmcheck.statestore.formats.load import StoreLoad, resolve
from wmcheck.statestore.formats.records import DELETE, PUT, Record, changelog_records, sized_records
from wmcheck.statestore.formats.registry import RECORDS, ROCKSDB_CHANGELOG, ROCKSDB_ZIP, SST_DIR
from wmcheck.statestore.rocksdb.sst import TableEntry, read_whole
from wmcheck.statestore.rocksdb.zips import read_snapshot_zip

from ..errors import CheckpointError
from .context import Context
from .state_reads import lineages, state_reads

READ_LIMIT = 32 << 20
"""The most bytes of state files one check reads here (larger states are not judged)."""
READ_HERE = (RECORDS, ROCKSDB_ZIP, ROCKSDB_CHANGELOG)
"""The decoders of the files read here: HDFS deltas and snapshots, RocksDB snapshots and changelogs."""


class Reader:
    """Loads a store partition's state at a version from its files, within ``limit`` bytes in all."""

    def __init__(self, ctx: Context, limit: int = READ_LIMIT) -> None:
        self.ctx, self.codec, self.budget = ctx, Decoding.of(ctx.conf).codec, limit
        self.over = False
        """Whether a load was left unread: past the budget."""
        self.removals = 0
        """Deletes (and RocksDB tombstones) in the files of the loads read so far."""
        self.families: dict[str, int] = {}
        """The column families (name -> id) of the snapshot of the last load read with ``families``."""

    def take(self, paths: list[str], size: int) -> dict[str, bytes] | None:
        """The bytes of ``paths`` (``size`` in all, as stored), None past the budget (:attr:`over`)."""
        if size > self.budget:
            self.over = True
            return None
        self.budget -= size
        kept = state_reads(self.ctx).read_state  # what the content check read already
        found = {p: kept[p] for p in paths if p in kept}
        missing = [p for p in paths if p not in found]
        return {**found, **self.ctx.read_state(missing)} if missing else found

    def state(self, part: StorePartition, version: int, ids: dict[int, str] | None,
              families: bool = False) -> dict[bytes, bytes] | None:
        """The rows version ``version`` holds (RocksDB: without each row's version byte); None when it cannot be
        rebuilt, is in a format not read here, or is over the budget. ``families``: a RocksDB store with column
        families (transformWithState), its keys as stored (the family's 2-byte id first) and the families in
        :attr:`families`; None without a snapshot naming them."""
        return self.rows(resolve(part, version, ids, lineages(self.ctx)), families)

    def rows(self, load: StoreLoad, families: bool = False) -> dict[bytes, bytes] | None:
        """The rows a load's chain of files rebuilds, as :meth:`state` gives them."""
        part = load.part
        if not load.loadable or any(f.format.decoder not in READ_HERE for f in load.chain):
            return None
        zipped = bool(load.chain) and load.chain[0].format.decoder == ROCKSDB_ZIP
        if families and not zipped:
            return None
        try:
            files = self._snapshot(part, load.chain[0], families) if zipped else []
            if files is None:
                return None
            steps = [f for f in load.chain if f.format.decoder != ROCKSDB_ZIP]
            data = self.take([f.path for f in steps], sum(f.size for f in steps))
            if data is None:
                return None
            for f in steps:
                plain = decompress(data[f.path], self.codec, f.path)
                read = changelog_records if f.format.decoder == ROCKSDB_CHANGELOG else sized_records
                files.append(self._counted(read(plain, f.path)))
            from wmcheck.statestore.encodings.join_rows import fold

            state = fold(files)
        except (CheckpointError, KeyError):
            return None  # damaged (WM039) or unreadable
        rocksdb = any(f.format.decoder.rocksdb for f in load.chain)
        return {k[1:]: v[1:] for k, v in state.items()} if rocksdb and not families else state

    def _counted(self, records: Iterable[Record]) -> Iterator[Record]:
        for record in records:
            self.removals += record[0] == DELETE
            yield record

    def _snapshot(self, part: StorePartition, zip_file: StateFile, families: bool = False) -> list[Iterable[Record]] | None:
        """A RocksDB snapshot's rows as one put per live key (the newest entry of each key across its table files);
        None for a table not read whole here, or column families other than asked for."""
        got = self.take([zip_file.path], zip_file.size)
        if got is None:
            return None
        _, meta = read_snapshot_zip(got[zip_file.path], zip_file.path)
        if bool(meta.column_families) != families:
            return None
        self.families = dict(meta.column_families)
        tables = [f"{part.directory}/{SST_DIR}/{f.dfs_name}" for f in meta.sst_files]
        data = self.take(tables, sum(f.size for f in meta.sst_files))
        if data is None:
            return None
        newest: dict[bytes, TableEntry] = {}
        kept = state_reads(self.ctx).verified_tables
        for path in tables:
            entries = read_whole(data[path], list, kept[path].blocks if path in kept else None)
            if entries is None:
                return None
            for e in entries:
                if e.key not in newest or newest[e.key].sequence < e.sequence:
                    newest[e.key] = e
        self.removals += sum(not e.live for e in newest.values())
        return [[(PUT, k, e.value) for k, e in newest.items() if e.live]]
