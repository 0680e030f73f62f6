"""The live side of a Kafka source: each topic's partitions and their earliest and latest offsets, and the offset of a
time, asked of the broker with a timeout through confluent-kafka (the ``kafka`` extra: ``pip install 'wmcheck[kafka]'``).

confluent-kafka, not kafka-python: its wheels carry librdkafka (nothing to build), every call here takes a timeout
that librdkafka enforces, and ``AdminClient.list_offsets`` answers earliest, latest and by-time offsets of many
partitions in one request, as Kafka's own ``kafka-consumer-groups`` asks them.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping

from wmcheck.checkpoint.records import dataclass

from ..errors import CheckpointError, arg
from ..extras import optional_module

if TYPE_CHECKING:
    import re

    from confluent_kafka.admin import AdminClient

DEFAULT_TIMEOUT_S = 10.0
TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class PartitionOffsets:
    """One partition as the broker holds it now: the first offset it retains and the offset after its last record."""

    topic: str
    partition: int
    earliest: int
    latest: int


@dataclass(frozen=True)
class TopicState:
    """A topic as the broker holds it now (``exists`` False: no such topic)."""

    topic: str
    exists: bool
    partitions: tuple[PartitionOffsets, ...] = ()

    def offsets(self) -> dict[int, PartitionOffsets]:
        return {p.partition: p for p in self.partitions}


INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
"""Kafka's own topics, which a pattern subscription leaves out (the consumer's exclude.internal.topics)."""


def _compiled(pattern: str) -> "re.Pattern[str]":
    """``pattern`` as a regular expression (Python's: Java's syntax for the common cases), or one line naming it."""
    import re

    try:
        return re.compile(pattern)
    except re.error as exc:
        raise CheckpointError(f"{arg('subscribe_pattern', repr(pattern))} is not a regular expression: {exc}",
                              param="subscribe_pattern",
                              hint="pass the source's subscribePattern option as the query gives it, e.g. 'events-.*'") from None


def _client_module() -> Any:
    return optional_module("confluent_kafka", "asking the Kafka broker", "kafka", "the Kafka client")


class KafkaTopics:
    """Look-ups against one broker (``bootstrap``: HOST:PORT[,...]); ``options`` are librdkafka settings (``--kafka-option
    security.protocol=SSL`` ...); every call fails after ``timeout_s`` with a CheckpointError naming the broker."""

    def __init__(self, bootstrap: str, options: Mapping[str, str] | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, subscribe_pattern: str | None = None) -> None:
        self.bootstrap = bootstrap
        self.options = dict(options or {})
        self.timeout_s = timeout_s
        self.subscribe_pattern = subscribe_pattern
        """The ``subscribePattern`` a source reads by (the checkpoint records the topics read so far, not it)."""
        if subscribe_pattern is not None:
            _compiled(subscribe_pattern)
        self._kafka = _client_module()
        from confluent_kafka.admin import AdminClient

        conf: dict[str, str | int | float | bool] = {"bootstrap.servers": bootstrap, "socket.timeout.ms": int(timeout_s * 1000),
                "socket.connection.setup.timeout.ms": int(timeout_s * 1000), "log_level": 0, **(options or {})}
        try:
            self._admin: AdminClient = AdminClient(conf)
        except (self._kafka.KafkaException, ValueError, TypeError) as exc:
            raise CheckpointError(f"cannot make a Kafka client for {bootstrap}: {exc}",
                                  hint=f"check {arg('bootstrap_server')} and {arg('kafka_option')}") from None

    def _failed(self, what: str, exc: BaseException) -> CheckpointError:
        text = exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else str(exc) or type(exc).__name__
        return CheckpointError(f"the Kafka broker at {self.bootstrap} did not answer {what} within {self.timeout_s:g} s: "
                               f"{text}", hint=f"check {arg('bootstrap_server')} (and that the broker is up), or a "
                               f"longer {arg('timeout')}")

    def ping(self) -> None:
        """Fail (a CheckpointError, after the timeout) unless the broker answers a metadata request."""
        try:
            self._admin.list_topics(timeout=self.timeout_s)
        except self._kafka.KafkaException as exc:
            raise self._failed("a metadata request", exc) from None

    def topics(self, names: Iterable[str]) -> dict[str, TopicState]:
        """Each named topic: its partitions' earliest and latest offsets, or ``exists`` False."""
        names = sorted(set(names))
        try:
            meta = self._admin.list_topics(timeout=self.timeout_s)
        except self._kafka.KafkaException as exc:
            raise self._failed("a metadata request", exc) from None
        known = {n: meta.topics[n] for n in names if n in meta.topics and meta.topics[n].error is None}
        parts = [(n, p) for n in known for p in sorted(known[n].partitions)]
        earliest = self._list_offsets(parts, "earliest")
        latest = self._list_offsets(parts, "latest")
        out = {}
        for name in names:
            if name not in known:
                out[name] = TopicState(name, False)
                continue
            offsets = tuple(PartitionOffsets(name, p, earliest[name, p], latest[name, p]) for p in sorted(known[name].partitions))
            out[name] = TopicState(name, True, offsets)
        return out

    def matching(self, pattern: str) -> list[str]:
        """The topics whose whole name matches ``pattern`` (Java regex semantics for the common cases: Spark's
        ``subscribePattern``), internal topics left out."""
        try:
            meta = self._admin.list_topics(timeout=self.timeout_s)
        except self._kafka.KafkaException as exc:
            raise self._failed("a metadata request", exc) from None
        regex = _compiled(pattern)
        return sorted(n for n in meta.topics if n not in INTERNAL_TOPICS and regex.fullmatch(n))

    def offsets_for_time(self, parts: Iterable[TopicPartition], ms: int) -> dict[TopicPartition, int]:
        """The first offset of each partition whose record timestamp is at or after ``ms``; the latest offset where no
        record is that late (as ``kafka-consumer-groups --to-datetime`` takes it)."""
        parts = list(parts)
        found = self._list_offsets(parts, ms)
        latest = self._list_offsets([tp for tp in parts if found[tp] < 0], "latest")
        return {tp: found[tp] if found[tp] >= 0 else latest[tp] for tp in parts}

    def _list_offsets(self, parts: list[TopicPartition], spec: str | int) -> dict[TopicPartition, int]:
        if not parts:
            return {}
        from confluent_kafka import TopicPartition as TP
        from confluent_kafka.admin import OffsetSpec

        kind = {"earliest": OffsetSpec.earliest, "latest": OffsetSpec.latest}
        offset_spec = kind[spec]() if isinstance(spec, str) else OffsetSpec.for_timestamp(spec)
        try:
            futures = self._admin.list_offsets({TP(t, p): offset_spec for t, p in parts},
                                               request_timeout=self.timeout_s)
            return {(tp.topic, tp.partition): f.result(timeout=self.timeout_s).offset for tp, f in futures.items()}
        except (self._kafka.KafkaException, TimeoutError) as exc:
            raise self._failed(f"a request for {spec if isinstance(spec, str) else 'by-time'} offsets", exc) from None
        except Exception as exc:  # concurrent.futures.TimeoutError before 3.11
            if type(exc).__name__ == "TimeoutError":
                raise self._failed("an offsets request", exc) from None
            raise
