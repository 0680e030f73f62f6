"""Checks of a stream-stream join's state: its four stores per partition agree as the next batch loads them."""
from __future__ import annotations

from typing import Iterable, Iterator

from ..errors import CheckpointError
from ..join_rows import Missing, fold, missing_rows, shown_key
from ..model import PINNED_CONFS
from ..rocksdb_sst import TableEntry, read_whole
from ..rocksdb_zip import read_snapshot_zip
from ..state_codecs import decompress
from ..state_content import Decoding
from ..state_files import StateFile, StorePartition
from ..state_load import resolve
from ..state_records import PUT, Record, changelog_records, sized_records
from .context import Context
from .definition import ERROR, Issue, check
from .state import CHANGELOG_DECODER, SST_DIR, ZIP_DECODER, Plan, lineages, load_version, plans, rewind_fix
from .text import plural

JOIN = "symmetricHashJoin"
COUNTS, ROWS = "keyToNumValues", "keyWithIndexToValue"
READ_LIMIT = 32 << 20
"""The most bytes of join state files one check reads (larger states are not judged)."""
VERSIONS_BACK = 20
"""How many versions before the next load are tried for the newest that agrees (the rewind's target)."""


READ_HERE = ("records", ZIP_DECODER, CHANGELOG_DECODER)
"""The decoders of the files read here: HDFS deltas and snapshots, RocksDB snapshots and changelogs."""


def side_pairs(ctx: Context) -> dict[tuple[int, int, str], dict[str, Plan]]:
    """(operator, partition, side) -> {store kind: its plan} of every join of state format 1 or 2 (a store per side
    and kind) whose two stores of a side the next batch can load."""
    out: dict[tuple[int, int, str], dict[str, Plan]] = {}
    for plan in plans(ctx):
        side, _, kind = plan.part.store.partition("-")
        if plan.op.name == JOIN and kind in (COUNTS, ROWS) and plan.load.loadable:
            out.setdefault((plan.op.operator_id, plan.part.partition, side), {})[kind] = plan
    return {k: v for k, v in out.items() if len(v) == 2}


class Reader:
    """Loads a store partition's state at a version from its files, within :data:`READ_LIMIT` bytes in all."""

    def __init__(self, ctx: Context) -> None:
        self.ctx, self.codec, self.budget = ctx, Decoding.of(ctx.conf).codec, READ_LIMIT
        self.over = False
        """Whether a load was left unread: past the budget."""

    def _take(self, paths: list[str], size: int) -> dict[str, bytes] | None:
        if size > self.budget:
            self.over = True
            return None
        self.budget -= size
        return self.ctx.read_state(paths)

    def state(self, part: StorePartition, version: int, ids: dict[int, str] | None) -> dict[bytes, bytes] | None:
        """The rows version ``version`` holds (RocksDB: without each row's version byte); None when it cannot be
        rebuilt, is in a format not read here, or is over the budget."""
        load = resolve(part, version, ids, lineages(self.ctx))
        if not load.loadable or any(f.format.decoder not in READ_HERE for f in load.chain):
            return None
        try:
            zipped = bool(load.chain) and load.chain[0].format.decoder == ZIP_DECODER
            files = self._snapshot(part, load.chain[0]) if zipped else []
            if files is None:
                return None
            steps = [f for f in load.chain if f.format.decoder != ZIP_DECODER]
            data = self._take([f.path for f in steps], sum(f.size for f in steps))
            if data is None:
                return None
            for f in steps:
                plain = decompress(data[f.path], self.codec, f.path)
                read = changelog_records if f.format.decoder == CHANGELOG_DECODER else sized_records
                files.append(read(plain, f.path))
            state = fold(files)
        except (CheckpointError, KeyError):
            return None  # damaged (WM039) or unreadable
        rocksdb = any(f.format.decoder in (ZIP_DECODER, CHANGELOG_DECODER) for f in load.chain)
        return {k[1:]: v[1:] for k, v in state.items()} if rocksdb else state

    def _snapshot(self, part: StorePartition, zip_file: StateFile) -> list[Iterable[Record]] | None:
        """A RocksDB snapshot's rows as one put per live key (the newest entry of each key across its table files);
        None for column families or a table not read whole here."""
        got = self._take([zip_file.path], zip_file.size)
        if got is None:
            return None
        _, meta = read_snapshot_zip(got[zip_file.path], zip_file.path)
        if meta.column_families:
            return None
        tables = [f"{part.directory}/{SST_DIR}/{f.dfs_name}" for f in meta.sst_files]
        data = self._take(tables, sum(f.size for f in meta.sst_files))
        if data is None:
            return None
        newest: dict[bytes, TableEntry] = {}
        for path in tables:
            entries = read_whole(data[path], list)
            if entries is None:
                return None
            for e in entries:
                if e.key not in newest or newest[e.key].sequence < e.sequence:
                    newest[e.key] = e
        return [[(PUT, k, e.value) for k, e in newest.items() if e.live]]


def disagreement(reader: Reader, pair: dict[str, Plan], version: int, key) -> list[Missing] | None:
    """The keys whose count names rows the indexed store lacks at ``version``; None when it cannot be read."""
    counts = reader.state(pair[COUNTS].part, version, pair[COUNTS].ids)
    rows = reader.state(pair[ROWS].part, version, pair[ROWS].ids) if counts is not None else None
    return None if counts is None or rows is None else missing_rows(counts, rows, key)


@check("WM068", ERROR, "a stream-stream join's value counts name rows its state lacks")
def join_counts_disagree(ctx: Context) -> Iterator[Issue]:
    if (ctx.conf(PINNED_CONFS["encoding_format"]) or "unsaferow").lower() != "unsaferow" or not ctx.content:
        return
    if Decoding.of(ctx.conf).row_checksums:
        return  # rows with checksums: not read here
    reader, version = Reader(ctx), load_version(ctx)
    for (op, partition, side), pair in sorted(side_pairs(ctx).items()):
        schema = ctx.ckpt.store_schema(op, f"{side}-{COUNTS}")
        if schema is None:
            continue
        found = disagreement(reader, pair, version, schema.key_schema)
        if not found:
            continue
        agrees = next((v for v in range(version - 1, max(version - 1 - VERSIONS_BACK, 0), -1)
                       if disagreement(reader, pair, v, schema.key_schema) == []), None)
        first = found[0]
        shown = f"state/{op}/{partition}/{side}-{{{COUNTS},{ROWS}}}"
        why, fix = rewind_fix(ctx, agrees) if agrees is not None else rewind_fix(ctx, 0)
        yield Issue(pair[COUNTS].part.directory, (
            f"{shown}: as the next batch loads them (version {version}), {side}-{COUNTS} counts rows that "
            f"{side}-{ROWS} does not hold for {plural(len(found), 'join key')}, e.g. key ({shown_key(first.key, schema.key_schema)}): "
            f"{first.values} rows, none at index {first.gap} (the two stores' files are of different versions: a restore "
            "or copy that mixed them). Spark fails when it reads that key, at the latest when it evicts the side's "
            "rows ('[STREAM_STREAM_JOIN_INCONSISTENT_STATE.NULL_VALUE] Detected inconsistency in stream-stream join "
            "state', tested with Spark 4.3); with spark.sql.streaming.stateStore.skipNullsForStreamStreamJoins.enabled "
            "it skips the missing rows: they are lost to the join"
            + (f"; the newest version whose two stores agree is {agrees}: a rewind to the batch before it (where "
               f"{why}) makes Spark load it and write the later versions again" if agrees is not None else
               f"; no version of the last {VERSIONS_BACK} agrees: {why}")
        ), fix)
    if reader.over:
        ctx.notes.append(f"WM068 reads {READ_LIMIT:,} bytes of join state files per check and left the rest unjudged "
                         "(their value counts are not compared with their rows)")
