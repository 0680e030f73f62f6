"""The Kafka side of a replay plan: each batch's offset range per topic-partition, and which of the recorded offsets
the broker no longer holds (retention, ``kafka-delete-records``), asked of the broker before Spark reads them.

Spark's batch read of a range whose start the broker no longer holds fails with "Some data may have been lost because
they are not available in Kafka any more" (``failOnDataLoss`` true, the default), or reads fewer records than the
batch did without a word (``failOnDataLoss`` false); tests/test_replay_kafka.py makes Spark 4.2 do both.
"""
from __future__ import annotations

import importlib.util
from typing import Mapping, Sequence

from wmcheck.checkpoint.logs.kafka_offsets import DATA_LOST, KAFKA_EARLIEST
from wmcheck.checkpoint.records import dataclass

from .batch_inputs import BatchInput
from .errors import CheckpointError, arg
from .sources.kafka import KAFKA, partition_ranges
from .sources.kafka import PartitionRange as PartitionRange
from .sources.registry import kind_named

BOOTSTRAP_OPTION = "kafka.bootstrap.servers"


@dataclass(frozen=True)
class GonePartition:
    """A topic-partition whose recorded offsets the broker no longer holds: the range starts at ``recorded_start``,
    the broker keeps ``earliest`` on (None: the topic or partition is gone)."""

    source_id: str
    topic: str
    partition: int
    recorded_start: int
    earliest: int | None

    @property
    def text(self) -> str:
        now = "the partition is gone" if self.earliest is None else f"earliest now {self.earliest}"
        return f"{self.topic}[{self.partition}] (recorded from {self.recorded_start}, {now})"


@dataclass(frozen=True)
class KafkaRetention:
    """The range's recorded Kafka offsets against the broker: the partitions it lost, and which batches read them."""

    bootstrap: str
    earliest: tuple[tuple[str, int, int | None], ...]
    """(topic, partition, earliest offset the broker holds now, None: gone) of every partition the range read."""
    gone: tuple[GonePartition, ...]
    lost_batches: tuple[int, ...]
    replayable_batches: tuple[int, ...]

    def earliest_of(self, topic: str, partition: int) -> int | None:
        return next((e for t, p, e in self.earliest if (t, p) == (topic, partition)), None)

    @property
    def line(self) -> str:
        """One line: the partitions retention removed recorded offsets of, and the batches that can still be replayed."""
        if not self.gone:
            return f"the broker at {self.bootstrap} still holds every recorded offset of these batches"
        still = f"{_span(self.replayable_batches)} can still be replayed" if self.replayable_batches else \
            "no batch of this range can be replayed"
        return (f"the broker no longer holds the recorded offsets of {', '.join(g.text for g in self.gone)}: "
                f"{_span(self.lost_batches)} read them; {still}")


def _span(batches: Sequence[int]) -> str:
    return f"batch {batches[0]}" if len(batches) == 1 else f"batches {batches[0]}..{batches[-1]}"


def retention(batches: Sequence[BatchInput], earliest: Mapping[tuple[str, int], int | None],
              bootstrap: str) -> KafkaRetention:
    """Which recorded offsets of ``batches`` fall below what the broker holds (``earliest``: (topic, partition) ->
    the first offset it retains, None: gone). A batch is lost when one partition's range has records before that."""
    gone: dict[tuple[str, str, int], GonePartition] = {}
    lost: list[int] = []
    for batch in batches:
        hit = False
        for src in batch.sources:
            for r in partition_ranges(src):
                now = earliest.get((r.topic, r.partition))
                if r.start == KAFKA_EARLIEST or r.start >= r.end or (now is not None and r.start >= now):
                    continue
                hit = True
                gone.setdefault((src.source_id, r.topic, r.partition),
                                GonePartition(src.source_id, r.topic, r.partition, r.start, now))
        if hit:
            lost.append(batch.batch_id)
    ids = [b.batch_id for b in batches]
    first_kept = max(lost) + 1 if lost else None
    return KafkaRetention(bootstrap, tuple((t, p, e) for (t, p), e in sorted(earliest.items())),
                          tuple(gone[k] for k in sorted(gone)), tuple(lost),
                          tuple(b for b in ids if first_kept is None or b >= first_kept))


def kafka_sources(batches: Sequence[BatchInput]) -> bool:
    return any(kind_named(s.kind) is KAFKA for b in batches for s in b.sources)


def ask_retention(batches: Sequence[BatchInput], bootstrap: str, timeout_s: float = 10.0) -> KafkaRetention:
    """:func:`retention` with each partition's earliest offset asked of the broker at ``bootstrap`` (confluent-kafka)."""
    from .sources.kafka_topics import KafkaTopics

    topics = sorted({r.topic for b in batches for s in b.sources for r in partition_ranges(s)})
    try:
        found = KafkaTopics(bootstrap, timeout_s=timeout_s).topics(topics)
    except CheckpointError as exc:  # its hint names check's options: name replay's
        raise CheckpointError(exc.message, hint=f"check {arg('options', BOOTSTRAP_OPTION + '=HOST:PORT')} (and that the "
                              "broker is up): replay asks it which recorded offsets it still holds") from exc
    wanted = {(r.topic, r.partition) for b in batches for s in b.sources for r in partition_ranges(s)}
    earliest: dict[tuple[str, int], int | None] = {}
    for topic, partition in wanted:
        held = found[topic].offsets().get(partition) if found[topic].exists else None
        earliest[topic, partition] = held.earliest if held is not None else None
    return retention(batches, earliest, bootstrap)


def client_installed() -> bool:
    """Whether the Kafka client of the ``kafka`` extra is installed (not imported here)."""
    return importlib.util.find_spec("confluent_kafka") is not None


def check_retained(batches: Sequence[BatchInput], options: Mapping[str, str]) -> KafkaRetention | None:
    """Before Spark reads: fail with one line when the broker (``kafka.bootstrap.servers`` of ``options``) no longer
    holds offsets the batches read. None when there is nothing to ask (no Kafka source, no broker, no Kafka client)."""
    bootstrap = options.get(BOOTSTRAP_OPTION)
    if not bootstrap or not kafka_sources(batches) or not client_installed():
        return None
    found = ask_retention(batches, bootstrap)
    if found.lost_batches:
        hint = (f"use {arg('start', found.replayable_batches[0])}" if found.replayable_batches else
                "the records are gone from the broker; replay a later range")
        raise CheckpointError(found.line, hint=hint, param="start")
    return found


def data_lost(exc: BaseException) -> CheckpointError | None:
    """Spark's data-loss failure of a Kafka read as one line (the Kafka client was not there to ask before)."""
    text = str(exc)
    if DATA_LOST not in text:
        return None
    reason = next((line.split("Reason:", 1)[1].strip() for line in text.splitlines() if "Reason:" in line), None)
    return CheckpointError(
        "the broker no longer holds records these batches read (Spark: " + (reason or DATA_LOST) + ")",
        hint="pip install 'wmcheck[kafka]' and replay again: it names the partitions retention removed recorded offsets "
             "of and the batches that can still be replayed")
