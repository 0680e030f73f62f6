"""What ``wmcheck state`` reports without ``--older-than-watermark``: rows per store and partition,
the eviction rule, how many rows the watermark evicts, the oldest event time and a histogram; built
from per-partition groups that either engine computes."""
from __future__ import annotations

from datetime import timezone, tzinfo
from typing import TYPE_CHECKING, Mapping

from wmcheck.checkpoint.model import Checkpoint
from wmcheck.checkpoint.records import dataclass
from wmcheck.checkpoint.timeutil import format_ms

from .discovery import Store
from .eviction import Eviction
from .targets import EDGES, Target

if TYPE_CHECKING:
    from .engines import EngineName


@dataclass(frozen=True)
class HistogramBucket:
    """Rows whose event time minus the watermark falls in ``(from_ms, to_ms]`` (None: unbounded)."""

    bucket: str
    from_ms: int | None
    to_ms: int | None
    rows: int


@dataclass(frozen=True)
class StoreSummary:
    """One store of one stateful operator judged against the watermark."""

    operator_id: int
    operator_name: str | None
    operator_name_inferred: bool
    store: str
    rows: int
    rows_per_partition: Mapping[str, int]
    event_time_column: str | None
    evictable: bool
    eviction: str
    older_than_watermark: int | None
    """None when the operator's own watermark is unknown."""
    without_event_time: int | None
    oldest_event_time_ms: int | None
    oldest_event_time: str | None
    oldest_behind_watermark_ms: int | None
    histogram: tuple[HistogramBucket, ...] | None
    watermark_ms: int | None = None
    """The watermark its rows are judged by: its operator's own eviction watermark (None when unknown)."""
    watermark_from: str | None = None

    @property
    def operator_label(self) -> str:
        """The operator name (``?`` when unknown), marked when inferred."""
        return (self.operator_name or "?") + (" (inferred)" if self.operator_name_inferred else "")


@dataclass(frozen=True)
class StateSummary:
    """Every selected store, with the state batch and the watermark they are judged by."""

    checkpoint: str
    batch: int
    state_batch_id: int
    watermark_ms: int
    watermark: str | None
    watermark_from: str
    stores: tuple[StoreSummary, ...]
    engine: EngineName = "spark"
    """``python`` (the state files read without a JVM) or ``spark`` (Spark's state reader)."""


def _bucket_labels() -> list[tuple[str, int | None, int | None]]:
    def short(ms: int) -> str:
        sign = "-" if ms < 0 else "+" if ms > 0 else ""
        ms = abs(ms)
        for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
            if ms and ms % size == 0:
                return f"{sign}{ms // size}{unit}"
        return f"{sign}{ms}ms" if ms else "0"

    bounds: list[int | None] = [None, *EDGES, None]
    return [(f"({short(lo) if lo is not None else '-inf'}, {short(hi) if hi is not None else '+inf'}" + ("]" if hi is not None else ")"), lo, hi)
            for lo, hi in zip(bounds, bounds[1:])]


BUCKETS = _bucket_labels()


def summary_of_groups(store: Store, rule: Eviction, tgt: Target, groups: list[tuple[int, int | None, int, int | None, int | None]],
                      tz: tzinfo = timezone.utc) -> StoreSummary:
    """One store's summary from ``(partition_id, bucket or None, rows, rows older, oldest event time)`` groups
    (buckets index :data:`BUCKETS`), as either engine computes them at ``tgt``, the store's own target; what is
    judged by the watermark is None when the operator's own watermark is unknown."""
    wm = tgt.watermark_ms
    known = tgt.unknown is None
    parts = {str(p): 0 for p in range(store.num_partitions or 0)}
    counts = [0] * len(BUCKETS)
    older = without = 0
    oldest: int | None = None
    for partition, bucket, n, n_older, group_oldest in groups:
        parts[str(partition)] = parts.get(str(partition), 0) + n
        older += n_older or 0
        if bucket is None:
            without += n
            continue
        counts[bucket] += n
        if group_oldest is not None:
            oldest = group_oldest if oldest is None else min(oldest, group_oldest)
    return StoreSummary(
        operator_id=store.operator_id,
        operator_name=store.operator_name,
        operator_name_inferred=store.inferred_name,
        store=store.name,
        rows=sum(parts.values()),
        rows_per_partition=dict(sorted(parts.items(), key=lambda kv: int(kv[0]))),
        event_time_column=rule.column_name,
        evictable=rule.evictable,
        eviction=rule.rule,
        older_than_watermark=older if known else None,
        without_event_time=without if rule.evictable else None,
        oldest_event_time_ms=oldest,
        oldest_event_time=format_ms(oldest, tz),
        oldest_behind_watermark_ms=None if oldest is None or not known else wm - oldest,
        histogram=tuple(HistogramBucket(label, lo, hi, n) for (label, lo, hi), n in zip(BUCKETS, counts))
        if rule.evictable and known else None,
        watermark_ms=wm if known else None,
        watermark_from=tgt.watermark_from + (f" ({tgt.unknown})" if tgt.unknown else ""),
    )


def state_summary(ckpt: Checkpoint, tgt: Target, stores: tuple[StoreSummary, ...], engine: EngineName,
                  tz: tzinfo = timezone.utc) -> StateSummary:
    return StateSummary(
        checkpoint=ckpt.location,
        batch=tgt.batch,
        state_batch_id=tgt.state_batch_id,
        watermark_ms=tgt.watermark_ms,
        watermark=format_ms(tgt.watermark_ms, tz),
        watermark_from=tgt.watermark_from,
        stores=stores,
        engine=engine,
    )
