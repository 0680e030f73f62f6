"""What ``wmcheck show`` and ``wmcheck batches`` report, as plain data (the Python API behind them)."""
from __future__ import annotations

import dataclasses
from dataclasses import field
from datetime import timezone, tzinfo
from typing import Mapping, Protocol, Sequence

from wmcheck.checkpoint.records import dataclass
from wmcheck.checkpoint.watermarks.late_filters import operator_filter
from wmcheck.checkpoint.watermarks.operators import (
    OperatorStall,
    OperatorWatermark,
    OperatorWatermarks,
    operator_stalls,
    operator_watermarks,
)
from wmcheck.checkpoint.watermarks.plans import BatchPlan
from wmcheck.checkpoint.watermarks.progress import BatchProgress, QueryProgress
from wmcheck.checkpoint.watermarks.stall import SourceActivity, WatermarkStall, batch_activity, watermark_stall
from wmcheck.statestore.formats.registry import FORMATS

from .broken_tail import broken_tail_warning
from .errors import CheckpointError, arg
from .layout import STATE
from .model import PINNED_CONFS, Checkpoint, Operator, check_span
from .repartitions import batch_kind, partitions_of, repartitions, unfinished
from .source_labels import label, source_labels
from .timeutil import format_ms

UNREADABLE = "unreadable"


class CheckFinding(Protocol):
    """What :func:`describe` takes of one of ``wmcheck check``'s findings (a :class:`~.checks.definition.Finding`)."""

    @property
    def code(self) -> str: ...
    @property
    def severity(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def message(self) -> str: ...


@dataclass(frozen=True)
class ShownFinding:
    """One of check's findings as ``show`` reports it (check's fix: ``wmcheck check``)."""

    code: str
    severity: str
    path: str
    message: str

    @property
    def line(self) -> str:
        """``WM018 state/0/1: message``."""
        return f"{self.code} {self.path}: {self.message}" if self.path else f"{self.code}: {self.message}"


@dataclass(frozen=True)
class Verdict:
    """Whether Spark restarts the query cleanly, from which batch and watermark: check's verdict (its checks without
    decoding state file contents), ``worst`` its first error (else warning)."""

    restarts: bool
    next_batch: int
    watermark_ms: int
    watermark: str | None
    errors: int
    warnings: int
    worst: ShownFinding | None

    @property
    def text(self) -> str:
        """The verdict in one line."""
        if self.restarts:
            return (f"yes: Spark runs batch {self.next_batch} next, with watermark {self.watermark_ms} ({self.watermark}); "
                    "state file contents not decoded (wmcheck check decodes them)")
        errors = "1 error makes" if self.errors == 1 else f"{self.errors} errors make"
        return f"no: {errors} Spark fail, lose data or misbehave on restart (their fixes: wmcheck check)"


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
    """The number of files of each state file format (:data:`~wmcheck.statestore.formats.registry.FORMATS`, by plural name);
    ``snapshots``, ``deltas``, ``zips`` and ``changelogs`` above repeat four of them."""
    late_watermark_ms: int | None = None
    """The next batch drops rows at or before it as late (its own, since Spark 3.5); None when unknown."""
    eviction_watermark_ms: int | None = None
    """The next batch evicts state at or before it (its own); None when unknown."""
    watermark_source: str | None = None
    """``plan``, ``checkpoint``, ``join condition`` or ``unknown`` (see :mod:`wmcheck.checkpoint.watermarks.operators`)."""
    watermark_note: str | None = None
    """Where the two values come from, or why they are unknown."""
    drops_late_input: bool | None = True
    """Whether the next batch drops its input rows at or before ``late_watermark_ms``: False for a group-state operator
    that filters none (no event-time timeout; transformWithState outside event time), None when that is unknown
    (:mod:`wmcheck.checkpoint.watermarks.late_filters`, the rule ``replay`` counts late rows by)."""
    late_input_note: str | None = None
    """Why, for a group-state or transformWithState operator."""

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

    verdict: Verdict
    """Check's restart verdict, first: whether Spark restarts cleanly, from which batch and watermark, the worst finding."""
    query_id: str | None
    location: str
    first_batch: int | None
    last_batch: int | None
    shown_batch: int | None
    """The last batch whose offsets file parses: what the watermark, sources and operators below describe (before
    ``last_batch`` when the last offsets files are broken, :attr:`warnings` says how)."""
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
    """What every command that reads batches warns about (a broken last offsets file: what is shown instead)."""
    findings: tuple[ShownFinding, ...]
    """Check's findings (its checks without decoding state file contents): errors first."""
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
    offsets or commit file does not parse: ``error``)."""
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


def blocking(findings: Sequence[CheckFinding], operator_id: int) -> list[str]:
    """The paths of check's errors about the state the next batch loads for an operator: under its ``state/N``
    (or ``state/`` itself, which holds every operator's)."""
    own = f"{STATE}/{operator_id}"
    return sorted({f.path for f in findings if f.severity == "error"
                   and (f.path in (STATE, own) or f.path.startswith(own + "/"))})


def operator_summary(ckpt: Checkpoint, op: Operator, findings: Sequence[CheckFinding],
                     watermarks: OperatorWatermarks | None = None, plans: Sequence[BatchPlan] = ()) -> OperatorSummary:
    """One stateful operator: stores, partitions, versions and bytes on disk, whether the next batch can load its
    state (no error of check's, ``findings``, about it) and, from ``watermarks``, its own watermarks in the next batch;
    whether it drops late input at all from its kind, timeout or time mode (the latest of ``plans`` naming it)."""
    own = watermarks.of(ckpt.next_batch, op.operator_id) if watermarks is not None else None
    rule = operator_filter(ckpt, op, plans)
    version = ckpt.next_batch  # the version the next batch loads (check's WM016/WM018: the pending batch re-run too)
    versions = sorted({v for p in op.partitions for v in p.versions})
    unloadable = blocking(findings, op.operator_id)
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
        drops_late_input=rule.drops if rule is not None else True,
        late_input_note=rule.reason if rule is not None else None,
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


def warnings(ckpt: Checkpoint) -> list[str]:
    """What every command that reads batches warns about (a broken last offsets file, and what is shown instead);
    everything else wrong is one of check's findings."""
    tail = broken_tail_warning(ckpt)
    return [tail] if tail else []


def shown_findings(findings: Sequence[CheckFinding]) -> tuple[ShownFinding, ...]:
    """Check's findings, errors first (each severity by code and path, as check sorts them)."""
    ordered = sorted(findings, key=lambda f: (f.severity != "error", f.code, f.path))
    return tuple(ShownFinding(f.code, f.severity, f.path, f.message) for f in ordered)


def verdict(ckpt: Checkpoint, findings: tuple[ShownFinding, ...], tz: tzinfo = timezone.utc) -> Verdict:
    """Check's restart verdict over ``findings`` (:func:`shown_findings`): clean when none is an error."""
    errors = sum(f.severity == "error" for f in findings)
    return Verdict(errors == 0, ckpt.next_batch, ckpt.watermark_ms, format_ms(ckpt.watermark_ms, tz), errors,
                   len(findings) - errors, findings[0] if findings else None)


def describe(ckpt: Checkpoint, tz: tzinfo = timezone.utc, progress: QueryProgress | None = None, *,
             findings: Sequence[CheckFinding]) -> CheckpointSummary:
    """Everything ``wmcheck show`` prints, its verdict and the state's loadability ``wmcheck check``'s ``findings``
    (:func:`~.verdict.show_checkpoint` runs its checks); ``progress`` (Spark's reports of the query) sharpens the stall
    diagnosis."""
    shown = shown_findings(findings)
    meta = ckpt.latest_metadata
    watermark = ckpt.watermark_ms
    timestamp = meta.batch_timestamp_ms if meta else None
    conf = ckpt.conf
    moves = repartitions(ckpt)
    stuck = unfinished(ckpt)
    own = operator_watermarks(ckpt, progress, [ckpt.next_batch]) if ckpt.operators else None
    return CheckpointSummary(
        verdict=verdict(ckpt, shown, tz),
        query_id=ckpt.query_metadata.query_id if ckpt.query_metadata else None,
        location=ckpt.location,
        first_batch=ckpt.offset_ids[0] if ckpt.offset_ids else None,
        last_batch=ckpt.last_batch,
        shown_batch=ckpt.last_readable_batch,
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
        operators=tuple(operator_summary(ckpt, op, findings, own, sorted(progress.plans.values(), key=lambda p: p.batch_id)
                                         if progress is not None else ()) for op in ckpt.operators),
        warnings=tuple(warnings(ckpt)),
        findings=shown,
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
    plans = sorted(progress.plans.values(), key=lambda p: p.batch_id) if progress else []
    rules = {op.operator_id: operator_filter(ckpt, op, plans) for op in ckpt.operators} if operators else {}
    drops = {i: rule.drops if rule is not None else True for i, rule in rules.items()}
    labels = source_labels(ckpt)
    offsets, commits = set(ckpt.offset_ids), set(ckpt.commit_ids)
    moved = {r.batch for r in repartitions(ckpt)}
    rows = []
    for batch in ids:
        broken = ckpt.offsets_failure(batch) if batch in offsets else None
        seq = ckpt.offsets(batch) if batch in offsets and broken is None else None
        meta = seq.metadata if seq else None
        unread = ckpt.commit_failure(batch) if batch in commits else None  # one rule for either log: read around it
        commit = ckpt.commit(batch) if batch in commits and unread is None else None
        failure = broken or unread
        wm = meta.batch_watermark_ms if meta else None
        nxt = commit.next_batch_watermark_ms if commit else None
        ts = meta.batch_timestamp_ms if meta else None
        rows.append(BatchRow(
            batch=batch,
            committed=batch in commits,
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
            operators=_operators_of(own, batch, drops),
        ))
    return rows


def _operators_of(watermarks: OperatorWatermarks | None, batch: int,
                  drops: Mapping[int, bool | None]) -> tuple[OperatorWatermark, ...] | None:
    """The operators' watermarks in ``batch``, each with whether it drops late input at all (``drops``)."""
    if watermarks is None:
        return None
    found = watermarks.batch(batch)
    return tuple(dataclasses.replace(o, drops_late_input=drops.get(o.operator_id, True)) for o in found.operators) \
        if found else ()
