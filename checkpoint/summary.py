"""What ``wmcheck show`` and ``wmcheck batches`` report, as plain data (the Python API behind them)."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timezone, tzinfo
from typing import Callable, Mapping

from .broken_tail import broken_tail_warning
from .errors import CheckpointError, arg
from .layout import OWN_DIR
from .model import PINNED_CONFS, Checkpoint, Operator, check_span, store_unique_ids
from .operator_watermarks import (
    OperatorStall,
    OperatorWatermark,
    OperatorWatermarks,
    operator_stalls,
    operator_watermarks,
)
from .progress import BatchProgress, QueryProgress
from .relocation import foreign_references
from .repair_records import find_interrupted
from .repartitions import batch_kind, partitions_of, repartitions, unfinished
from .source_labels import label, source_labels
from .stall import SourceActivity, WatermarkStall, batch_activity, watermark_stall
from .state_content import Decoding
from .state_formats import FORMATS
from .state_load import Lineages, StoreLoad, resolve, verify_loads
from .timeutil import format_ms

UNREADABLE = "unreadable"


@dataclass(frozen=True)
class OperatorSummary:
    """One stateful operator: stores, partitions, versions and bytes on disk, loadability of the next version."""

    operator_id: int
    name: str | None
    name_inferred: bool
    stores: tuple[str, ...]
    num_partitions: int | None
    partitions_on_disk: int
    min_version: int | None
    max_version: int | None
    bytes: int
    snapshots: int
    deltas: int
    zips: int
    changelogs: int
    metadata_lag: str | None
    """Why ``num_partitions`` is not the operator metadata's (v1 metadata keeps the count before a repartition)."""
    next_version: int
    next_version_loadable: bool
    unloadable: tuple[str, ...]
    files: Mapping[str, int] = field(default_factory=dict)
    """The number of files of each state file format (:data:`~.state_formats.FORMATS`, by plural name);
    ``snapshots``, ``deltas``, ``zips`` and ``changelogs`` above repeat four of them."""
    late_watermark_ms: int | None = None
    """The next batch drops rows at or before it as late (its own, since Spark 3.5); None when unknown."""
    eviction_watermark_ms: int | None = None
    """The next batch evicts state at or before it (its own); None when unknown."""
    watermark_source: str | None = None
    """``plan``, ``checkpoint``, ``join condition`` or ``unknown`` (see :mod:`.operator_watermarks`)."""
    watermark_note: str | None = None
    """Where the two values come from, or why they are unknown."""

    @property
    def label(self) -> str | None:
        """The name, marked when inferred (Spark < 4.0 records none)."""
        return f"{self.name} (inferred)" if self.name_inferred else self.name


@dataclass(frozen=True)
class SourceSummary:
    """One source of the last batch: its kind and latest offset."""

    source_id: str
    kind: str
    offset: str | None
    summary: str
    location: str | None
    """Where it reads: a file source's input directory, a Kafka source's topics, a Delta source's table id."""


@dataclass(frozen=True)
class RepartitionSummary:
    """A repartition batch: Spark's offline state repartition moved the state from ``from`` to ``to`` partitions."""

    batch: int
    from_: int = field(metadata={"json": "from"})
    to: int = 0


@dataclass(frozen=True)
class CheckpointSummary:
    """Everything ``wmcheck show`` reports (JSON keys: the field names, in this order)."""

    query_id: str | None
    location: str
    first_batch: int | None
    last_batch: int | None
    last_committed_batch: int | None
    pending_batch: int | None
    next_batch: int
    watermark_ms: int
    watermark: str | None
    batch_timestamp_ms: int | None
    batch_timestamp: str | None
    watermark_lag_ms: int | None
    conf: Mapping[str, str | None]
    next_batch_partitions: int | None
    """The shuffle partition count the next batch runs with."""
    repartitions: tuple[RepartitionSummary, ...]
    """Committed repartition batches."""
    unfinished_repartition: RepartitionSummary | None
    """The last batch, when it is a repartition that was never committed (Spark refuses to restart)."""
    sources: tuple[SourceSummary, ...]
    operators: tuple[OperatorSummary, ...]
    warnings: tuple[str, ...]
    watermark_stall: WatermarkStall | None
    """The watermark has not moved over the last data batches (see :mod:`.stall`); None when healthy."""
    operator_stalls: tuple[OperatorStall, ...] = ()
    """Stateful operators whose own watermark stayed put while the global one moved on (Spark 3.5+)."""


@dataclass(frozen=True)
class BatchRow:
    """One batch as ``wmcheck batches`` reports it: watermarks, timestamp, lag and raw source offsets."""

    batch: int
    committed: bool
    kind: str
    """``data``, ``no-data`` (the same source offsets as the batch before), ``repartition`` or ``unreadable`` (its
    offsets file does not parse: ``error``)."""
    batch_watermark_ms: int | None
    next_batch_watermark_ms: int | None
    watermark_advance_ms: int | None
    batch_timestamp_ms: int | None
    lag_ms: int | None
    batch_watermark: str | None
    batch_timestamp: str | None
    sources: tuple[str | None, ...]
    source_activity: tuple[SourceActivity, ...]
    """Each source: its kind and location, offset, whether it moved and brought data (rows, with progress)."""
    progress: BatchProgress | None
    """Spark's progress report of the batch (``--progress``)."""
    error: str | None = None
    """Why the batch's offsets file cannot be read (kind ``unreadable``)."""

    operators: tuple[OperatorWatermark, ...] | None = None
    """Each stateful operator's own late-events and eviction watermark (when asked for)."""


def next_loads(ckpt: Checkpoint, op: Operator, version: int) -> list[StoreLoad]:
    """The load of each store partition at ``version`` as Spark reads it, file contents decoded when this machine
    has the packages to (else by file names)."""
    decoding = Decoding.of(ckpt.conf.get)
    if decoding.missing_module():
        return [resolve(p, version, store_unique_ids(ckpt, op, p)) for p in op.live_partitions]
    lineages = Lineages(ckpt.fs, decoding.codec)
    loads = [resolve(p, version, store_unique_ids(ckpt, op, p), lineages) for p in op.live_partitions]
    return verify_loads(ckpt.fs, loads, decoding, lineages=lineages,
                        sidecars={f.path for f in ckpt.state_layout.crc_files})


def operator_summary(ckpt: Checkpoint, op: Operator, watermarks: OperatorWatermarks | None = None) -> OperatorSummary:
    """One stateful operator: stores, partitions, versions and bytes on disk, loadability of the next version and,
    from ``watermarks``, its own watermarks in the next batch."""
    own = watermarks.of(ckpt.next_batch, op.operator_id) if watermarks is not None else None
    version = ckpt.next_state_version
    versions = sorted({v for p in op.partitions for v in p.versions})
    unloadable = sorted(f"{load.part.store}/{load.part.partition}" for load in next_loads(ckpt, op, version)
                        if not load.loadable)
    files = {fmt.plural: sum(p.count(fmt.kind) for p in op.partitions) for fmt in FORMATS}
    return OperatorSummary(
        operator_id=op.operator_id,
        name=op.name,
        name_inferred=op.name_inferred,
        stores=tuple(op.stores),
        num_partitions=op.num_partitions,
        partitions_on_disk=len({p.partition for p in op.partitions}),
        min_version=versions[0] if versions else None,
        max_version=versions[-1] if versions else None,
        bytes=sum(p.bytes for p in op.partitions),
        snapshots=files["snapshots"],
        deltas=files["deltas"],
        zips=files["zips"],
        changelogs=files["changelogs"],
        metadata_lag=op.metadata_lag,
        next_version=version,
        next_version_loadable=not unloadable,
        unloadable=tuple(unloadable),
        files=files,
        late_watermark_ms=own.late_ms if own else None,
        eviction_watermark_ms=own.evict_ms if own else None,
        watermark_source=own.source if own else None,
        watermark_note=own.note if own else None,
    )


def source_summaries(ckpt: Checkpoint) -> list[SourceSummary]:
    """Each source of the last batch that parses: its kind, latest offset and where it reads."""
    last = ckpt.last_readable_batch
    if last is None:
        return []
    out = []
    for src in ckpt.offsets(last).sources:
        named = label(ckpt, src)
        out.append(SourceSummary(src.source_id, named.kind, src.raw, src.summary(), named.location))
    return out


def parses(read: Callable[[int], object], batch: int) -> bool:
    try:
        read(batch)
    except CheckpointError:
        return False
    return True


def _repair_interrupted(ckpt: Checkpoint) -> bool:
    """Whether a killed wmcheck repair or undo left its journal, or a manifest still applying or undoing."""
    if not ckpt.fs.exists(OWN_DIR):
        return False
    try:
        return find_interrupted(ckpt.fs) is not None
    except CheckpointError:  # an unreadable journal or manifest: `wmcheck check` (WM026) says which
        return True


def warnings(ckpt: Checkpoint) -> list[str]:
    """Cheap signs of trouble worth showing on every ``show``."""
    out = []
    if _repair_interrupted(ckpt):
        out.append("an interrupted wmcheck repair was found: run 'wmcheck undo' or re-run the same command to finish it")
    if ckpt.query_metadata is None:
        out.append("metadata is missing: Spark will treat the restart as a new query id")
    for name, ids in (("offsets", ckpt.offset_ids), ("commits", ckpt.commit_ids)):
        for lo, hi in ckpt.gaps(ids):
            out.append(f"{name}/ has a gap: batch {lo}" + (f"..{hi}" if hi > lo else "") + " missing")
    tail = broken_tail_warning(ckpt)
    if tail:
        out.append(tail)
    broken = [b for b in ckpt.offset_ids if not parses(ckpt.offsets, b) and b not in ckpt.broken_tail]
    if broken:
        out.append(f"offsets/{broken[0]} does not parse" + (f" (and {len(broken) - 1} more)" if len(broken) > 1 else "")
                   + ": Spark reads only the last two offsets files on restart, but replays and rewinds to these "
                   "batches fail (wmcheck check: WM001)")
    last, done = ckpt.last_batch, ckpt.last_committed_batch
    if last is not None and done is not None and done > last:
        out.append(f"commits/{done} has no offsets file (last offsets file is {last})")
    uncommitted = [b for b in ckpt.offset_ids if done is None or b > done]
    if len(uncommitted) > 1:
        out.append(
            f"{len(uncommitted)} planned batches are not committed ({', '.join(map(str, uncommitted[:5]))}"
            f"{'...' if len(uncommitted) > 5 else ''}): Spark re-runs only batch {last}"
        )
    stuck = unfinished(ckpt)
    if stuck:
        out.append(f"batch {stuck.batch} is an unfinished repartition from {stuck.from_partitions} to "
                   f"{stuck.to_partitions} partitions: Spark refuses to restart the query (wmcheck check: WM035)")
    temps = ckpt.state_layout.temp_files
    if temps:
        out.append(f"{len(temps)} leftover temp file(s) under state/, e.g. {temps[0].path}")
    for op in ckpt.operators:
        summary = operator_summary(ckpt, op)
        if not summary.next_version_loadable:
            out.append(
                f"state/{op.operator_id}: version {summary.next_version} cannot be rebuilt in "
                f"{', '.join(summary.unloadable[:3])}{'...' if len(summary.unloadable) > 3 else ''}"
            )
    foreign = foreign_references(ckpt)
    if foreign:
        elsewhere = sorted({r.old_location for r in foreign})
        out.append(f"operator metadata names state schema files under {', '.join(elsewhere)}: the checkpoint was copied "
                   "or moved, and Spark reads them there on restart; run 'wmcheck relocate' (wmcheck check: WM027/WM028)")
    return out


def describe(ckpt: Checkpoint, tz: tzinfo = timezone.utc, progress: QueryProgress | None = None) -> CheckpointSummary:
    """Everything ``wmcheck show`` prints; ``progress`` (Spark's reports of the query) sharpens the stall diagnosis."""
    meta = ckpt.latest_metadata
    watermark = ckpt.watermark_ms
    timestamp = meta.batch_timestamp_ms if meta else None
    conf = ckpt.conf
    moves = repartitions(ckpt)
    stuck = unfinished(ckpt)
    own = operator_watermarks(ckpt, progress, [ckpt.next_batch]) if ckpt.operators else None
    return CheckpointSummary(
        query_id=ckpt.query_metadata.query_id if ckpt.query_metadata else None,
        location=ckpt.location,
        first_batch=ckpt.offset_ids[0] if ckpt.offset_ids else None,
        last_batch=ckpt.last_batch,
        last_committed_batch=ckpt.last_committed_batch,
        pending_batch=ckpt.pending_batch,
        next_batch=ckpt.next_batch,
        watermark_ms=watermark,
        watermark=format_ms(watermark, tz),
        batch_timestamp_ms=timestamp,
        batch_timestamp=format_ms(timestamp, tz),
        watermark_lag_ms=timestamp - watermark if timestamp is not None and watermark else None,
        conf={key: conf.get(name) for key, name in PINNED_CONFS.items()},
        next_batch_partitions=next_batch_partitions(ckpt),
        repartitions=tuple(RepartitionSummary(r.batch, r.from_partitions, r.to_partitions) for r in moves if r.committed),
        unfinished_repartition=RepartitionSummary(stuck.batch, stuck.from_partitions, stuck.to_partitions) if stuck else None,
        sources=tuple(source_summaries(ckpt)),
        operators=tuple(operator_summary(ckpt, op, own) for op in ckpt.operators),
        warnings=tuple(warnings(ckpt)),
        watermark_stall=watermark_stall(ckpt, progress, tz),
        operator_stalls=operator_stalls(ckpt, progress),
    )


def next_batch_partitions(ckpt: Checkpoint) -> int | None:
    """The shuffle partition count the next batch runs with: the last batch's, unless that is an unfinished
    repartition (Spark refuses to restart then; the last committed batch's count is the one in effect)."""
    last = ckpt.last_batch
    if last is None:
        return None
    stuck = unfinished(ckpt)
    return partitions_of(ckpt, stuck.batch - 1 if stuck else last)


def batch_range(ckpt: Checkpoint, last: int | None = None, start: int | None = None, end: int | None = None) -> list[int]:
    """Batch ids present (offsets or commits) selected by ``last`` K or ``start``..``end`` (:func:`check_span`'s rule);
    a range that selects no batch is an error on the parameter at fault, never an empty answer."""
    present = sorted(set(ckpt.offset_ids) | set(ckpt.commit_ids))
    check_span(start, end, present[-1] if present else None)
    if last is not None and last <= 0:
        raise CheckpointError(f"{arg('last', last)} selects no batch", hint=f"use {arg('last', 1)} or more", param="last")
    ids = [b for b in present if (start is None or b >= start) and (end is None or b <= end)]
    if not ids and (last, start, end) != (None, None, None):
        held = f"the checkpoint holds batches {present[0]}..{present[-1]}" if present else "the checkpoint holds no batch"
        param = "end" if end is not None and (start is None or not present or end < present[0]) else "start"
        given = " ".join(([arg("start", start)] if start is not None else []) + ([arg("end", end)] if end is not None else []))
        raise CheckpointError(f"{given or arg('last', last)} selects no batch", hint=held, param=param if given else "last")
    return ids[-last:] if last is not None else ids


def batch_rows(ckpt: Checkpoint, ids: list[int], tz: tzinfo = timezone.utc,
               progress: QueryProgress | None = None, operators: bool = False) -> list[BatchRow]:
    """One row per batch: watermarks, timestamp, lag, source offsets and activity, Spark's progress report and, with
    ``operators``, each stateful operator's own watermarks."""
    ckpt.load_batches(ids + [b - 1 for b in ids if b > 0])
    own = operator_watermarks(ckpt, progress, ids) if operators else None
    labels = source_labels(ckpt)
    offsets, commits = set(ckpt.offset_ids), set(ckpt.commit_ids)
    moved = {r.batch for r in repartitions(ckpt)}
    rows = []
    for batch in ids:
        failure = ckpt.offsets_failure(batch) if batch in offsets else None
        seq = ckpt.offsets(batch) if batch in offsets and failure is None else None
        meta = seq.metadata if seq else None
        commit = ckpt.commit(batch) if batch in commits else None
        wm = meta.batch_watermark_ms if meta else None
        nxt = commit.next_batch_watermark_ms if commit else None
        ts = meta.batch_timestamp_ms if meta else None
        rows.append(BatchRow(
            batch=batch,
            committed=commit is not None,
            kind=UNREADABLE if failure is not None else batch_kind(ckpt, batch, moved),
            batch_watermark_ms=wm,
            next_batch_watermark_ms=nxt,
            watermark_advance_ms=nxt - wm if nxt is not None and wm else None,  # none from no earlier watermark
            batch_timestamp_ms=ts,
            lag_ms=ts - wm if ts is not None and wm else None,
            batch_watermark=format_ms(wm, tz),
            batch_timestamp=format_ms(ts, tz),
            sources=tuple(s.raw for s in seq.sources) if seq else (),
            source_activity=batch_activity(ckpt, batch, progress, labels=labels).sources if seq else (),
            progress=progress.get(batch) if progress else None,
            error=failure.text(arg) if failure is not None else None,
            operators=_operators_of(own, batch),
        ))
    return rows


def _operators_of(watermarks: OperatorWatermarks | None, batch: int) -> tuple[OperatorWatermark, ...] | None:
    if watermarks is None:
        return None
    found = watermarks.batch(batch)
    return found.operators if found else ()
