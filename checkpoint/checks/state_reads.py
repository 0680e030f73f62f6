"""What the checks of state share, computed once per check run: how each store partition loads the version the next
batch loads (:func:`plans`), those loads with their files decoded as Spark reads them (:func:`content_loads`), and
what that read found and kept for the other checks (:class:`StateReads`): row samples, the keys past the eviction
watermark, verified table files, value encodings, file bytes."""
from __future__ import annotations

import struct
import sys
from dataclasses import field
from itertools import islice
from typing import TYPE_CHECKING, Iterator

from wmcheck.checkpoint.records import dataclass
from wmcheck.checkpoint.watermarks.operators import CHECKPOINT, PLAN, operator_watermarks
from wmcheck.statestore.formats import content as file_content
from wmcheck.statestore.formats.codecs import decompress
from wmcheck.statestore.formats.content import Decoding
from wmcheck.statestore.formats.files import StateFile, StorePartition
from wmcheck.statestore.formats.load import Lineages, StoreLoad, resolve, verify_loads
from wmcheck.statestore.formats.records import DELETE, PUT, changelog_records, sized_records
from wmcheck.statestore.formats.registry import ROCKSDB_ZIP, SST_DIR, formats_of
from wmcheck.statestore.formats.schema import event_time_field
from wmcheck.statestore.rocksdb.sst import CheckedTable, TableEntry, read_whole

from ..errors import CheckpointError
from ..layout import DEFAULT_STORE, STATE
from ..model import PINNED_CONFS, Operator, store_unique_ids
from ..numbers import is_number
from ..operator_kinds import is_transform_with_state
from .context import Context
from .definition import Fix, Instruction
from .remedies import state_rewind
from .watermark import FUTURE_TOLERANCE_MS

if TYPE_CHECKING:  # the keys' and rows' readers: imported where the content is read (wmcheck show reads none)
    from wmcheck.statestore.keys.partitions import Sample, StoreRows
    from wmcheck.statestore.keys.stale import EventField, FileChanges

AGGREGATION = "stateStoreSave"


@dataclass
class StateReads:
    """What the content check's read of the state files found and kept, by file path, for the checks that judge the
    same files (each file is read once): empty where that read did not run."""

    row_samples: dict[str, Sample] = field(default_factory=dict)
    """The first row of each sampled file that does not fit its store's schema or partition (:mod:`.partitioning`)."""
    aged_changes: dict[str, FileChanges | None] = field(default_factory=dict)
    """The keys at or before their partition's :class:`Bound` in each file read whole (None: not read whole)."""
    aged_unjudged: set[str] = field(default_factory=set)
    """Store partition directories past :data:`AGED_BUDGET`, not judged (:mod:`.evicted`)."""
    verified_tables: dict[str, CheckedTable] = field(default_factory=dict)
    """Snapshot table files verified on the way, kept within :data:`KEPT_TABLE_BYTES` (:mod:`.loaded_state`)."""
    value_encodings: dict[int, set[str]] = field(default_factory=dict)
    """By transformWithState operator: the value encodings its table files show (:mod:`.state_confs`)."""
    read_state: dict[str, bytes] = field(default_factory=dict)
    """Files read, kept within :data:`KEPT_FILE_BYTES` (:mod:`.loaded_state`)."""
    sidecars_verified: bool = False
    """Whether the checksum files of every file the next batch loads were verified."""


def state_reads(ctx: Context) -> StateReads:
    """The check run's :class:`StateReads` (filled by :func:`content_loads`)."""
    return ctx.once(_new_reads)


def _new_reads(ctx: Context) -> StateReads:
    return StateReads()


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
    return ctx.once(_lineages)


def _lineages(ctx: Context) -> Lineages | None:
    decoding = Decoding.of(ctx.conf)
    return None if decoding.missing_module() else Lineages(ctx.ckpt.fs, decoding.codec)


def plans(ctx: Context) -> list[Plan]:
    """A plan per store partition (skipping checkpoint v2 stores when a commit did not parse)."""
    return ctx.once(_plans)


def _plans(ctx: Context) -> list[Plan]:
    version = load_version(ctx)
    out = []
    for op in ctx.operators:
        for part in op.live_partitions:
            if any(f.unique_id for f in part.files) and not ctx.unique_ids_known:
                continue
            ids = store_unique_ids(ctx.ckpt, op, part)
            out.append(Plan(op, part, ids, resolve(part, version, ids, lineages(ctx))))
    return out


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
    return ctx.once(_content_loads)


def _content_loads(ctx: Context) -> list[StoreLoad]:
    decoding = Decoding.of(ctx.conf)
    missing = decoding.missing_module() if ctx.content else None
    if missing:
        ctx.notes.append(f"state file contents not verified: {missing}")
    todo = [p.load for p in plans(ctx) if p.missing is None]
    verify = ctx.content and not missing and bool(todo)
    if not verify:
        return []
    sampler = RowSampler(ctx, decoding)
    loads = verify_loads(ctx.ckpt.fs, todo, decoding, ctx.state_progress, sampler.read, ctx.spark_checksum_problem,
                         lineages(ctx), ctx.tree.entries, sampler.table, ctx.hadoop_checksum_problem)
    state_reads(ctx).sidecars_verified = True  # the checksum sidecars of every file read were verified on the way
    return loads


def store_rows(ctx: Context, decoding: Decoding) -> dict[str, StoreRows]:
    """Each HDFS or RocksDB changelog file of a load, and each RocksDB snapshot's table folder (``…/SSTs/``), of a
    store whose schema :mod:`..key_partitions` reads (the default store of an operator keyed by its partitioning
    keys): how its rows are laid out and partitioned."""
    from wmcheck.statestore.keys.partitions import KEYED_BY_PARTITIONING, StoreRows, key_partitioner, row_fit

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
            if f.format.decoder.rows or f.format.decoder == ROCKSDB_ZIP:
                rocksdb = f.format.decoder.rocksdb
                out[f"{part.directory}/{SST_DIR}/" if f.format.decoder == ROCKSDB_ZIP else f.path] = StoreRows(
                    part.partition, row_fit(schema.key_schema), row_fit(schema.value_schema),
                    key_partitioner(schema.key_schema, op.num_partitions), rocksdb, decoding.row_checksums)
    return out




class RowSampler:
    """Samples the rows of each file :func:`store_rows` knows as the content check reads it (each file is read
    once): what they show goes into :attr:`StateReads.row_samples` by path; the rows of each file of a partition
    :func:`aging` knows, whose keys are at or before its bound, into :attr:`StateReads.aged_changes` by path (None:
    not read whole)."""

    def __init__(self, ctx: Context, decoding: Decoding) -> None:
        reads = state_reads(ctx)
        self.ctx, self.codec = ctx, decoding.codec
        self.known, self.found = store_rows(ctx, decoding), reads.row_samples
        self.aged, self.changes = within_budget(ctx, aging(ctx)), reads.aged_changes
        self.kept, self.encodings, self.read_state = reads.verified_tables, reads.value_encodings, reads.read_state
        self.read_bytes = sum(map(len, self.read_state.values()))
        self.tws = set() if decoding.row_checksums else {  # (a checksum before each value: not judged)
            op.operator_id for op in ctx.operators if is_transform_with_state(op.name)}

    def read(self, paths: list[str]) -> dict[str, bytes]:
        """``ctx.read_state``, sampling what it reads, and keeping it for the checks that read loads again while the
        kept files hold fewer than :data:`KEPT_FILE_BYTES` (:attr:`StateReads.read_state`: each file is read once)."""
        data = self.ctx.read_state(paths)
        for path, content in data.items():
            if self.read_bytes + len(content) <= KEPT_FILE_BYTES:
                self.read_state[path] = content
                self.read_bytes += len(content)
        from wmcheck.statestore.keys.partitions import sample_rows

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
        from wmcheck.statestore.keys import stale_columns
        from wmcheck.statestore.keys.stale import record_changes

        try:
            plain = decompress(data, self.codec, path, AGED_LIMIT + 1)
            if len(plain) > AGED_LIMIT:
                return None
            parse = changelog_records if rows.rocksdb else sized_records
            if columnar(len(plain)):
                try:
                    return stale_columns.record_changes(plain, lambda: parse(plain, path), rows.key_start(PUT),
                                                        rows.key_start(DELETE), bound.event, bound.bound_us,
                                                        not rows.rocksdb)
                except stale_columns.Unproven:
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
            from wmcheck.statestore.keys.partitions import sample_table

            self.found[path] = sample_table(table, rows)
            bound = self.aged.get(folder.rsplit("/", 1)[0])
            if bound is not None:
                self.changes[path] = table_file_changes(table, bound)


def sampled_encoding(entries: Iterator[TableEntry]) -> str | None:
    """The encoding the first :data:`VALUE_SAMPLE` live values of a table file show (:func:`..value_encoding.written_encoding`)."""
    from wmcheck.statestore.encodings.value_encoding import written_encoding

    return written_encoding(islice((e.value for e in entries if e.live), VALUE_SAMPLE))


VALUE_SAMPLE = 64
KEPT_FILE_BYTES = 32 << 20
KEPT_TABLE_BYTES = 32 << 20
"""The most bytes of verified table files kept in :attr:`StateReads.verified_tables` (by path) for the checks that read
snapshots whole (:mod:`.loaded_state`): within it, no block is hashed twice."""
COLUMNAR = True
"""Whether :class:`RowSampler` reads files with :mod:`..stale_columns` where it can, and WM078 an HDFS load's records
with :mod:`..sized_columns` (off: with :mod:`..stale_keys` and record by record alone, the references)."""


_JUDGED = [0]
"""Bytes of state files :func:`columnar` was asked about in this process."""


def columnar(size: int) -> bool:
    """Whether ``size`` bytes of state files are read as columns: :data:`COLUMNAR`, once NumPy is imported or the
    files asked about so far reach :data:`~wmcheck.statestore.formats.content.COLUMNAR_BYTES` (fewer cost less by the
    references than importing NumPy does: a check of small state files stays free of it, one of many small files
    does not read them all record by record)."""
    if not COLUMNAR:
        return False
    _JUDGED[0] += size
    return _JUDGED[0] >= file_content.COLUMNAR_BYTES or "numpy" in sys.modules


def table_file_changes(table: CheckedTable, bound: Bound) -> FileChanges | None:
    """The :class:`FileChanges` of a snapshot's table file, None where it is not read whole."""
    from wmcheck.statestore.keys import stale_columns
    from wmcheck.statestore.keys.stale import table_changes

    if columnar(len(table.data)):
        try:
            return stale_columns.table_changes(table, bound.event, bound.bound_us)
        except stale_columns.Unproven:
            pass
    return read_whole(table.data, lambda entries: table_changes(entries, bound.event, bound.bound_us))


AGED_BUDGET = 32 << 20
"""Bytes of state files (as stored) that one check reads whole for :func:`aging`: a windowed aggregation of a million
keys (28 MB of RocksDB table files, 17 MB of HDFS deltas) is judged whole in about a second; the partitions past it
are not judged."""


def within_budget(ctx: Context, bounds: dict[str, Bound]) -> dict[str, Bound]:
    """The partitions of ``bounds`` whose files (a snapshot's table files included) fit in :data:`AGED_BUDGET`
    together, in directory order; the others go into :attr:`StateReads.aged_unjudged`."""
    cost = {}
    for plan in plans(ctx):
        if plan.part.directory in bounds:
            chain = plan.load.chain
            tables = sum(f.size for f in plan.part.sst_files) if any(f.format.decoder == ROCKSDB_ZIP for f in chain) else 0
            cost[plan.part.directory] = tables + sum(f.size for f in chain if f.format.decoder != ROCKSDB_ZIP)
    kept, spent, unjudged = {}, 0, state_reads(ctx).aged_unjudged
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
    return ctx.once(_aging)


def _aging(ctx: Context) -> dict[str, Bound]:
    from wmcheck.statestore.keys.stale import event_time_reader

    out: dict[str, Bound] = {}
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
