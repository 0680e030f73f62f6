"""Kafka sources (``KafkaSource``, ``KafkaMicroBatchStream``): the offset ``{topic: {partition: offset}}`` is where each
partition's next batch starts; the first batch starts at the initial offsets in ``sources/<i>/0``."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from wmcheck.checkpoint.errors import arg
from wmcheck.checkpoint.layout import SOURCES
from wmcheck.checkpoint.logs.kafka_offsets import (
    KAFKA_EARLIEST,
    kafka_json,
    parse_kafka_initial_offsets,
    partition_offsets,
)
from wmcheck.checkpoint.logs.log_kinds import FILE_SOURCE_LOG
from wmcheck.checkpoint.numbers import is_number
from wmcheck.checkpoint.records import dataclass

from .protocol import InputRequest, LiveCheck, SourceInput, SourceKind

if TYPE_CHECKING:
    from wmcheck.checkpoint.logs.source_offsets import SourceOffset

    from .protocol import CheckpointReads

EARLIEST = "earliest"
"""Where Spark starts a topic partition the offsets do not name: the earliest offset the broker keeps."""


KAFKA_LIVE = LiveCheck("WM081-WM084", "Kafka offsets with the topics as the broker holds them now", "the broker",
                       arg("bootstrap_server", "HOST:PORT"))
"""What check verifies of a Kafka source against its broker (:mod:`wmcheck.checkpoint.checks.kafka_live`)."""


class KafkaSource(SourceKind):
    name = "kafka"
    file_log_dir = False
    live = KAFKA_LIVE

    def matches(self, src: SourceOffset) -> bool:
        return partition_offsets(src.value) is not None

    def kafka_offsets(self, src: SourceOffset) -> dict[str, dict[int, int]] | None:
        return partition_offsets(src.value)

    def summary(self, src: SourceOffset) -> str:
        return ", ".join(f"{topic}[{p}]={o}" for topic, parts in sorted((self.kafka_offsets(src) or {}).items())
                         for p, o in sorted(parts.items()))

    def location(self, ckpt: CheckpointReads, src: SourceOffset) -> str | None:
        return "topics " + ", ".join(sorted(src.kafka_offsets or {}))

    def batch_input(self, ckpt: CheckpointReads, batch: int, src: SourceOffset, prev: SourceOffset | None,
                    request: InputRequest) -> SourceInput:
        end = src.kafka_offsets or {}
        note = None
        if prev is not None and prev.kafka_offsets is not None:
            start = prev.kafka_offsets
        else:
            path = initial_offsets_path(ckpt, src.source_id)
            if not ckpt.fs.exists(path):
                return SourceInput(src.source_id, self.name, prev, src, ending_offsets=kafka_json(end), replayable=False,
                                   note=f"the first batch of this source starts at the initial offsets in {path}, which is missing")
            start = ckpt.parse(path, parse_kafka_initial_offsets)
        starting = {t: {p: start.get(t, {}).get(p, KAFKA_EARLIEST) for p in parts} for t, parts in end.items()}
        new = sorted(f"{t}[{p}]" for t, parts in starting.items() for p, o in parts.items() if o == KAFKA_EARLIEST)
        if new:
            note = f"new partitions start at the earliest offset: {', '.join(new)}"
        records = None if new else sum(o - starting[t][p] for t, parts in end.items() for p, o in parts.items())
        return SourceInput(src.source_id, self.name, prev, src, starting_offsets=kafka_json(starting),
                           ending_offsets=kafka_json(end), records=records, note=note)

    def rewind_positions(self, old: SourceOffset | None, new: SourceOffset | None
                         ) -> list[tuple[str, str | None, str | None]]:
        """Each topic partition's offset, as ``kafka-consumer-groups --reset-offsets --dry-run`` shows them."""
        was, will = (s.kafka_offsets or {} if s is not None else {} for s in (old, new))
        parts = sorted({(t, p) for offsets in (was, will) for t, ps in offsets.items() for p in ps})
        return [(f"{t}/{p}", _text(was.get(t, {}).get(p)), _text(will.get(t, {}).get(p)) or (EARLIEST if new is not None else None))
                for t, p in parts]

    def input_text(self, src: SourceInput) -> str | None:
        return f"{src.starting_offsets_json} -> {src.ending_offsets_json}"

    def input_fields(self, src: SourceInput, plain: Callable[[Any], Any]) -> dict[str, Any]:
        return dict(starting_offsets=src.starting_offsets, ending_offsets=src.ending_offsets,
                    starting_offsets_json=src.starting_offsets_json, ending_offsets_json=src.ending_offsets_json,
                    records=src.records, partitions=[dict(plain(r), records=r.records) for r in partition_ranges(src)])


KAFKA = KafkaSource()


def _text(value: int | None) -> str | None:
    return None if value is None else str(value)


def initial_offsets_path(ckpt: CheckpointReads, source_id: str) -> str:
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


@dataclass(frozen=True)
class PartitionRange:
    """What one batch read of one topic-partition: offsets ``start`` (inclusive, -2: earliest) to ``end`` (exclusive)."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def records(self) -> int | None:
        """``end - start`` (an upper bound with transactions or compaction); None when it starts at the earliest."""
        return None if self.start == KAFKA_EARLIEST else self.end - self.start

    @property
    def label(self) -> str:
        return f"{self.topic}[{self.partition}]"


def partition_ranges(src: SourceInput) -> tuple[PartitionRange, ...]:
    """A Kafka source's range in one batch, one entry per topic-partition (sorted)."""
    if src.ending_offsets is None:
        return ()
    start = src.starting_offsets or {}
    return tuple(PartitionRange(topic, int(p), start.get(topic, {}).get(p, KAFKA_EARLIEST), end)
                 for topic, parts in sorted(src.ending_offsets.items())
                 for p, end in sorted(parts.items(), key=lambda kv: int(kv[0])))
