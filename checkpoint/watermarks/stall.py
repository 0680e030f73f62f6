"""Why the watermark is where it is: which batches brought data from which source, and a stalled watermark.

Spark keeps one global watermark: max event time minus the delay per watermarked input, combined with
``spark.sql.streaming.multipleWatermarkPolicy`` (``min`` by default, pinned in the checkpoint). Under
``min`` an input that receives nothing holds it back while the others go on. A batch whose source
offsets moved is a data batch (Spark's term) even when the new files are empty; whether a source
brought rows comes from the progress reports when given, else from the sizes of a file source's new
files, else from its offsets.
"""
from __future__ import annotations

from bisect import bisect_left
from datetime import timezone, tzinfo
from typing import Mapping

from wmcheck.checkpoint.batch_inputs import source_input
from wmcheck.checkpoint.errors import CheckpointError, arg
from wmcheck.checkpoint.logs.source_offsets import SourceOffset
from wmcheck.checkpoint.model import WATERMARK_POLICY, Checkpoint
from wmcheck.checkpoint.records import dataclass
from wmcheck.checkpoint.source_labels import SourceLabel, source_labels
from wmcheck.checkpoint.timeutil import format_ms
from wmcheck.checkpoint.watermarks.progress import QueryProgress

HELD, NO_INPUT, EVENT_TIME = "held_by", "no_input", "event_time"
SIZED_BATCHES = 100
"""The last batches of a stall whose new files are sized (an empty file brings no rows); older ones count by offsets."""
MIN_STALL_BATCHES = 2
"""A watermark stays put over this many data batches before it is a stall (any batch may bring only late rows)."""


@dataclass(frozen=True)
class SourceActivity:
    """One source in one batch: its end offset, whether it moved, the rows it read (progress), whether it brought data."""

    source_id: str
    kind: str
    location: str | None
    offset: str | None
    new_offsets: bool
    rows: int | None
    new_data: bool


@dataclass(frozen=True)
class BatchActivity:
    """One batch: the watermark it ran with and each source's activity."""

    batch: int
    watermark_ms: int
    timestamp_ms: int | None
    sources: tuple[SourceActivity, ...]

    @property
    def data_batch(self) -> bool:
        """Spark ran it for new offsets (not a no-data batch that only advances the watermark)."""
        return any(s.new_offsets for s in self.sources)

    @property
    def with_data(self) -> tuple[str, ...]:
        return tuple(s.source_id for s in self.sources if s.new_data)


@dataclass(frozen=True)
class WatermarkStall:
    """The watermark has not moved since ``since_batch`` (the first batch that ran with it) over ``batches``
    data batches; ``held_by`` are the sources that brought nothing while others did."""

    watermark_ms: int
    since_batch: int
    since_ms: int | None
    since: str | None
    batches: int
    held_by: tuple[str, ...]
    reason: str  # held_by, no_input or event_time
    policy: str
    event_time_advancing: bool | None  # from progress: whether max event time went beyond what came before
    explanation: str


def batch_activity(ckpt: Checkpoint, batch: int, progress: QueryProgress | None = None, sizes: bool = False,
                   labels: Mapping[str, SourceLabel] | None = None) -> BatchActivity:
    """What each source of ``batch`` brought: new offsets, and data (rows per progress, or non-empty new files with ``sizes``).
    ``labels``: :func:`source_labels` of the checkpoint, when the caller has them."""
    labels = source_labels(ckpt) if labels is None else labels
    seq = ckpt.offsets(batch)
    ids = ckpt.offset_ids
    at = bisect_left(ids, batch - 1)
    before = ckpt.readable_offsets(batch - 1) if at < len(ids) and ids[at] == batch - 1 else None
    previous = {s.source_id: s.raw for s in before.sources} if before is not None else {}
    report = progress.get(batch) if progress else None
    out = []
    for index, src in enumerate(seq.sources):
        moved = src.raw is not None and src.raw != previous.get(src.source_id)
        rows = report.sources[index].num_input_rows if report and index < len(report.sources) else None
        data = moved if rows is None else rows > 0
        if data and rows is None and sizes:
            data = _has_bytes(ckpt, batch, src)
        named = labels.get(src.source_id)
        out.append(SourceActivity(src.source_id, named.kind if named else src.kind, named.location if named else None,
                                  src.raw, moved, rows, data))
    meta = seq.metadata
    return BatchActivity(batch, meta.batch_watermark_ms if meta else 0, meta.batch_timestamp_ms if meta else None, tuple(out))


def _has_bytes(ckpt: Checkpoint, batch: int, src: SourceOffset) -> bool:
    """False only for a file source whose new files are all there and empty (no other kind lists files here);
    unknown counts as data."""
    try:
        found = source_input(ckpt, batch, src, sizes=True)
    except CheckpointError:
        return True  # a purged or damaged source log: the offsets moved, so count it as data
    sizes = [f.size for f in found.files]
    return not sizes or None in sizes or sum(s or 0 for s in sizes) > 0


def _stall_start(ckpt: Checkpoint, watermark: int, chunk: int = 64) -> int | None:
    """The first batch of the run of batches at the end that ran with ``watermark`` (None when none did).
    Reads offsets files backwards a chunk at a time, so a long checkpoint is not read whole."""
    ids = ckpt.offset_ids
    start = None
    for end in range(len(ids), 0, -chunk):
        window = ids[max(end - chunk, 0):end]
        ckpt.load_batches(window)
        for batch in reversed(window):
            seq = ckpt.readable_offsets(batch)
            if seq is None and start is None:
                continue  # a broken tail (Spark plans those batches again once it is removed)
            meta = seq.metadata if seq is not None else None
            if meta is None or meta.batch_watermark_ms != watermark or (start is not None and batch != start - 1):
                return start
            start = batch
    return start


def _max_event_time(progress: QueryProgress, batches: range) -> int | None:
    times = [r.event_time_max_ms for b in batches if (r := progress.get(b)) and r.event_time_max_ms is not None]
    return max(times) if times else None


def _names(labels: dict[str, SourceLabel], ids: tuple[str, ...] | list[str]) -> str:
    return ", ".join(labels[i].text if i in labels else i for i in ids)


def watermark_stall(ckpt: Checkpoint, progress: QueryProgress | None = None, tz: tzinfo = timezone.utc) -> WatermarkStall | None:
    """The stall at the end of the checkpoint, or None when the last batches moved the watermark, brought nothing, or
    were one data batch (nothing stalls over one), and for a watermark that never left 0 over every batch kept: a query
    without a watermark (``wmcheck check``'s WM014 tells one whose state has an event-time column)."""
    last = ckpt.last_readable_batch
    if last is None:
        return None
    watermark = ckpt.watermark_ms
    start = _stall_start(ckpt, watermark)
    if start is None or (watermark == 0 and start == ckpt.offset_ids[0]):
        return None
    labels = source_labels(ckpt)
    activity = [batch_activity(ckpt, b, progress, sizes=last - b < SIZED_BATCHES, labels=labels) for b in range(start, last + 1)]
    data_batches = [a for a in activity if a.data_batch]
    if len(data_batches) < MIN_STALL_BATCHES:
        return None
    brought = {s for a in data_batches for s in a.with_data}
    held = tuple(s for s in labels if s not in brought) if brought else ()
    policy = str(ckpt.conf.get(WATERMARK_POLICY) or "min")
    advancing = None
    if progress is not None:
        before, during = _max_event_time(progress, range(0, start)), _max_event_time(progress, range(start, last + 1))
        if before is not None and during is not None:
            advancing = during > before
    reason = HELD if held else EVENT_TIME if brought else NO_INPUT
    since_ms = activity[0].timestamp_ms
    head = (f"the watermark has stayed at {format_ms(watermark, tz)} since batch {start} ({format_ms(since_ms, tz)}) over "
            f"{len(data_batches)} data batch{'es' if len(data_batches) != 1 else ''}")
    if reason == HELD:
        others = [s for s in labels if s in brought]
        rule = ("the slowest input holds the global watermark back" if policy == "min" else
                "the global watermark follows the most advanced input, and none moved it forward")
        text = (f"{head}: source {_names(labels, held)} brought no new data while source {_names(labels, others)} did; "
                f"under the {policy} policy ({WATERMARK_POLICY}) {rule}")
        if advancing is not None:
            text += "; max event time kept advancing" if advancing else "; max event time not advancing"
    elif reason == NO_INPUT:
        text = (f"no new input since batch {start} ({format_ms(since_ms, tz)}): {len(data_batches)} batches ran without "
                f"a row from source {_names(labels, list(labels))}, so the watermark stays at {format_ms(watermark, tz)}")
    elif advancing is False:
        text = (f"max event time not advancing: {head}; source {_names(labels, sorted(brought))} brought rows, none "
                f"later than the event times seen before (policy {policy})")
    else:
        text = (f"{head} although source {_names(labels, sorted(brought))} brought data (policy {policy}): its event times "
                + ("advanced, check the watermark delay" if advancing else
                   f"are not beyond those seen before (pass {arg('progress')} to see the max event time per batch)"))
    return WatermarkStall(watermark, start, since_ms, format_ms(since_ms, tz), len(data_batches), held, reason, policy,
                          advancing, text)
