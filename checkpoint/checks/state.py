"""Checks of ``state/``: the state the next batch loads, leftovers, partitions, unique ids, checksums."""
from __future__ import annotations

import posixpath
import struct
from dataclasses import dataclass
from itertools import islice
from typing import Iterator

from .. import stale_columns
from ..errors import CheckpointError
from ..key_partitions import KEYED_BY_PARTITIONING, StoreRows, key_partitioner, row_fit, sample_rows, sample_table
from ..layout import DEFAULT_STORE, STATE, hadoop_sidecar, spark_sidecar, state_dir
from ..model import PINNED_CONFS, Operator, store_unique_ids
from ..numbers import is_number, java_long
from ..operator_kinds import is_transform_with_state
from ..operator_watermarks import CHECKPOINT, PLAN, operator_watermarks
from ..pinned_conf import ROW_CHECKSUM, effective
from ..relocation import SchemaReference, foreign_references, reachable, schema_references
from ..repair.requests import RelocateRequest
from ..rocksdb_sst import CheckedTable, TableEntry, read_whole
from ..row_checksums import VERIFICATION_FAILED, RowPlace
from ..stale_columns import Unproven
from ..stale_keys import EventField, FileChanges, event_time_reader, record_changes, table_changes
from ..state_codecs import decompress
from ..state_content import LOAD_ERROR, Decoding, damage
from ..state_files import BASE_KINDS, StateFile, StorePartition
from ..state_formats import formats_of, unloadable_base_name
from ..state_load import Lineages, StoreLoad, resolve, verify_loads
from ..state_records import DELETE, PUT, changelog_records, sized_records
from ..state_schema import event_time_field
from ..value_encoding import written_encoding
from .context import Context
from .definition import ERROR, WARNING, Fix, Instruction, Issue, check
from .logs import checkpoint_format
from .operator_metadata import stray_copies
from .remedies import rewind_before, state_rewind
from .repartition import moves
from .text import listed, plural, span
from .watermark import FUTURE_TOLERANCE_MS

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
AGGREGATION = "stateStoreSave"


@dataclass(frozen=True)
class Plan:
    """How one store partition rebuilds the version the next batch loads."""

    op: Operator
    part: StorePartition
    ids: dict[int, str] | None
    load: StoreLoad
    """The load by file names (checkpoint format 2: following the lineage Spark reads)."""

    @property
    def chain(self) -> list[StateFile]:
        return list(self.load.chain)

    @property
    def missing(self) -> int | None:
        return self.load.missing


def load_version(ctx: Context) -> int:
    """The state version the next batch loads: its batch id (last committed + 1, or the pending batch re-run)."""
    return ctx.ckpt.next_batch


def lineages(ctx: Context) -> Lineages | None:
    """The reader of checkpoint format 2 lineages (None when this machine cannot decompress the state files)."""
    if "lineages" not in ctx.memo:
        decoding = Decoding.of(ctx.conf)
        ctx.memo["lineages"] = None if decoding.missing_module() else Lineages(ctx.ckpt.fs, decoding.codec)
    return ctx.memo["lineages"]


def plans(ctx: Context) -> list[Plan]:
    """A plan per store partition (skipping checkpoint v2 stores when a commit did not parse)."""
    if "plans" not in ctx.memo:
        version = load_version(ctx)
        out = []
        for op in ctx.operators:
            for part in op.live_partitions:
                if any(f.unique_id for f in part.files) and not ctx.unique_ids_known:
                    continue
                ids = store_unique_ids(ctx.ckpt, op, part)
                out.append(Plan(op, part, ids, resolve(part, version, ids, lineages(ctx))))
        ctx.memo["plans"] = out
    return ctx.memo["plans"]


def file_kinds(part: StorePartition) -> tuple[str, str]:
    """(full copy, increment) file kinds of the partition's provider: RocksDB or HDFS."""
    base, step = formats_of(part.provider)
    return base.kind, step.kind


def rewind_fix(ctx: Context, version: int | None = None) -> tuple[str, Fix]:
    """The rewind to the newest batch whose state every store partition can rebuild (loading ``version`` or an older
    one; default: the version the next batch loads), and what it does."""
    target = load_version(ctx) if version is None else version
    while True:
        newest = min((p.part.newest_loadable(target, p.ids) for p in plans(ctx)), default=target)
        if newest == target:
            break
        target = newest
    if target:
        kept, fix = state_rewind(ctx, target - 1)
        return f"batch {target - 1} is the newest batch whose state every partition can rebuild{kept}", fix
    return "no committed batch can be restored from these files", Instruction(
        "restore state/ from a backup (wmcheck undo if a wmcheck repair changed it), or start the query from a new "
        "checkpoint")


def content_loads(ctx: Context) -> list[StoreLoad]:
    """The load of every store partition the next batch loads, its files' contents decoded as Spark reads them
    (none with ``content`` off or when a decoding package is missing: :attr:`Context.notes` says so)."""
    if "loads" not in ctx.memo:
        decoding = Decoding.of(ctx.conf)
        missing = decoding.missing_module() if ctx.content else None
        if missing:
            ctx.notes.append(f"state file contents not verified: {missing}")
        todo = [p.load for p in plans(ctx) if p.missing is None]
        verify = ctx.content and not missing and bool(todo)
        sampler = RowSampler(ctx, decoding)
        ctx.memo["loads"] = verify_loads(ctx.ckpt.fs, todo, decoding, ctx.state_progress, sampler.read,
                                         ctx.spark_checksum_problem, lineages(ctx), ctx.tree.entries,
                                         sampler.table, ctx.hadoop_checksum_problem) if verify else []
        if verify:
            ctx.memo["verified"] = True  # the checksum sidecars of every file read were verified on the way
    return ctx.memo["loads"]


def store_rows(ctx: Context, decoding: Decoding) -> dict[str, StoreRows]:
    """Each HDFS or RocksDB changelog file of a load, and each RocksDB snapshot's table folder (``…/SSTs/``), of a
    store whose schema :mod:`..key_partitions` reads (the default store of an operator keyed by its partitioning
    keys): how its rows are laid out and partitioned."""
    out: dict[str, StoreRows] = {}
    if (ctx.conf(PINNED_CONFS["encoding_format"]) or "unsaferow").lower() != "unsaferow":
        return out  # Avro rows: not read here
    for plan in plans(ctx):
        op, part = plan.op, plan.part
        if op.name not in KEYED_BY_PARTITIONING or part.store != DEFAULT_STORE or not op.num_partitions:
            continue
        schema = ctx.ckpt.store_schema(op.operator_id, part.store)
        if schema is None:
            continue
        for f in plan.chain:
            if f.format.decoder in ROWS_DECODERS or f.format.decoder == ZIP_DECODER:
                rocksdb = f.format.decoder in (CHANGELOG_DECODER, ZIP_DECODER)
                out[f"{part.directory}/{SST_DIR}/" if f.format.decoder == ZIP_DECODER else f.path] = StoreRows(
                    part.partition, row_fit(schema.key_schema), row_fit(schema.value_schema),
                    key_partitioner(schema.key_schema, op.num_partitions), rocksdb, decoding.row_checksums)
    return out


CHANGELOG_DECODER, ZIP_DECODER, SST_DIR = "rocksdb-changelog", "rocksdb-zip", "SSTs"
ROWS_DECODERS = ("records", CHANGELOG_DECODER)


class RowSampler:
    """Samples the rows of each file :func:`store_rows` knows as the content check reads it (each file is read
    once): what they show goes into ``ctx.memo["row-samples"]`` by path; the rows of each file of a partition
    :func:`aging` knows, whose keys are at or before its bound, into ``ctx.memo["aged-changes"]`` by path (None:
    not read whole)."""

    def __init__(self, ctx: Context, decoding: Decoding) -> None:
        self.ctx, self.codec = ctx, decoding.codec
        self.known, self.found = store_rows(ctx, decoding), ctx.memo.setdefault("row-samples", {})
        self.aged, self.changes = within_budget(ctx, aging(ctx)), ctx.memo.setdefault("aged-changes", {})
        self.kept: dict[str, CheckedTable] = ctx.memo.setdefault("verified-tables", {})
        self.encodings: dict[int, set[str]] = ctx.memo.setdefault("value-encodings", {})
        self.read_state: dict[str, bytes] = ctx.memo.setdefault("read-state", {})
        self.read_bytes = sum(map(len, self.read_state.values()))
        self.tws = set() if decoding.row_checksums else {  # (a checksum before each value: not judged)
            op.operator_id for op in ctx.operators if is_transform_with_state(op.name)}

    def read(self, paths: list[str]) -> dict[str, bytes]:
        """``ctx.read_state``, sampling what it reads, and keeping it for the checks that read loads again while the
        kept files hold fewer than :data:`KEPT_FILE_BYTES` (``ctx.memo["read-state"]``: each file is read once)."""
        data = self.ctx.read_state(paths)
        for path, content in data.items():
            if self.read_bytes + len(content) <= KEPT_FILE_BYTES:
                self.read_state[path] = content
                self.read_bytes += len(content)
        for path in set(data) & set(self.known):
            rows = self.known[path]
            try:
                self.found[path] = sample_rows(data[path], path, rows, self.codec)
            except CheckpointError:
                continue  # a damaged file is WM039's
            bound = self.aged.get(path.rsplit("/", 1)[0])
            if bound is not None:
                self.changes[path] = self._changes(data[path], path, rows, bound)
        return data

    def _changes(self, data: bytes, path: str, rows: StoreRows, bound: Bound) -> FileChanges | None:
        try:
            plain = decompress(data, self.codec, path, AGED_LIMIT + 1)
            if len(plain) > AGED_LIMIT:
                return None
            parse = changelog_records if rows.rocksdb else sized_records
            if COLUMNAR:
                try:
                    return stale_columns.record_changes(plain, lambda: parse(plain, path), rows.key_start(PUT),
                                                        rows.key_start(DELETE), bound.event, bound.bound_us,
                                                        not rows.rocksdb)
                except Unproven:
                    pass
            return record_changes(parse(plain, path), rows.key_start, bound.event, bound.bound_us)
        except (CheckpointError, struct.error, IndexError):
            return None  # a damaged file (WM039's), or a key shorter than its schema's (WM059's)

    def table(self, path: str, table: CheckedTable) -> None:
        """Sample a snapshot's table file as it is read (verified: its blocks are not hashed again), and keep it for
        the checks that read snapshots whole while the kept files hold fewer than :data:`KEPT_TABLE_BYTES`."""
        if sum(len(t.data) for t in self.kept.values()) + len(table.data) <= KEPT_TABLE_BYTES:
            self.kept[path] = table
        op = path.split("/")[1] if path.startswith(f"{STATE}/") else ""
        encoding = read_whole(table.data, sampled_encoding, table.blocks) if is_number(op) and int(op) in self.tws else None
        if encoding is not None:
            self.encodings.setdefault(int(op), set()).add(encoding)
        folder = path.rsplit("/", 1)[0]
        rows = self.known.get(folder + "/")
        if rows is not None:
            self.found[path] = sample_table(table, rows)
            bound = self.aged.get(folder.rsplit("/", 1)[0])
            if bound is not None:
                self.changes[path] = table_file_changes(table, bound)


def sampled_encoding(entries: Iterator[TableEntry]) -> str | None:
    """The encoding the first :data:`VALUE_SAMPLE` live values of a table file show (:func:`..value_encoding.written_encoding`)."""
    return written_encoding(islice((e.value for e in entries if e.live), VALUE_SAMPLE))


VALUE_SAMPLE = 64
KEPT_FILE_BYTES = 32 << 20
KEPT_TABLE_BYTES = 32 << 20
"""The most bytes of verified table files kept in ``ctx.memo["verified-tables"]`` (by path) for the checks that read
snapshots whole (:mod:`.loaded_state`): within it, no block is hashed twice."""
COLUMNAR = True
"""Whether :class:`RowSampler` reads files with :mod:`..stale_columns` where it can, and WM078 an HDFS load's records
with :mod:`..sized_columns` (off: with :mod:`..stale_keys` and record by record alone, the references)."""


def table_file_changes(table: CheckedTable, bound: Bound) -> FileChanges | None:
    """The :class:`FileChanges` of a snapshot's table file, None where it is not read whole."""
    if COLUMNAR:
        try:
            return stale_columns.table_changes(table, bound.event, bound.bound_us)
        except Unproven:
            pass
    return read_whole(table.data, lambda entries: table_changes(entries, bound.event, bound.bound_us))


AGED_BUDGET = 32 << 20
"""Bytes of state files (as stored) that one check reads whole for :func:`aging`: a windowed aggregation of a million
keys (28 MB of RocksDB table files, 17 MB of HDFS deltas) is judged whole in about a second; the partitions past it
are not judged."""


def within_budget(ctx: Context, bounds: dict[str, Bound]) -> dict[str, Bound]:
    """The partitions of ``bounds`` whose files (a snapshot's table files included) fit in :data:`AGED_BUDGET`
    together, in directory order; the others go into ``ctx.memo["aged-unjudged"]``."""
    cost = {}
    for plan in plans(ctx):
        if plan.part.directory in bounds:
            chain = plan.load.chain
            tables = sum(f.size for f in plan.part.sst_files) if any(f.format.decoder == ZIP_DECODER for f in chain) else 0
            cost[plan.part.directory] = tables + sum(f.size for f in chain if f.format.decoder != ZIP_DECODER)
    kept, spent, unjudged = {}, 0, ctx.memo.setdefault("aged-unjudged", set())
    for directory in sorted(bounds):
        spent += cost.get(directory, 0)
        if spent <= AGED_BUDGET:
            kept[directory] = bounds[directory]
        else:
            unjudged.add(directory)
    return kept


AGED_LIMIT = 1 << 28
"""Decompressed bytes of a state file read whole for :func:`aging` (a larger file leaves its partition unjudged)."""


@dataclass(frozen=True)
class Bound:
    """How the keys of a store partition's files are judged: their event time (a window's end) and the eviction
    watermark of the batch that wrote the version the next batch loads, in microseconds."""

    event: EventField
    bound_us: int
    batch: int
    """That batch."""
    column: str
    """The key's event-time column (``window.end``)."""
    inferred: bool = False
    """Whether the operator's own eviction watermark is unknown (a stream-stream join upstream holds it back by a
    time-range condition only the plan records): ``bound_us`` is then the batch's watermark, above the operator's,
    and only keys at or before the latest window the operator's files remove are judged (the watermark never moves
    back, so every batch since evicted at least that far)."""


def ran_with_recorded_watermark(ctx: Context, batch: int) -> bool:
    """Whether ``offsets/<batch>`` records the watermark the batch ran with, as far as the checkpoint shows: the one
    the batch before committed for it (else an edit, such as a raise by set-watermark: WM012), and not days ahead of
    the batch's processing time (WM013's)."""
    seq = ctx.offsets.get(batch)
    if seq is None or seq.metadata is None:
        return False
    meta = seq.metadata
    before = ctx.commits.get(batch - 1)
    committed = before.next_batch_watermark_ms if before is not None else None
    if committed is not None and committed != meta.batch_watermark_ms:
        return False
    return not (meta.batch_timestamp_ms > 0 and meta.batch_watermark_ms - meta.batch_timestamp_ms > FUTURE_TOLERANCE_MS)


APPEND = "Append"
SINK_OPERATOR = 0
"""Spark numbers stateful operators from the sink down: operator 0 writes to the sink, the others feed it."""


def judged_for_output(ctx: Context, operator_id: int) -> bool:
    """Whether a check of state that is not the one Spark wrote judges ``operator_id``'s: the operator writing to the
    sink. What an operator feeding another loads again reaches the output only as the next one's watermark lets it:
    rows it emits a second time are behind that watermark and dropped as late (a chained aggregation's older delta
    over its newest one, tested: the control run's output), and changes it lost come out later, if ever."""
    return operator_id == SINK_OPERATOR or len(ctx.operators) <= 1


def printed_modes(ctx: Context, operator_id: int) -> set[str]:
    """The output modes the event log's plans print for an aggregation (none without an event log)."""
    plans = ctx.progress.plans if ctx.progress is not None else {}
    return {o.output_mode for plan in plans.values() for o in plan.root.operators()
            if o.operator_id == operator_id and o.output_mode is not None}


def aging(ctx: Context) -> dict[str, Bound]:
    """By store partition directory: the :class:`Bound` of each streaming aggregation (``stateStoreSave``) whose key
    holds the watermarked column, when the eviction watermark of the batch that wrote the version the next batch
    loads is past 0: known (from the checkpoint or an event log's plan), or else bounded by the batch's watermark
    (:attr:`Bound.inferred`)."""
    if "aging" in ctx.memo:
        return ctx.memo["aging"]
    out: dict[str, Bound] = {}
    ctx.memo["aging"] = out
    writer = load_version(ctx) - 1
    aggregations = [op for op in ctx.operators if op.name == AGGREGATION]
    if writer < 0 or not aggregations or not ran_with_recorded_watermark(ctx, writer):
        return out
    try:
        model = operator_watermarks(ctx.ckpt, ctx.progress, [writer])
    except CheckpointError:
        return out  # a file that does not parse: WM001
    for op in aggregations:
        if printed_modes(ctx, op.operator_id) - {APPEND}:
            continue  # update mode (harmless alone, not tested) or complete mode (keeps every key)
        own = model.of(writer, op.operator_id)
        schema = ctx.ckpt.store_schema(op.operator_id, DEFAULT_STORE)
        if own is None or own.evict_ms == 0 or schema is None:
            continue
        evict_ms, inferred = own.evict_ms, own.source not in (PLAN, CHECKPOINT) or own.evict_ms is None
        if inferred:  # an upstream join holds it back by a condition only the plan records: the batch's own bounds it
            evict_ms = ctx.offsets[writer].metadata.batch_watermark_ms  # type: ignore[union-attr]
        if not evict_ms or evict_ms < 0:
            continue
        column = event_time_field(schema.key_schema)
        event = event_time_reader(schema.key_schema, column.path) if column is not None else None
        if event is None or column is None:
            continue
        for part in op.live_partitions:
            if part.store == DEFAULT_STORE:
                out[part.directory] = Bound(event, evict_ms * 1000, writer, ".".join(column.path), inferred)
    return out


def content_rewind_fix(ctx: Context, load: StoreLoad) -> tuple[str, Fix]:
    """The rewind to the newest batch whose state every partition loads, avoiding the damaged file, and what it
    does."""
    failed = load.failure
    target = (failed.version if failed and failed.version is not None else load.version) - 1
    decoding = Decoding.of(ctx.conf)
    while target > 0:
        ok = True
        for p in plans(ctx):
            newest = p.part.newest_loadable(target, p.ids)
            if newest != target:
                target, ok = newest, False
                break
            checked = verify_loads(ctx.ckpt.fs, [resolve(p.part, target, p.ids, lineages(ctx))], decoding,
                                   lineages=lineages(ctx), sidecars=ctx.tree.entries)[0]
            if not checked.loadable:
                bad = checked.failure.version if checked.failure and checked.failure.version is not None else target
                target, ok = min(target, bad) - 1, False
                break
        if ok:
            break
    if target > 0:
        kept, fix = state_rewind(ctx, target - 1)
        return (f"batch {target - 1} is the newest batch whose state every partition loads{kept} (restoring the file "
                f"from a backup works too)", fix)
    return "no committed batch loads without it", Instruction(
        "restore the file from a backup (wmcheck undo if a wmcheck repair changed it), or start the query from a new "
        "checkpoint")


@check("WM039", ERROR, "state file Spark fails to read")
def damaged(ctx: Context) -> Iterator[Issue]:
    for load in content_loads(ctx):
        failed = load.failure
        if failed is None or failed.on_read:
            continue
        base, step = file_kinds(load.part)
        fallback = (f" (its newest {base} could not be loaded either, and {'the empty state' if not load.fallback else f'version {load.fallback}'}"
                    f" was tried instead)") if load.skipped else ""
        why, fix = content_rewind_fix(ctx, load)
        spark35 = ""
        if failed.problem.startswith(VERIFICATION_FAILED) and written_without_row_checksums(ctx):
            spark35 = (" (Spark 4 verifies row checksums; Spark 3.5 does not restore "
                       f"{ROW_CHECKSUM} and reads the rows as they were written, without: it restarts correctly)")
        yield Issue(failed.path, (
            f"{failed.describe()}: Spark fails to load state version {load.version} of {load.part.directory}, which the "
            f"next batch loads, reading this file ({LOAD_ERROR}){spark35}{fallback}; {why}"
        ), fix)


def written_without_row_checksums(ctx: Context) -> bool:
    """Whether the query started without row checksums (its first offsets file: as Spark 3.5 writes state)."""
    first = min(ctx.confs, default=None)
    return first is not None and str(effective(ctx.confs[first], ROW_CHECKSUM)).lower() == "false"


@check("WM048", ERROR, "state rows Spark loads without an error but never reads")
def skipped_rows(ctx: Context) -> Iterator[Issue]:
    for load in content_loads(ctx):
        failed = load.failure
        if failed is None or not failed.on_read:
            continue
        why, fix = content_rewind_fix(ctx, load)
        yield Issue(failed.path, (
            f"{failed.describe()}: Spark loads state version {load.version} of {load.part.directory}, which the next "
            f"batch loads, without an error, but its scans of the state stop at this block, silently: the rows in it "
            f"and after it are never evicted or emitted (tested: windows lost against a control run; where the file "
            f"has its Hadoop checksum sidecar, Spark's copy of it fails instead and the snapshot is skipped, WM040); "
            f"{why}"
        ), fix)


@check("WM040", WARNING, "state snapshot Spark cannot read and skips")
def skipped(ctx: Context) -> Iterator[Issue]:
    for load in content_loads(ctx):
        if load.failure is not None:
            continue
        base, step = file_kinds(load.part)
        for bad in load.skipped:
            start = f"the {base} of version {load.fallback}" if load.fallback else "the empty state"
            full = next((f.path for f in load.part.files if f.format.role == "base" and f.version == bad.version),
                        bad.path)
            yield Issue(bad.path, (
                f"{bad.describe()}: Spark 4.3 cannot load this {base} and skips it (automatic snapshot repair, on by "
                f"default since Spark 4.1): it rebuilds state version {load.version} from {start} and every {step} "
                f"after it, which are all readable. Spark before 4.1 fails on it instead: Spark 3.5 stops the restart "
                f"with the file's own error (tested: ChecksumException, FileNotFoundException, RocksDBException)"
            ), Instruction(f"restore {bad.path} from a backup, or remove {full} and its checksum sidecar: Spark then "
                           f"rebuilds the state from {start} and the {step}s without a failed attempt (Spark 3.5 too)"))
    yield from snapshots_listed_under_another_name(ctx)


def snapshots_listed_under_another_name(ctx: Context) -> Iterator[Issue]:
    """A RocksDB zip named by hand with a number (``013.zip``) that is the newest snapshot at or below the version the
    next batch loads: Spark takes it for that version's snapshot and reads ``13.zip``, which is not there. Spark 4.3
    falls back to an older snapshot; Spark 3.5 (``RocksDBFileManager.getLatestSnapshotVersion``, where the version it
    loads has no zip of its own) fails."""
    version = load_version(ctx)
    if version == 0 or checkpoint_format(ctx)[0] == 2:
        return
    for op in ctx.operators:
        for part in op.partitions:
            if part.provider != "rocksdb":
                continue
            zipped = formats_of("rocksdb")[0].kind
            bases = [f.version for f in part.files if f.kind == zipped]
            for info in part.other_files:
                name = posixpath.basename(info.path)
                listed = java_long(name[: -len(zipped) - 1]) if name.endswith(f".{zipped}") else None
                if listed is None or not 0 < listed <= version or any(listed <= b <= version for b in bases):
                    continue
                yield Issue(info.path, (
                    f"Spark takes {name} for the snapshot of version {listed} (it lists every '*.zip' in "
                    f"{part.directory} and reads the rest of the name with Long.parseLong), the newest at or below "
                    f"version {version} that the next batch loads, and reads {listed}.zip, which is not there: Spark "
                    f"4.3 falls back to an older snapshot and the changelogs (tested: the control run's output); "
                    f"Spark before 4.1 fails instead: Spark 3.5 stops the restart with 'FileNotFoundException: File "
                    f"…/{listed}.zip does not exist' (tested)"
                ), Instruction(f"move {info.path} out of the checkpoint (or delete it) while the query is stopped"))


@check("WM070", ERROR, "a file in a state store directory Spark lists as a snapshot but cannot read a version from")
def unnumbered_snapshots(ctx: Context) -> Iterator[Issue]:
    version = load_version(ctx)
    if version == 0 or checkpoint_format(ctx)[0] == 2:
        return
    for op in ctx.operators:
        for part in op.partitions:
            base = formats_of(part.provider)[0].kind
            bases = [f.version for f in part.files if f.kind == base]
            for info in part.other_files:
                name = posixpath.basename(info.path)
                if not unloadable_base_name(name, part.provider, version, bases):
                    continue
                stem, listed = name[: -len(base) - 1], java_long(name[: -len(base) - 1])
                why = (f"'{stem}' is none, so loading state version {version} of this partition fails" if listed is None
                       else f"it is version {listed}, the newest at or below version {version} that the next batch "
                       f"loads, and Spark reads {listed}.{base}, which is not there: the load fails")
                yield Issue(info.path, (
                    f"Spark 4.3's {'RocksDB' if part.provider == 'rocksdb' else 'HDFS-backed'} state store lists every "
                    f"file named '*.{base}' in {part.directory} as a snapshot and reads the rest of its name as a "
                    f"version (Long.parseLong): {why} ('[CANNOT_LOAD_STATE_STORE.UNCATEGORIZED] An error occurred "
                    f"during loading state'); {spark35_listing(part.provider, listed is None)}"),
                    Instruction(f"move {info.path} out of the checkpoint (or delete it) while the query is stopped"))


def spark35_listing(provider: str, no_number: bool) -> str:
    """What Spark 3.5 does with a snapshot name WM070 reports: its RocksDB store lists the directory where the version
    it loads has no snapshot of its own (``RocksDBFileManager.getLatestSnapshotVersion``); its HDFS-backed store reads
    ``<version>.snapshot`` by name and lists only in its maintenance (``doSnapshot`` and ``cleanup``, each catching
    its error)."""
    if provider == "rocksdb":  # WM070 reports a RocksDB name only when it is no number
        return ("Spark 3.5 lists them too where the version it loads has no snapshot of its own, and fails with "
                "'NumberFormatException: For input string' (tested)")
    return ("Spark 3.5 reads a snapshot only by the name it gives it and restarts correctly (tested)" + (
        "; its background maintenance lists the directory and fails on this name every time for this partition (a "
        "warning in its log: no new snapshot, no old file removed, each load reads more deltas)" if no_number else ""))


@check("WM016", ERROR, "state the next batch loads cannot be rebuilt")
def unloadable(ctx: Context) -> Iterator[Issue]:
    version = load_version(ctx)
    broken = [p for p in plans(ctx) if p.missing is not None]
    for op in ctx.operators:
        mine = [p for p in broken if p.op is op]
        if not mine:
            continue
        first = mine[0]
        base, step = file_kinds(first.part)
        uid = (f"_{first.load.missing_id}" if first.load.missing_id else
               f"_{first.ids[first.missing]}" if first.ids and first.missing in first.ids else "")
        missing = first.missing if first.missing is not None else version  # set: ``first`` is broken
        earlier = any(f.kind in BASE_KINDS and f.version < missing for f in first.part.files)
        why, fix = rewind_fix(ctx)
        yield Issue(first.part.directory, (
            f"state version {version}, which the next batch loads, cannot be rebuilt in "
            f"{plural(len(mine), 'store partition')} of operator {op.operator_id} "
            f"({listed([p.part.directory for p in mine])}): {first.part.directory} has neither "
            f"{first.missing}{uid}.{step} nor {first.missing}{uid}.{base}"
            + ("" if earlier else f" and no {base} before it")
            + f"; Spark fails to load the state; {why}"
        ), fix)


def version_ceiling(ctx: Context) -> int:
    """The newest state version this checkpoint's batches may have written (a pending batch writes one more)."""
    ckpt = ctx.ckpt
    return max(ckpt.next_state_version, -1 if ckpt.last_batch is None else ckpt.last_batch + 1)


def read_later(part: StorePartition, f: StateFile) -> bool:
    """A file of a version the query has not reached that a later load reads instead of what Spark writes then:
    a full copy named by version alone (checkpoint format 2 loads only the unique ids its lineage names), unless its
    store writes one at every commit (RocksDB without changelog checkpointing)."""
    alone = f.format.each_commit_alone and not any(g.format.role == "increment" for g in part.files)
    return f.format.read_later and f.unique_id is None and not alone


def skipped_later(ctx: Context, part: StorePartition, f: StateFile) -> bool:
    """A full copy of a version the query has not reached that Spark fails to read: the load that lists it skips it
    (automatic snapshot repair, on by default since Spark 4.1) and rebuilds the state without it. Its content decoded
    as Spark reads it (not the SST files a zip names); False without content checks."""
    key = f"skipped-later:{f.path}"
    if key not in ctx.memo:
        decoding = Decoding.of(ctx.conf)
        skipped = False
        if ctx.content and not decoding.missing_module():
            try:
                place = RowPlace(part.operator_id, part.store, part.partition, f.version, f.path)
                skipped = damage(ctx.ckpt.fs.read(f.path), f.format, decoding, f.path, place) is not None
            except CheckpointError:
                skipped = False  # not read here: judged as Spark would read it
        ctx.memo[key] = skipped
    return ctx.memo[key]


def beyond(ctx: Context, later: bool) -> Iterator[tuple[Operator, list[tuple[StorePartition, list[StateFile]]], list[StateFile]]]:
    """Per operator with any: per store partition its files of versions newer than any this checkpoint's batches
    wrote, that a later load reads (``later``) or not, and all of them."""
    ceiling = version_ceiling(ctx)
    for op in ctx.operators:
        extra = [(p, [f for f in p.files if f.version > ceiling
                      and (read_later(p, f) and not skipped_later(ctx, p, f)) == later]) for p in op.partitions]
        extra = [(p, files) for p, files in extra if files]
        if extra:
            yield op, extra, [f for _, fs in extra for f in fs]


def leftover_fix(ctx: Context) -> Fix:
    """The rewind to the last committed batch, which removes every state file of a later version."""
    done = ctx.ckpt.last_committed_batch
    return ctx.rewind(done) if done is not None else Instruction("delete state/ (no batch was committed)")


@check("WM041", ERROR, "state snapshots of later versions that Spark will read")
def future_snapshots(ctx: Context) -> Iterator[Issue]:
    ceiling = version_ceiling(ctx)
    for op, extra, files in beyond(ctx, later=True):
        base, step = file_kinds(extra[0][0])
        yield Issue(files[0].path, (
            f"{plural(len(files), base)} of version {span(min(f.version for f in files), max(f.version for f in files))} "
            f"in {plural(len(extra), 'store partition')} of operator {op.operator_id} "
            f"({listed([p.directory for p, _ in extra])}), newer than version {ceiling}, the last one this checkpoint's "
            f"batches wrote: leftovers of a later run or a hand rewind. When the query gets there, Spark writes "
            f"its own {step} for that version but keeps the {base}, and every later load of the state (a restart, a "
            f"lost executor) reads the newest {base} at or below the version it needs: the stale state comes back, and "
            f"output is wrong (tested: a window emitted twice); a rewind to the last committed batch removes them"
        ), leftover_fix(ctx))


@check("WM017", WARNING, "state files beyond the last batch")
def leftovers(ctx: Context) -> Iterator[Issue]:
    ceiling = version_ceiling(ctx)
    for op, extra, files in beyond(ctx, later=False):
        versions = sorted({f.version for f in files})
        yield Issue(extra[0][0].directory, (
            f"{plural(len(files), 'state file')} for version {span(versions[0], versions[-1])} in "
            f"{plural(len(extra), 'store partition')} of operator {op.operator_id} ({listed([p.directory for p, _ in extra])}): "
            f"newer than version {ceiling}, the last one this checkpoint's batches wrote: leftovers of a later run "
            f"or a hand rewind. Spark writes these versions again as it gets there and never reads these files "
            f"(increments are written over, and so are RocksDB snapshots in a store without changelogs: each commit "
            f"uploads its own, tested; checkpoint format 2 reads only the unique ids its lineage names; a full copy "
            f"Spark fails to read is skipped by automatic snapshot repair, tested), but they "
            f"confuse rewinds and state readers asked for those versions; a rewind to the last committed batch "
            f"removes them"
        ), leftover_fix(ctx))


def expected_partitions(ctx: Context, op: Operator) -> tuple[int | None, str]:
    """The operator's partition count and where it comes from."""
    if op.metadata_conflict and op.num_partitions:
        return op.num_partitions, f"{SHUFFLE_PARTITIONS}={op.num_partitions} pinned in the offsets, not its operator metadata's"
    if op.metadata is not None and op.num_partitions:
        return op.num_partitions, "numPartitions in its operator metadata"
    pinned = ctx.conf(SHUFFLE_PARTITIONS)
    return (int(pinned), f"{SHUFFLE_PARTITIONS}={pinned}") if pinned and is_number(pinned) else (None, "")


@check("WM018", ERROR, "state partition directory missing")
def missing_partitions(ctx: Context) -> Iterator[Issue]:
    version = load_version(ctx)
    if version == 0:
        return
    for op in ctx.operators:
        num, source = expected_partitions(ctx, op)
        if not num or op.written_partitions is not None:
            continue  # WM015 or WM072: the offsets pin a count the state was not written with
        present = {(p.partition, p.store) for p in op.partitions}
        missing = [state_dir(op.operator_id, pid, store) for pid in range(num) for store in op.stores if (pid, store) not in present]
        if missing:
            yield Issue(missing[0], (
                f"{plural(len(missing), 'state directory', 'state directories')} of operator {op.operator_id} missing ({listed(missing)}); it "
                f"has {num} partitions ({source}): Spark fails to load state version {version} there"
            ), Instruction("restore them from a backup (wmcheck undo if a wmcheck repair removed them), or start the "
                           "query from a new checkpoint"))


def committed_operators(ctx: Context) -> set[int]:
    """The stateful operators the newest commit names (checkpoint format 2 records each one's state unique ids)."""
    newest = ctx.commits.get(ctx.ckpt.commit_ids[-1]) if ctx.ckpt.commit_ids else None
    ids = newest.state_unique_ids if newest is not None else None
    return {int(op) for op in ids or {} if is_number(op)}


@check("WM053", ERROR, "state directory of a stateful operator missing")
def missing_operators(ctx: Context) -> Iterator[Issue]:
    version = load_version(ctx)
    if version == 0:
        return
    fs = ctx.ckpt.fs
    names = fs.names(STATE)
    present = {int(n) for n in names if is_number(n)}
    named = committed_operators(ctx)
    if not names and (named or fs.info(STATE) is not None):
        how = "is empty" if fs.info(STATE) is not None else "is gone"
        why = (f"the newest commit names the state of operator{'s' if len(named) > 1 else ''} "
               f"{', '.join(map(str, sorted(named)))}" if named else f"Spark creates {STATE}/ for stateful operators only")
        yield Issue(STATE, (
            f"{STATE}/ {how} while the next batch, {version}, loads state version {version} ({why}): the query's state "
            f"was deleted, and Spark refuses to restart a query with stateful operators without it "
            f"([STREAMING_STATEFUL_OPERATOR_MISSING_STATE_DIRECTORY], tested with Spark 4.3)"
        ), Instruction(f"restore {STATE}/ from a backup, or start the query from a new checkpoint"))
        return
    present -= stray_copies(ctx)
    missing = [f"{STATE}/{op}" for op in range(max(present | named, default=-1) + 1) if op not in present]
    if missing:
        yield Issue(missing[0], (
            f"{plural(len(missing), 'operator state directory', 'operator state directories')} missing ({listed(missing)}) "
            f"while {listed([f'{STATE}/{op}' for op in sorted(present)])} exist{'s' if len(present) == 1 else ''}"
            f"{' and the newest commit names their state' if named - present else ''}: Spark numbers a query's stateful "
            f"operators from 0, so {'that operator has' if len(missing) == 1 else 'those operators have'} lost all "
            f"state, and the restart fails ([STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA] when another "
            f"operator has operator metadata, else loading state version {version} fails; tested with Spark 4.3)"
        ), Instruction("restore them from a backup (wmcheck undo if a wmcheck repair removed them), or start the query "
                       "from a new checkpoint"))


@check("WM019", WARNING, "more state partitions than the operator has")
def extra_partitions(ctx: Context) -> Iterator[Issue]:
    down = next((r for r in reversed(moves(ctx)) if r.committed and r.to_partitions < r.from_partitions), None)
    for op in ctx.operators:
        num, source = expected_partitions(ctx, op)
        if not num or op.written_partitions is not None:
            continue  # WM015 or WM072
        extra = sorted({p.partition for p in op.partitions if p.partition >= num})
        if not extra:
            continue
        dirs = [f"state/{op.operator_id}/{pid}" for pid in extra]
        newest = max((f.version for p in op.partitions if p.partition >= num for f in p.files), default=None)
        head = (f"operator {op.operator_id} has {num} partitions ({source}) but state also holds partition "
                f"{plural(len(extra), 'directory', 'directories')} beyond it ({listed(dirs)})")
        if newest is None:
            yield Issue(dirs[0], f"{head}, holding no state version (an interrupted write, such as a killed repartition, "
                        f"may have left them): Spark does not read them at {num} partitions",
                        Instruction("remove them once no repartition of this checkpoint is running"))
        elif down is not None and down.to_partitions == num and newest <= down.batch:
            yield Issue(dirs[0], (
                f"{head}, with state up to version {newest}: left by the repartition from {down.from_partitions} to "
                f"{num} partitions at batch {down.batch}, which wrote version {down.batch + 1} in partitions 0..{num - 1} "
                f"only. Spark does not read them while the query runs with {num} partitions; they hold the state a "
                f"rewind to before batch {down.batch} restarts from"
            ), Instruction(f"keep them as long as you may rewind to before batch {down.batch}"))
        else:
            yield Issue(dirs[0], (
                f"{head}: written by a run with more shuffle partitions, copied in, or the metadata was edited; Spark "
                f"does not read them at {num} partitions, but nothing here proves they are unneeded (an older "
                f"layout or a rewind may need them)"
            ), Instruction("find out where they came from before removing anything"))


@check("WM020", WARNING, "unique id in commits/ without its state file")
def unmatched_unique_ids(ctx: Context) -> Iterator[Issue]:
    if not ctx.unique_ids_known:
        return
    version = load_version(ctx)
    for op in ctx.operators:
        lost = []
        for part in op.partitions:
            index = op.stores.index(part.store) if part.store in op.stores else 0
            ids = ctx.ckpt.unique_ids_for(op.operator_id, part.partition, index)
            present = {(f.version, f.unique_id) for f in part.files}
            oldest = min((f.version for f in part.files), default=None)
            lost += [(part, v, uid) for v, uid in sorted(ids.items())
                     if oldest is not None and oldest <= v < version and (v, uid) not in present]
        if lost:
            part, v, uid = lost[0]
            yield Issue(part.directory, (
                f"commits/{v - 1} names unique id {uid} for state version {v}, but {part.directory} has no {v}_{uid} file "
                f"({plural(len(lost), 'version')} in {plural(len({p.directory for p, _, _ in lost}), 'store partition')} "
                f"of operator {op.operator_id}): the commit log and the state files come from different runs or files "
                f"were lost. Spark 4.3 restarts fine (it loads the version the next batch needs along the lineage its state files record, not the ids older commits name; tested), but a "
                f"rewind to those batches is impossible"
            ), Instruction("restore the files from a backup (wmcheck undo if a wmcheck repair removed them) if you "
                           "have them; otherwise do not rewind before the newest such batch"))


@check("WM060", ERROR, "the newest commit names no state unique id for state the next batch loads")
def commit_without_unique_ids(ctx: Context) -> Iterator[Issue]:
    if not ctx.unique_ids_known or not ctx.commits:
        return
    newest = max(ctx.commits)
    named = ctx.commits[newest].state_unique_ids or {}
    for op in ctx.operators:
        per_partition = named.get(str(op.operator_id), ())
        lacking = []
        for part in op.live_partitions:
            if not any(f.unique_id for f in part.files):
                continue  # checkpoint format 1 files
            index = op.stores.index(part.store) if part.store in op.stores else 0
            ids = per_partition[part.partition] if part.partition < len(per_partition) else ()
            if index >= len(ids) or not ids[index]:
                lacking.append(part.directory)
        if not lacking:
            continue
        yield Issue(f"commits/{newest}", (
            f"commits/{newest}, the newest commit, names no state unique id for {listed(lacking)} (operator "
            f"{op.operator_id}): with checkpoint format 2 Spark loads state version {newest + 1} by the ids the newest "
            f"commit names, and fails (CANNOT_LOAD_STATE_STORE; with some partitions named: an "
            f"ArrayIndexOutOfBoundsException; tested); the commit was edited or written by a run without checkpoint "
            f"format 2, and a rewind to before batch {newest} drops it, Spark re-running the batch from the ids the "
            f"commit before names"
        ), rewind_before(ctx, newest))


def mismatches(ctx: Context, kind: str) -> Iterator[tuple[str, str]]:
    """Files Spark reads on restart whose ``hadoop`` or ``spark`` checksum file does not match."""
    content_loads(ctx)
    if "verified" not in ctx.memo:
        for plan in plans(ctx):
            if plan.missing is None:
                ctx.verify_state_files(plan.chain)
        ctx.memo["verified"] = True
    for tree in ctx.trees:
        yield from tree.mismatches[kind]


def skipped_paths(ctx: Context) -> set[str]:
    """The files of full copies Spark cannot load and skips (WM040 reports them, and what each Spark does)."""
    return {bad.path for load in content_loads(ctx) for bad in load.skipped}


@check("WM021", ERROR, "Spark checksum file does not match its file")
def checksums(ctx: Context) -> Iterator[Issue]:
    skipped = skipped_paths(ctx)
    for path, problem in mismatches(ctx, "spark"):
        if path in skipped:
            continue
        yield Issue(path, (
            f"{problem}: Spark 4.1+ verifies the checksum files it writes beside state files (checkpoint format 2) and "
            "fails to load the state ('[CHECKPOINT_FILE_CHECKSUM_VERIFICATION_FAILED]')"
        ), Instruction(f"restore {path} from a backup (wmcheck undo if a wmcheck repair changed it), or delete "
                       f"{spark_sidecar(path)} if the file was changed on purpose"))


@check("WM030", WARNING, "Hadoop checksum sidecar does not match its file")
def hadoop_checksums(ctx: Context) -> Iterator[Issue]:
    # Spark unzips a RocksDB snapshot and copies its SST files through the checksummed file system: it fails on them
    # (WM039) or skips them (WM040)
    skipped = skipped_paths(ctx) | {load.failure.path for load in content_loads(ctx) if load.failure is not None}
    for path, problem in mismatches(ctx, "hadoop"):
        if path in skipped:
            continue
        yield Issue(path, (
            f"{problem}: Spark (3.5 and 4.3 tested, on the local file system) reads checkpoint files through "
            "FileContext without verifying Hadoop's .crc sidecars and restarts fine, but tools reading through Hadoop's "
            "checksummed FileSystem (hadoop fs -cat, FileSystem.open) fail with a ChecksumException; object stores "
            "keep no sidecars"
        ), Instruction(f"delete {hadoop_sidecar(path)} if the file was changed on purpose, else restore the file from "
                       f"a backup (wmcheck undo if a wmcheck repair changed it)"))


def foreign_schemas(ctx: Context) -> list[tuple[SchemaReference, bool | None]]:
    """Schema file names outside this checkpoint, with whether Spark reaches them (none when metadata fails, WM001)."""
    if "foreign" not in ctx.memo:
        try:
            refs = foreign_references(ctx.ckpt)
        except CheckpointError:
            refs = []
        ctx.memo["foreign"] = [(r, reachable(ctx.ckpt, r)) for r in refs]
    return ctx.memo["foreign"]


def _moved(refs: list[SchemaReference], what: str) -> Iterator[Issue]:
    by_file: dict[str, list[SchemaReference]] = {}
    for ref in refs:
        by_file.setdefault(ref.metadata_path, []).append(ref)
    for path, mine in by_file.items():
        yield Issue(path, (
            f"names the state schema file {mine[0].uri}" + (f" (and {len(mine) - 1} more)" if len(mine) > 1 else "")
            + f", outside this checkpoint: it was copied or moved, and {what}; relocating names this checkpoint's own "
            "schema files (undoable)"
        ), RelocateRequest())


@check("WM027", ERROR, "operator metadata names schema files Spark cannot reach")
def unreachable_schemas(ctx: Context) -> Iterator[Issue]:
    yield from _moved([r for r, ok in foreign_schemas(ctx) if ok is False],
                      "that file is gone or on another store: restarting the query and Spark's state reader "
                      "fail (FileNotFoundException)")
    for ref in own_schemas_gone(ctx):
        operator = ref.metadata_path.split("/_metadata/", 1)[0]  # state/<op>
        yield Issue(ref.metadata_path, (
            f"names the state schema file {ref.relative}, this checkpoint's own, which is gone: Spark reads the schema "
            f"files the operator's newest metadata names and the restart fails ('File …/{ref.relative} does not "
            "exist', tested with Spark 4.3)"
        ), Instruction(f"restore {ref.relative} from a backup (deleting {operator}/_metadata/v2/ too does not help: "
                       "Spark then fails to read the operator metadata); without one, start the query from a new "
                       "checkpoint"))


def own_schemas_gone(ctx: Context) -> list[SchemaReference]:
    """This checkpoint's own schema files that an operator's newest metadata file (the one Spark reads on restart)
    names and that are gone."""
    try:
        refs = schema_references(ctx.ckpt)
    except CheckpointError:
        return []  # metadata that does not parse: WM001
    newest: dict[str, int] = {}
    for ref in refs:
        folder, name = ref.metadata_path.rsplit("/", 1)
        if is_number(name):
            newest[folder] = max(newest.get(folder, -1), int(name))
    return [r for r in refs if r.here and r.relative is not None and r.metadata_path.rsplit("/", 1)[1] ==
            str(newest.get(r.metadata_path.rsplit("/", 1)[0])) and not ctx.ckpt.fs.exists(r.relative)]


@check("WM028", WARNING, "operator metadata names schema files of another checkpoint")
def borrowed_schemas(ctx: Context) -> Iterator[Issue]:
    yield from _moved([r for r, ok in foreign_schemas(ctx) if ok is not False],
                      "Spark reads the schema from there and names it again in every batch it runs: this checkpoint "
                      "breaks once that location is removed")
