"""A Kafka sink: what a query's re-run batches do to the topic it writes. Spark's Kafka sink is at-least-once: a batch
run again writes its rows again, and consumers read them twice (tests/test_kafka_sink.py makes it happen).

Which records a batch wrote is found by time: a batch ran from its ``batchTimestampMs`` until its commit file was
written, and Spark's Kafka producer stamps each record with the time it sends it (unless the query writes a
``timestamp`` column, whose values are then the records' timestamps and this count does not hold); the broker gives
the offsets of those times.
"""
from __future__ import annotations

from typing import Iterable

from wmcheck.checkpoint.logs.metadata_log import COMMIT_LOG

from ..model import Checkpoint
from ..sources.kafka_topics import KafkaTopics
from . import SinkBatch, SinkEffect


def rerun_effect(ckpt: Checkpoint, topic: str, broker: KafkaTopics, batches: Iterable[int]) -> SinkEffect:
    """What the Kafka sink ``topic`` gets from ``batches`` run again: each batch that ran before writes its records a
    second time (``duplicate``, with how many it wrote then); one that never ran writes them once (``write``)."""
    state = broker.topics([topic])[topic]
    parts = [(topic, p.partition) for p in state.partitions]
    meta = ckpt.query_metadata
    rows: list[SinkBatch] = []
    ranges: dict[int, tuple[int, int]] = {}
    unlogged = _unlogged(ckpt)
    for batch in sorted(batches):
        span = _ran(ckpt, batch)
        if batch in unlogged:
            rows.append(SinkBatch(batch, "duplicate", None, 0, None))
            continue
        if span is None or not parts:
            rows.append(SinkBatch(batch, "write", None, 0, None))
            continue
        first = broker.offsets_for_time(parts, span[0])
        after = broker.offsets_for_time(parts, span[1] + 1)
        count = sum(after[tp] - first[tp] for tp in parts)
        for (_, p), start in first.items():
            low, high = ranges.get(p, (start, after[_, p]))
            ranges[p] = (min(low, start), max(high, after[_, p]))
        rows.append(SinkBatch(batch, "duplicate", None, 0, count))
    return SinkEffect("kafka", topic, meta.query_id if meta else "", None, tuple(rows), _summary(topic, rows, ranges))


def _ran(ckpt: Checkpoint, batch: int) -> tuple[int, int] | None:
    """When ``batch`` ran: its timestamp to its commit file's time (None: it has no commit, so it wrote nothing)."""
    if batch not in ckpt.commit_ids or batch not in ckpt.offset_id_set:
        return None
    meta = ckpt.offsets(batch).metadata
    commit = ckpt.fs.info(COMMIT_LOG.path(batch))
    if meta is None or commit is None:
        return None
    return meta.batch_timestamp_ms, commit.mtime_ms


def _unlogged(ckpt: Checkpoint) -> set[int]:
    """Batches that ran though neither log holds them: the gaps async progress tracking leaves (``commits/`` holding
    exactly the batches ``offsets/`` holds, a gap between them; see check's WM085)."""
    ids = ckpt.offset_ids
    if ckpt.commit_ids != ids:
        return set()
    return {b for lo, hi in ckpt.gaps(ids) for b in range(lo, hi + 1)}


def _summary(topic: str, rows: list[SinkBatch], ranges: dict[int, tuple[int, int]]) -> str:
    unknown = [b.batch for b in rows if b.action == "duplicate" and b.rows is None]
    note = (f"; batch(es) {', '.join(map(str, unknown))} ran but were not logged (async progress tracking): their "
            "records are written again too, how many is not known") if unknown else ""
    return _counted(topic, rows, ranges) + note


def _counted(topic: str, rows: list[SinkBatch], ranges: dict[int, tuple[int, int]]) -> str:
    again = [b for b in rows if b.action == "duplicate" and b.rows is not None]
    if not rows:
        return "no batch runs again"
    if not again:
        return ("no logged re-run batch wrote to the topic before" if any(b.action == "duplicate" for b in rows) else
                f"the re-run batches wrote nothing to {topic} before: their records are written once")
    total = sum(b.rows or 0 for b in again)
    where = ", ".join(f"partition {p} offsets {lo}..{hi - 1}" for p, (lo, hi) in sorted(ranges.items()) if hi > lo)
    ids = f"{again[0].batch}..{again[-1].batch}" if len(again) > 1 else str(again[0].batch)
    return (f"Spark's Kafka sink is at-least-once: the re-run batches {ids} write their records to {topic} again, "
            f"{total} record(s) duplicated ({where or 'none written'}; found by the records' timestamps while those "
            "batches ran: records other writers put in the topic then are counted too)")
