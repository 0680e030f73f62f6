"""What each recorded batch read, rebuilt from the logs alone (no Spark): ``wmcheck replay --plan``.

Per batch and source: the files a file source read (``sources/<i>/`` between the previous batch's
``logOffset`` and this batch's, compacted or not, exactly as ``FileStreamSource.getBatch`` asks
``FileStreamSourceLog.get(start + 1, end)``), the Kafka start and end offsets as Spark's
``startingOffsets``/``endingOffsets`` JSON, a Delta source's version/index range, and the two
watermarks of the batch: the one it ran with and the one its stateful operators judged late rows by.
"""
from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Mapping

from wmcheck.checkpoint.logs.source_offsets import SourceOffset
from wmcheck.checkpoint.records import dataclass

from .errors import CheckpointError, MissingFileError, arg
from .model import Checkpoint, check_span
from .sources.file import source_log_entries as source_log_entries
from .sources.protocol import InputFile as InputFile
from .sources.protocol import InputRequest, SourceInput, article
from .sources.registry import source_kind

if TYPE_CHECKING:
    from .kafka_retention import KafkaRetention
    from .sources.delta_files import DeltaSourceLog

LATE_RULES = ("previous", "current")


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


# -- the plan --------------------------------------------------------------------------------------


def changed_kind(ckpt: Checkpoint, before: SourceOffset, after: SourceOffset) -> bool:
    """Whether one source's offsets of two batches are of two recognised kinds (the later one comes from another
    source: Spark cannot read it as this source's offset)."""
    kinds = {source_kind(ckpt, before), source_kind(ckpt, after)}
    return len(kinds) == 2 and all(k.recognised for k in kinds)


def unreadable_file_offset(ckpt: Checkpoint, before: SourceOffset, after: SourceOffset) -> bool:
    """Whether a source's later offset is one its kind cannot read (a file source's that is not a JSON object with a
    number as ``logOffset``, nor the legacy bare long)."""
    return source_kind(ckpt, before).cannot_read(after)


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
        return SourceInput(src.source_id, kind.name, prev, src, replayable=False,
                           note=f"the batch before ended this source with {article(source_kind(ckpt, prev).name)} offset: "
                                f"wmcheck cannot rebuild this source's input")
    return kind.batch_input(ckpt, batch, src, prev, InputRequest(path_map or {}, sizes, fs_options, delta_source))


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
