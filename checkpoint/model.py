"""A checkpoint as Spark sees it on restart: files read lazily, parsed once, facts derived.

All I/O goes through one :class:`~wmcheck.checkpoint.fs.FileSystem`; parsing is done by the
pure parsers. Derived facts follow ``MicroBatchExecution.populateStartOffsets``.
"""
from __future__ import annotations

import dataclasses
import posixpath
from functools import cached_property
from typing import TYPE_CHECKING, Callable, Mapping, TypeVar

from wmcheck.checkpoint.logs.commits import CommitEntry
from wmcheck.checkpoint.logs.file_logs import FileLog, parse_file_log
from wmcheck.checkpoint.logs.metadata_log import COMMIT_LOG, OFFSET_LOG, LogKind, MetadataLog
from wmcheck.checkpoint.logs.offsets import OffsetSeq
from wmcheck.checkpoint.logs.query_metadata import QueryMetadata, parse_query_metadata
from wmcheck.checkpoint.records import dataclass
from wmcheck.statestore.formats.files import (
    DEFAULT_STORE,
    StateLayout,
    StorePartition,
    holding,
    scan_state,
    schema_file_paths,
    stray_schema_paths,
)

from .batch_span import check_span
from .errors import CheckpointError, MalformedFileError, MissingFileError
from .fs import FileInfo, FileSystem, open_fs, require_dir
from .layout import COMMITS, OFFSETS, SOURCES, STATE, batch_ids
from .not_a_checkpoint import CHECKPOINT_ENTRIES, not_a_checkpoint
from .numbers import is_number
from .operator_kinds import infer_operator_name
from .repartitions import Repartition, find_repartitions, partitions_of, source_ends

if TYPE_CHECKING:
    from wmcheck.statestore.formats.schema import ColumnFamilySchema

T = TypeVar("T")

WATERMARK_POLICY = "spark.sql.streaming.multipleWatermarkPolicy"
PINNED_CONFS = {
    "shuffle_partitions": "spark.sql.shuffle.partitions",
    "state_provider": "spark.sql.streaming.stateStore.providerClass",
    "watermark_policy": WATERMARK_POLICY,
    "aggregation_state_format": "spark.sql.streaming.aggregation.stateFormatVersion",
    "join_state_format": "spark.sql.streaming.join.stateFormatVersion",
    "flatmapgroups_state_format": "spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion",
    "checkpoint_format": "spark.sql.streaming.stateStore.checkpointFormatVersion",
    "rocksdb_format": "spark.sql.streaming.stateStore.rocksdb.formatVersion",
    "compression_codec": "spark.sql.streaming.stateStore.compression.codec",
    "encoding_format": "spark.sql.streaming.stateStore.encodingFormat",
}


@dataclass(frozen=True)
class Operator:
    """A stateful operator: what its metadata says, joined with what ``state/`` holds."""

    operator_id: int
    name: str | None
    stores: tuple[str, ...]
    num_partitions: int | None
    partitions: tuple[StorePartition, ...]
    metadata: object | None  # the parsed operator metadata file, when there is one
    name_inferred: bool = False
    """``name`` was inferred from the stores and schemas: no operator metadata (Spark < 4.0)."""
    metadata_lag: str | None = None
    """Why ``num_partitions`` is not the metadata's: v1 metadata still names the count before a repartition."""
    metadata_conflict: str | None = None
    """Why ``num_partitions`` is not the metadata's when nothing Spark did explains it: the pinned count wins."""
    written_partitions: int | None = None
    """The count the next batch's state was written with (metadata and partitions agree) where the edited offsets pin
    another (``num_partitions``)."""

    @property
    def live_partitions(self) -> tuple[StorePartition, ...]:
        """The store partitions the next batch loads: those below ``num_partitions`` (a scale-down leaves more)."""
        limit = self.num_partitions
        return self.partitions if limit is None else tuple(p for p in self.partitions if p.partition < limit)


class Checkpoint:
    """A checkpoint directory on any :class:`FileSystem`."""

    def __init__(self, fs: FileSystem) -> None:
        self.fs = fs
        self._cache: dict[str, object] = {}
        self.unread_operator_metadata: dict[str, CheckpointError] = {}  # v1 operator metadata that does not parse
        self._raw: dict[str, bytes] = {}
        self._offset_failures: dict[int, CheckpointError | None] = {}

    @classmethod
    def open(cls, location: str, fs_options: Mapping[str, str] | None = None) -> "Checkpoint":
        """Open ``location``; fail clearly when it is not a checkpoint at all."""
        ckpt = cls(open_fs(location, fs_options))
        require_dir(ckpt.fs)
        names = set(ckpt.fs.names(""))
        if not names & CHECKPOINT_ENTRIES:
            raise not_a_checkpoint(ckpt.fs, names)
        return ckpt

    @property
    def location(self) -> str:
        return self.fs.uri()

    # -- reading -----------------------------------------------------------------------------

    def preload(self, paths: list[str]) -> None:
        """Read many files at once (a thread pool on remote stores); parse lazily later."""
        self._raw.update(self.fs.read_many([p for p in paths if p not in self._cache and p not in self._raw]))

    def remember(self, data: Mapping[str, bytes]) -> None:
        """Keep bytes already read (e.g. to verify a checksum) for the first parse of each path."""
        self._raw.update((p, d) for p, d in data.items() if p not in self._cache)

    def read(self, path: str) -> bytes:
        """Raw bytes of a file (preloaded ones come from memory)."""
        return self._raw.pop(path) if path in self._raw else self.fs.read(path)

    def parse(self, path: str, parser: Callable[[bytes, str], T]) -> T:
        """Read and parse ``path`` once; later calls return the same object."""
        if path not in self._cache:
            self._cache[path] = parser(self.read(path), path)
        return self._cache[path]  # type: ignore[return-value]

    @cached_property
    def offset_ids(self) -> list[int]:
        return batch_ids(self.fs.names(OFFSETS))

    @cached_property
    def offset_id_set(self) -> frozenset[int]:
        """``offset_ids`` for membership tests."""
        return frozenset(self.offset_ids)

    @cached_property
    def repartitions(self) -> tuple[Repartition, ...]:
        """Every repartition batch (each offsets file is read once, so this is worked out once)."""
        ids = self.offset_ids
        self.load_batches(ids)
        plans = {}
        for b in ids:
            try:
                plans[b] = (partitions_of(self, b), source_ends(self.offsets(b)))
            except CheckpointError:
                continue  # a file that does not parse (wmcheck check: WM001) shows no repartition
        return find_repartitions(plans, self.commit_ids, self.state_layout)

    @cached_property
    def commit_ids(self) -> list[int]:
        return batch_ids(self.fs.names(COMMITS))

    def parse_log(self, kind: LogKind[T], files: Mapping[int, str]) -> tuple[dict[int, T], dict[str, CheckpointError]]:
        """The files of a log (batch -> path), each parsed once, and the error of each one that does not parse, by
        path: what a tolerant reader (``wmcheck check``) goes on with."""
        parsed: dict[int, T] = {}
        failed: dict[str, CheckpointError] = {}
        for batch, path in files.items():
            try:
                parsed[batch] = self.parse(path, kind.parse)
            except CheckpointError as exc:
                failed[path] = exc
        return parsed, failed

    def offsets(self, batch: int) -> OffsetSeq:
        return self.parse(OFFSET_LOG.path(batch), OFFSET_LOG.parse)

    def offsets_failure(self, batch: int) -> CheckpointError | None:
        """Why ``offsets/<batch>`` cannot be read (empty or truncated by a crash, edited, missing); None when it parses."""
        if batch not in self._offset_failures:
            self._offset_failures[batch] = self._failure(self.offsets, batch, self.offset_ids, 2)
        return self._offset_failures[batch]

    def commit_failure(self, batch: int) -> CheckpointError | None:
        """Why ``commits/<batch>`` cannot be read, as :meth:`offsets_failure` says it of an offsets file."""
        return self._failure(self.commit, batch, self.commit_ids, 1)

    @staticmethod
    def _failure(read: Callable[[int], object], batch: int, ids: list[int], restart_reads: int) -> CheckpointError | None:
        """Why ``read(batch)`` fails, None when it does not; the hint of a file before the last ``restart_reads`` of
        its log (those Spark reads on restart) is one true there: Spark restarts without it."""
        try:
            read(batch)
            return None
        except CheckpointError as exc:
            if batch in ids[-restart_reads:] or not isinstance(exc, MalformedFileError):
                return exc
            return MalformedFileError(exc.message, path=exc.path, line=exc.line, byte=exc.byte, hint=(
                "Spark does not read it on restart (only the last offsets files and the newest commit), but rewinds "
                "to this batch and replays of it need it: restore it from a backup"))

    def readable_offsets(self, batch: int) -> OffsetSeq | None:
        """``offsets/<batch>`` when it parses, else None (:meth:`offsets_failure` says why)."""
        return None if self.offsets_failure(batch) is not None else self.offsets(batch)

    @cached_property
    def broken_tail(self) -> tuple[int, ...]:
        """The last batches whose offsets files do not parse (a crash while Spark wrote ``offsets/N``; a newer format
        is none), oldest first: Spark fails to restart on them; without them it plans those batches again."""
        ids, end = self.offset_ids, len(self.offset_ids)
        while end and isinstance(self.offsets_failure(ids[end - 1]), MalformedFileError):
            end -= 1
        return tuple(ids[end:])

    @property
    def last_readable_batch(self) -> int | None:
        """The last batch whose offsets file parses: ``last_batch`` unless the tail is broken (:attr:`broken_tail`)."""
        readable = len(self.offset_ids) - len(self.broken_tail)
        return self.offset_ids[readable - 1] if readable else None

    def commit(self, batch: int) -> CommitEntry:
        return self.parse(COMMIT_LOG.path(batch), COMMIT_LOG.parse)

    def load_batches(self, ids: list[int]) -> None:
        """Preload the offsets and commits of ``ids`` (one round of reads on remote stores)."""
        commits = set(self.commit_ids)
        offsets = set(self.offset_ids)
        self.preload([OFFSET_LOG.path(b) for b in ids if b in offsets] + [COMMIT_LOG.path(b) for b in ids if b in commits])

    @cached_property
    def query_metadata(self) -> QueryMetadata | None:
        """The root ``metadata`` file, None when absent."""
        if self.fs.info("metadata") is None:
            return None
        return self.parse("metadata", parse_query_metadata)

    @cached_property
    def state_layout(self) -> StateLayout:
        unreadable: list[CheckpointError] = []
        files = self.fs.walk(STATE, dirs=True, unreadable=unreadable)
        return dataclasses.replace(scan_state(files), unreadable=tuple(unreadable))

    @cached_property
    def source_dirs(self) -> list[int]:
        """Source ids that have a file-source log under ``sources/``: its numbered directories but those of sources the
        last readable offsets name of a kind keeping something else there (``file_log_dir``: Kafka's initial offsets)."""
        numbered = sorted(int(i.name) for i in self.fs.list_dir(SOURCES) if i.is_dir and is_number(i.name))
        try:
            last = self.last_readable_batch if numbered else None
            sources = self.offsets(last).sources if last is not None else ()
        except CheckpointError:  # offsets that cannot be read (a directory, no access): every numbered directory
            return numbered
        others = {i for i, s in enumerate(sources) if not s.source.file_log_dir}
        return [i for i in numbered if i not in others]

    def metadata_log(self, directory: str) -> MetadataLog:
        """A file source's (or any) metadata log directory, listed once."""
        key = f"metadata-log:{directory}"
        if key not in self._cache:
            self._cache[key] = MetadataLog.listed(self.fs, directory)
        return self._cache[key]  # type: ignore[return-value]

    def file_log(self, path: str) -> FileLog:
        """One file of a file-source (or file-sink) log, parsed once."""
        return self.parse(path, parse_file_log)

    # -- derived facts -------------------------------------------------------------------------

    @property
    def last_batch(self) -> int | None:
        return self.offset_ids[-1] if self.offset_ids else None

    @property
    def last_committed_batch(self) -> int | None:
        return self.commit_ids[-1] if self.commit_ids else None

    @property
    def pending_batch(self) -> int | None:
        """The planned but uncommitted batch Spark re-runs on restart, if any."""
        last, done = self.last_batch, self.last_committed_batch
        return last if last is not None and (done is None or last > done) else None

    def start_offsets_missing(self, last: int) -> int | None:
        """The batch whose offsets file Spark lacks to restart with ``offsets/<last>`` as the last one (None: it has
        what it reads). ``MicroBatchExecution.populateStartOffsets`` reads ``offsets/<last - 1>`` as where batch
        ``last`` started (``validateOffsetLogAndGetPrevOffset``; without it: 'batch <last - 1> doesn't exist'); batch 0
        starts from nothing. Of the commits it reads the newest only, so no commit file before it is needed."""
        return None if last == 0 or last - 1 in self.offset_id_set else last - 1

    @property
    def next_batch(self) -> int:
        """The batch id the next run executes first."""
        pending = self.pending_batch
        if pending is not None:
            return pending
        return 0 if self.last_batch is None else self.last_batch + 1

    @property
    def next_state_version(self) -> int:
        """The state version the next batch loads: last committed batch + 1 (0 when none)."""
        done = self.last_committed_batch
        return 0 if done is None else done + 1

    @property
    def latest_metadata(self):
        """The metadata of the last offsets file that parses (None when absent or blank)."""
        last = self.last_readable_batch
        return self.offsets(last).metadata if last is not None else None

    @property
    def conf(self) -> Mapping[str, str]:
        """The conf pinned in the last offsets file that parses."""
        meta = self.latest_metadata
        return meta.conf if meta else {}

    @property
    def watermark_ms(self) -> int:
        """The watermark the next batch uses, as Spark computes it on restart (after a broken tail: once it is
        removed, see :attr:`broken_tail`)."""
        last = self.last_readable_batch
        return 0 if last is None else self.watermark_after(last)

    def watermark_after(self, batch: int) -> int:
        """The watermark the batch after ``batch`` starts from, as Spark computes it on restart: the larger of
        ``offsets/<batch>``'s and ``commits/<batch>``'s (read around when it does not parse: check reports it)."""
        meta = self.offsets(batch).metadata
        watermark = meta.batch_watermark_ms if meta else 0
        if batch in self.commit_ids and self.commit_failure(batch) is None:
            watermark = max(watermark, self.commit(batch).next_batch_watermark_ms or 0)
        return watermark

    @cached_property
    def _unique_ids(self) -> dict[tuple[int, int, int], dict[int, str]]:
        out: dict[tuple[int, int, int], dict[int, str]] = {}
        self.load_batches(self.commit_ids)
        for batch in self.commit_ids:
            for op, parts in (self.commit(batch).state_unique_ids or {}).items():
                for part, ids in enumerate(parts):
                    for store, uid in enumerate(ids):
                        out.setdefault((int(op), part, store), {})[batch + 1] = uid
        return out

    def unique_ids_for(self, operator_id: int, partition: int, store_index: int) -> dict[int, str]:
        """Checkpoint format v2: state version -> unique id (``commits/V-1`` names version V's files)."""
        return self._unique_ids.get((operator_id, partition, store_index), {})

    @cached_property
    def operators(self) -> list[Operator]:
        """Stateful operators from ``state/<op>/_metadata`` and the state files present."""
        out = []
        for op in self.state_layout.operators:
            meta = self._operator_metadata(op.metadata_files)
            stores = (tuple(s.store_name for s in meta.stores) if meta else ()) or tuple(op.stores)
            nums = {s.num_partitions for s in meta.stores} if meta else set()
            name = meta.operator_name if meta else infer_operator_name(stores, self.store_schema(op.operator_id, DEFAULT_STORE))
            counted = len(op.partition_ids) or None
            if meta is None:  # (Spark 3.5 writes none) Spark runs it with the pinned count, whatever directories exist
                num = self._pinned_partitions() or counted
            else:
                num = nums.pop() if len(nums) == 1 else counted
            lag = self._repartitioned_since(num) if meta is not None and meta.version == 1 else None
            pinned = self._pinned_partitions() if meta is not None and lag is None else None
            conflict = pinned is not None and num is not None and pinned != num
            written = num if conflict and holding(op.partitions, self.next_state_version) == num else None
            out.append(
                Operator(
                    op.operator_id,
                    name,
                    stores,
                    lag[0] if lag else pinned if conflict else num,
                    op.partitions,
                    meta,
                    name_inferred=meta is None and name is not None,
                    metadata_lag=lag[1] if lag else None,
                    metadata_conflict=(
                        f"its operator metadata says {num} partitions, but the offsets pin spark.sql.shuffle.partitions="
                        f"{pinned}, the count Spark runs its stateful operators with (the metadata was edited or comes "
                        "from another query)") if conflict and written is None else None,
                    written_partitions=written,
                )
            )
        return out

    def _pinned_partitions(self) -> int | None:
        """The shuffle partition count the last committed batch pins (else the last batch's): the number of state
        partitions Spark runs every stateful operator with."""
        batch = self.last_committed_batch if self.last_committed_batch is not None else self.last_batch
        return partitions_of(self, batch) if batch is not None else None

    def _repartitioned_since(self, recorded: int | None) -> tuple[int, str] | None:
        """The partition count of the last committed batch and why, when a committed repartition batch
        changed it away from the count ``recorded`` in v1 operator metadata (which Spark does not rewrite)."""
        done = self.last_committed_batch
        current = partitions_of(self, done) if done is not None else None
        if done is None or current is None or recorded is None or current == recorded:
            return None
        last = next((r for r in reversed(self.repartitions) if r.committed and r.batch <= done), None)
        if last is None or last.to_partitions != current:
            return None
        return current, (f"its v1 operator metadata still says {recorded} partitions: the repartition at batch "
                         f"{last.batch} moved the state to {current} and Spark does not rewrite v1 metadata")

    def schema_file_paths(self, operator_id: int, store: str) -> list[str]:
        """Schema files of a store, newest first (:func:`~wmcheck.statestore.formats.files.schema_file_paths`)."""
        return schema_file_paths(self.state_layout, self.fs.exists, operator_id, store)

    def store_schema(self, operator_id: int, store: str, column_family: str = DEFAULT_STORE) -> "ColumnFamilySchema | None":
        """The key and value schema of a store's column family from its newest schema file, if any (else from a
        schema file moved to another partition's directory: the store's rows are the same)."""
        from wmcheck.statestore.formats.schema import parse_state_schema

        paths = self.schema_file_paths(operator_id, store)
        for path in paths or stray_schema_paths(self.state_layout, operator_id, store):
            found = next((cf for cf in self.parse(path, parse_state_schema).column_families if cf.name == column_family), None)
            if found:
                return found
        return None

    def _operator_metadata(self, files: tuple[FileInfo, ...]):
        """The operator metadata the next batch starts from: the newest ``_metadata/v2/<batch>`` up to the last
        committed batch if any, else ``_metadata/metadata``."""
        done = self.last_committed_batch
        v2 = sorted(
            (f for f in files if posixpath.basename(posixpath.dirname(f.path)) == "v2" and is_number(f.name)),
            key=lambda f: int(f.name),
        )
        # the metadata of the batch the state is loaded from: not one written by an uncommitted batch
        v2 = [f for f in v2 if done is None or int(f.name) <= done] or v2
        chosen = v2[-1] if v2 else next((f for f in files if f.name == "metadata"), None)
        from wmcheck.checkpoint.logs.operator_metadata import parse_operator_metadata

        try:
            return self.parse(chosen.path, parse_operator_metadata) if chosen else None
        except CheckpointError as exc:  # Spark reads v1 metadata only for a check it skips when it cannot (WM045)
            if v2 or chosen is None:
                raise
            self.unread_operator_metadata[chosen.path] = exc
            return None

    def gaps(self, ids: list[int]) -> list[tuple[int, int]]:
        """Missing id ranges (inclusive) between the first and last id present."""
        return [(a + 1, b - 1) for a, b in zip(ids, ids[1:]) if b - a > 1]


def store_unique_ids(ckpt: Checkpoint, op: Operator, part: StorePartition) -> dict[int, str] | None:
    """Checkpoint format v2: state version -> unique id of one store partition (None for v1 files)."""
    if not any(f.unique_id for f in part.files):
        return None
    index = op.stores.index(part.store) if part.store in op.stores else 0
    return ckpt.unique_ids_for(op.operator_id, part.partition, index) or None


def open_checkpoint(location: str, fs_options: Mapping[str, str] | None = None) -> Checkpoint:
    """Open a checkpoint by path or URI (the library's entry point)."""
    return Checkpoint.open(location, fs_options)


__all__ = ["Checkpoint", "Operator", "open_checkpoint", "CheckpointError", "MissingFileError", "PINNED_CONFS", "check_span"]
