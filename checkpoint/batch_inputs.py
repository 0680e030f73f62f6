"""What each recorded batch read, rebuilt from the logs alone (no Spark): ``wmcheck replay --plan``.

Per batch and source: the files a file source read (``sources/<i>/`` between the previous batch's
``logOffset`` and this batch's, compacted or not, exactly as ``FileStreamSource.getBatch`` asks
``FileStreamSourceLog.get(start + 1, end)``), the Kafka start and end offsets as Spark's
``startingOffsets``/``endingOffsets`` JSON, a Delta source's version/index range, and the two
watermarks of the batch: the one it ran with and the one its stateful operators judged late rows by.
"""
from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Any, Iterable, Mapping
from urllib.parse import unquote

from wmcheck.checkpoint.logs.kafka_offsets import KAFKA_EARLIEST, kafka_json, parse_kafka_initial_offsets
from wmcheck.checkpoint.logs.metadata_log import FILE_SOURCE_LOG
from wmcheck.checkpoint.logs.source_offsets import SourceOffset
from wmcheck.checkpoint.logs.textlog import dump_json
from wmcheck.checkpoint.records import dataclass

from .errors import CheckpointError, MissingFileError, arg
from .layout import COMPACT_SUFFIX, SOURCES
from .locations import map_location, spark_location, stat_locations
from .model import Checkpoint, check_span
from .numbers import is_number

if TYPE_CHECKING:
    from .kafka_retention import KafkaRetention
    from .sources.delta_files import DeltaSourceLog

LATE_RULES = ("previous", "current")


@dataclass(frozen=True)
class InputFile:
    """One file a batch read: ``path`` as the source log records it, ``location`` as handed to Spark."""

    path: str
    location: str
    log_batch: int
    size: int | None = None
    exists: bool | None = None
    partition: Mapping[str, str | None] = field(default_factory=dict)
    """A Delta source's file of a partitioned table: its partition values as the log writes them (the file holds
    no partition column); else empty."""


@dataclass(frozen=True)
class SourceInput:
    """What one source contributed to one batch: the offset range and what it resolves to."""

    source_id: str
    kind: str
    start: SourceOffset | None
    end: SourceOffset
    files: tuple[InputFile, ...] = ()
    log_batches: tuple[int, ...] = ()
    starting_offsets: dict[str, dict[str, int]] | None = None
    ending_offsets: dict[str, dict[str, int]] | None = None
    records: int | None = None
    replayable: bool = True
    note: str | None = None
    table_schema: str | None = None
    """A Delta source's table schema (``metaData.schemaString``; None: not read), which types its partition values."""

    @property
    def missing(self) -> list[InputFile]:
        return [f for f in self.files if f.exists is False]

    @property
    def total_bytes(self) -> int | None:
        """The bytes of the files read (None unless every file's size is known)."""
        sizes = [f.size for f in self.files if f.size is not None]
        return sum(sizes) if len(sizes) == len(self.files) else None

    @property
    def starting_offsets_json(self) -> str | None:
        """A Kafka source's start as Spark's ``startingOffsets`` option takes it."""
        return dump_json(self.starting_offsets) if self.starting_offsets else None

    @property
    def ending_offsets_json(self) -> str | None:
        return dump_json(self.ending_offsets) if self.ending_offsets is not None else None

    @property
    def start_version(self) -> dict[str, Any] | None:
        """A Delta source's start position (reservoir version, index)."""
        return _delta_position(self.start)

    @property
    def end_version(self) -> dict[str, Any] | None:
        return _delta_position(self.end)


@dataclass(frozen=True)
class BatchInput:
    """One batch: its watermarks and what each (selected) source read."""

    batch_id: int
    committed: bool
    watermark_ms: int
    late_watermark_ms: int | None
    timestamp_ms: int | None
    sources: tuple[SourceInput, ...] = field(default=())


# -- batch range ------------------------------------------------------------------------------


def oldest_replayable(ckpt: Checkpoint) -> int | None:
    """The first batch whose input can be rebuilt: batch 0, or one whose previous offsets file survives."""
    present = set(ckpt.offset_ids)
    return next((b for b in ckpt.offset_ids if b == 0 or b - 1 in present), None)


def replayable_spans(ckpt: Checkpoint) -> str:
    """The batches whose offsets file and the one before it are both there, as spans: ``0..1, 5``."""
    present = set(ckpt.offset_ids)
    ok = [b for b in ckpt.offset_ids if b == 0 or b - 1 in present]
    runs: list[list[int]] = []
    for b in ok:
        if runs and runs[-1][-1] == b - 1:
            runs[-1].append(b)
        else:
            runs.append([b])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}..{r[-1]}" for r in runs) or "none"


def replay_range(ckpt: Checkpoint, start: int, end: int | None = None, include_pending: bool = False) -> list[int]:
    """Batch ids ``start..end`` to replay; a clear error for purged, missing or uncommitted batches."""
    last = ckpt.last_batch if include_pending else ckpt.last_committed_batch
    if last is None or not ckpt.offset_ids:
        raise MissingFileError("the checkpoint has no committed batch to replay" if not include_pending
                               else "the checkpoint has no batch to replay", path="offsets",
                               hint="the query never completed a batch" if ckpt.offset_ids else "start the query first")
    check_span(start, end, last, beyond=False)
    check_span(start, None, last, "batch" if include_pending else "committed batch")
    end = last if end is None else end
    if end > last:
        pending = ckpt.pending_batch
        if not include_pending and pending is not None and end <= pending:
            raise CheckpointError(
                f"batch {pending} is not committed (the last committed batch is {last})",
                hint=f"add {arg('include_pending')} to replay the batch Spark would re-run on restart", param="end",
            )
        raise CheckpointError(f"batch {end} does not exist: the last {'' if include_pending else 'committed '}batch is {last}",
                              hint=f"use {arg('end', last)} or less", param="end")
    oldest = oldest_replayable(ckpt)
    present = set(ckpt.offset_ids)
    for batch in range(start, end + 1):
        if batch not in present or (batch > 0 and batch - 1 not in present):
            gone = batch if batch not in present else batch - 1
            if gone > ckpt.offset_ids[0]:
                raise MissingFileError(
                    f"batch {batch} cannot be replayed: offsets/{gone} is missing, a gap in the log (async progress "
                    f"tracking logs only some batches; otherwise a lost file): each batch needs its offsets file and "
                    f"the one before it",
                    path=f"offsets/{gone}", param="start",
                    hint=f"the batches that can be replayed are {replayable_spans(ckpt)}")
            raise MissingFileError(
                f"batch {batch} cannot be replayed: offsets/{gone} was purged (Spark keeps the last "
                f"spark.sql.streaming.minBatchesToRetain batches); the oldest replayable batch is {oldest}",
                path=f"offsets/{gone}",
                hint=f"use {arg('start', oldest)}" if oldest is not None and oldest <= end else "no batch in this range can be rebuilt",
                param="start",
            )
    return list(range(start, end + 1))


def late_watermark_ms(ckpt: Checkpoint, batch: int, rule: str = "previous") -> int | None:
    """The watermark batch ``batch``'s stateful operators dropped late rows by (``event time <= it``).

    ``previous`` (Spark 3.4+ default, ``statefulOperator.allowMultiple=true``): the previous batch's
    ``batchWatermarkMs`` (0 for the first batch); ``current`` (Spark < 3.4, or ``allowMultiple=false``):
    the batch's own. Never below 0. None when the previous offsets file is gone.
    """
    if rule not in LATE_RULES:
        raise CheckpointError(f"unknown late-watermark rule {rule!r}", hint=f"use one of {', '.join(LATE_RULES)}")
    target = batch if rule == "current" else batch - 1
    if target < 0:
        return 0
    if target not in set(ckpt.offset_ids):
        return None
    meta = ckpt.offsets(target).metadata
    return max(meta.batch_watermark_ms if meta else 0, 0)


# -- file sources ------------------------------------------------------------------------------


def source_log_entries(ckpt: Checkpoint, source_id: str, log_batches: Iterable[int]) -> list[tuple[int, str]]:
    """(log batch, logged path) of the given file-source log batches, read from ``N`` or a later ``K.compact``."""
    wanted = list(log_batches)
    if not wanted:
        return []
    log = ckpt.metadata_log(FILE_SOURCE_LOG.folder(source_id))
    out: list[tuple[int, str]] = []
    for batch in wanted:
        path = log.holder(batch)
        if path is None:
            raise MissingFileError(
                f"file-source log batch {batch} is missing (no {batch} file and no later .compact file)",
                path=FILE_SOURCE_LOG.path(batch, FILE_SOURCE_LOG.folder(source_id)),
                hint="the source log was purged or damaged: the files of this batch are not recorded anywhere",
            )
        entries = ckpt.file_log(path).entries
        out += [(batch, e.path) for e in entries if e.batch_id == batch] if path.endswith(COMPACT_SUFFIX) else \
            [(batch, e.path) for e in entries]
    return out


# -- Kafka and Delta ------------------------------------------------------------------------------


def initial_offsets_path(ckpt: Checkpoint, source_id: str) -> str:
    """Where a Kafka source's initial offsets are: ``sources/<id>/0``, or for the one source of a query that named it
    (``DataStreamReader.name``, Spark 4.2+: the offsets log does not record the name) ``sources/<name>/0``."""
    path = FILE_SOURCE_LOG.path(0, FILE_SOURCE_LOG.folder(source_id))
    if ckpt.fs.exists(path) or not ckpt.fs.exists(SOURCES):
        return path
    dirs = [i.name for i in ckpt.fs.list_dir(SOURCES) if i.is_dir]
    last = ckpt.last_readable_batch
    one_source = last is not None and len(ckpt.offsets(last).sources) == 1
    if one_source and len(dirs) == 1 and not is_number(dirs[0]):
        return FILE_SOURCE_LOG.path(0, FILE_SOURCE_LOG.folder(dirs[0]))
    return path


def _kafka_input(ckpt: Checkpoint, src: SourceOffset, prev: SourceOffset | None) -> SourceInput:
    end = src.kafka_offsets or {}
    note = None
    if prev is not None and prev.kafka_offsets is not None:
        start = prev.kafka_offsets
    else:
        path = initial_offsets_path(ckpt, src.source_id)
        if not ckpt.fs.exists(path):
            return SourceInput(src.source_id, "kafka", prev, src, ending_offsets=kafka_json(end), replayable=False,
                               note=f"the first batch of this source starts at the initial offsets in {path}, which is missing")
        start = ckpt.parse(path, parse_kafka_initial_offsets)
    starting = {t: {p: start.get(t, {}).get(p, KAFKA_EARLIEST) for p in parts} for t, parts in end.items()}
    new = sorted(f"{t}[{p}]" for t, parts in starting.items() for p, o in parts.items() if o == KAFKA_EARLIEST)
    if new:
        note = f"new partitions start at the earliest offset: {', '.join(new)}"
    records = None if new else sum(o - starting[t][p] for t, parts in end.items() for p, o in parts.items())
    return SourceInput(src.source_id, "kafka", prev, src, starting_offsets=kafka_json(starting),
                       ending_offsets=kafka_json(end), records=records, note=note)


def _delta_position(offset: SourceOffset | None) -> dict[str, Any] | None:
    if offset is None or offset.kind != "delta":
        return None
    value = offset.value
    return {k: value[k] for k in ("reservoirVersion", "index", "isStartingVersion") if k in value}


# -- the plan --------------------------------------------------------------------------------------


def source_kind(ckpt: Checkpoint, src: SourceOffset) -> str:
    """The offset's kind; a bare long with a ``sources/<id>/`` log is the legacy file-source offset."""
    kind = src.kind
    if kind == "long" and is_number(src.source_id) and int(src.source_id) in ckpt.source_dirs:
        return "file"
    return kind


KNOWN_KINDS = frozenset({"file", "kafka", "delta", "long"})
"""The source offset kinds recognised by their shape (a source's own JSON may change shape from batch to batch)."""


def changed_kind(ckpt: Checkpoint, before: SourceOffset, after: SourceOffset) -> bool:
    """Whether one source's offsets of two batches are of two recognised kinds (the later one comes from another
    source: Spark cannot read it as this source's offset)."""
    kinds = {source_kind(ckpt, before), source_kind(ckpt, after)}
    return len(kinds) == 2 and kinds <= KNOWN_KINDS


def unreadable_file_offset(ckpt: Checkpoint, before: SourceOffset, after: SourceOffset) -> bool:
    """Whether a file source's later offset is one Spark cannot read as ``FileStreamSourceOffset``: not a JSON
    object with a number as ``logOffset`` (json4s takes 9.0 as 9; ``null``, ``{}`` or ``"9"`` fail), nor the
    legacy bare long."""
    if source_kind(ckpt, before) != "file" or after.raw is None or source_kind(ckpt, after) in KNOWN_KINDS:
        return False
    value = after.value
    number = value.get("logOffset") if isinstance(value, dict) else None
    return not (isinstance(number, (int, float)) and not isinstance(number, bool))


def article(kind: str) -> str:
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


def _file_input(ckpt: Checkpoint, src: SourceOffset, prev: SourceOffset | None, path_map: Mapping[str, str],
                sizes: bool, fs_options: Mapping[str, str] | None) -> SourceInput:
    first = (prev.log_offset if prev is not None and prev.log_offset is not None else -1) + 1
    end = src.log_offset
    assert end is not None  # a file source's offset is a log batch
    log_batches = tuple(range(first, end + 1))
    entries = source_log_entries(ckpt, src.source_id, log_batches)
    locations = [map_location(spark_location(path), path_map) for _, path in entries]
    found = stat_locations(locations, fs_options, ckpt.fs) if sizes else {}
    files = tuple(
        InputFile(path, loc, batch, found.get(loc, (None, None))[1], found.get(loc, (None, None))[0])
        for (batch, path), loc in zip(entries, locations)
    )
    return SourceInput(src.source_id, "file", prev, src, files=files, log_batches=log_batches)


def _delta_input(table: "DeltaSourceLog", batch: int, src: SourceOffset, prev: SourceOffset | None) -> SourceInput:
    recorded = src.value.get("reservoirId")
    if table.table_id != recorded:
        raise CheckpointError(f"the table at {table.location} (id {table.table_id}) is not the table batch {batch} read "
                              f"(reservoirId {recorded})", path=f"offsets/{batch}",
                              hint=f"pass the path of the table the query reads as {arg('delta_source')}",
                              param="delta_source")
    files = tuple(InputFile(f.path, table.location_of(f), f.version, f.size, table.fs.exists(unquote(f.path)),
                            dict(f.partition)) for f in table.batch_files(prev, src))
    return SourceInput(src.source_id, "delta", prev, src, files=files, table_schema=table.schema_json)


def source_input(ckpt: Checkpoint, batch: int, src: SourceOffset, path_map: Mapping[str, str] | None = None,
                 sizes: bool = True, fs_options: Mapping[str, str] | None = None,
                 delta_source: "DeltaSourceLog | None" = None) -> SourceInput:
    """What ``src`` (batch ``batch``'s end offset of one source) read in that batch; a Delta source's files from its
    table (``delta_source``) when given."""
    prev = None
    if batch > 0:
        prev = next((s for s in ckpt.offsets(batch - 1).sources if s.source_id == src.source_id), None)
        prev = None if prev is not None and prev.raw is None else prev
    kind = source_kind(ckpt, src)
    if prev is not None and changed_kind(ckpt, prev, src):
        return SourceInput(src.source_id, kind, prev, src, replayable=False,
                           note=f"the batch before ended this source with {article(source_kind(ckpt, prev))} offset: "
                                f"wmcheck cannot rebuild this source's input")
    if kind == "file":
        return _file_input(ckpt, src, prev, path_map or {}, sizes, fs_options)
    if kind == "kafka":
        return _kafka_input(ckpt, src, prev)
    if kind == "delta" and delta_source is not None:
        return _delta_input(delta_source, batch, src, prev)
    if kind == "delta":
        return SourceInput(src.source_id, kind, prev, src, replayable=False,
                           note="Delta source: read versions/indexes after start up to end with delta-spark")
    if kind == "none":
        return SourceInput(src.source_id, kind, prev, src, note="no offset yet: the source read nothing")
    shown = f" ({src.raw})" if kind == "unknown" and src.raw and len(src.raw) <= 80 else ""
    return SourceInput(src.source_id, kind, prev, src, replayable=False,
                       note=f"{article(kind)} offset{shown}: wmcheck cannot rebuild this "
                            "source's input")


def plan_batch(ckpt: Checkpoint, batch: int, source: str | None = None, path_map: Mapping[str, str] | None = None,
               late_rule: str = "previous", sizes: bool = True, fs_options: Mapping[str, str] | None = None,
               delta_source: "DeltaSourceLog | None" = None) -> BatchInput:
    """Batch ``batch``: watermarks and each source's input (only ``source`` when given)."""
    seq = ckpt.offsets(batch)
    sources = [s for s in seq.sources if source is None or s.source_id == source]
    if source is not None and not sources:
        ids = ", ".join(s.source_id for s in seq.sources) or "none"
        raise CheckpointError(f"batch {batch} has no source {source!r} (its sources: {ids})", path=f"offsets/{batch}",
                              hint=f"{arg('source')} takes a source id as `wmcheck batches` lists them (0, 1, ... by position)",
                              param="source")
    meta = seq.metadata
    return BatchInput(
        batch_id=batch,
        committed=batch in set(ckpt.commit_ids),
        watermark_ms=meta.batch_watermark_ms if meta else 0,
        late_watermark_ms=late_watermark_ms(ckpt, batch, late_rule),
        timestamp_ms=meta.batch_timestamp_ms if meta else None,
        sources=tuple(source_input(ckpt, batch, s, path_map, sizes, fs_options, delta_source) for s in sources),
    )


def plan(ckpt: Checkpoint, start: int, end: int | None = None, *, source: str | None = None,
         include_pending: bool = False, path_map: Mapping[str, str] | None = None, late_rule: str = "previous",
         sizes: bool = True, fs_options: Mapping[str, str] | None = None,
         delta_source: "DeltaSourceLog | None" = None) -> list[BatchInput]:
    """The input of batches ``start..end`` (default: to the last committed batch), without Spark; repartition
    batches are skipped (they read no input and ran no query). ``delta_source``: the table of the Delta source, whose
    log gives each batch's data files."""
    from .repartitions import repartitions

    moved = {r.batch for r in repartitions(ckpt)}
    ids = [b for b in replay_range(ckpt, start, end, include_pending) if b not in moved]
    ckpt.load_batches(sorted(set(ids) | {b - 1 for b in ids if b > 0}))
    return [plan_batch(ckpt, b, source, path_map, late_rule, sizes, fs_options, delta_source) for b in ids]


@dataclass(frozen=True)
class ReplayPlan:
    """``wmcheck replay --plan``: every batch's input, the oldest batch whose input can be rebuilt, and (when the broker
    was asked) which recorded Kafka offsets it no longer holds."""

    checkpoint: str
    oldest_replayable_batch: int | None
    batches: tuple[BatchInput, ...]
    kafka_retention: "KafkaRetention | None" = None


def replay_plan(ckpt: Checkpoint, batches: list[BatchInput], kafka_retention: "KafkaRetention | None" = None) -> ReplayPlan:
    return ReplayPlan(ckpt.location, oldest_replayable(ckpt), tuple(batches), kafka_retention)
