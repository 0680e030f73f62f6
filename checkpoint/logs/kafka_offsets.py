"""Kafka source offsets in a checkpoint: the initial offsets file ``sources/<i>/0`` and the offsets as Spark's
``startingOffsets``/``endingOffsets`` JSON."""
from __future__ import annotations

from typing import Any, Mapping

from wmcheck.checkpoint.errors import MalformedFileError
from wmcheck.checkpoint.logs.textlog import offset_json, open_log, parse_json_object
from wmcheck.checkpoint.numbers import is_long, is_number

KAFKA_EARLIEST = -2
"""The offset Spark's Kafka source starts a partition at when the partition is new (earliest)."""


def parse_kafka_initial_offsets(data: bytes, path: str) -> dict[str, dict[int, int]]:
    """``sources/<i>/0`` of a Kafka source: a NUL byte (SPARK-19517), ``v1``, then the offsets JSON."""
    _, lines = open_log(data.lstrip(b"\x00"), path, 1, "Kafka initial offsets", "the initial Kafka offsets",
                        "the file is truncated")
    if not lines:
        raise MalformedFileError("expected the initial Kafka offsets after the version line", path=path,
                                 hint="the file is truncated")
    text = "\n".join(lines)
    parse_json_object(text, path, 2, "the initial Kafka offsets")
    offsets = partition_offsets(offset_json(text))
    if offsets is None:
        raise MalformedFileError("expected {topic: {partition: offset}} JSON", path=path, line=2,
                                 hint="this is not a Kafka source's initial offsets file")
    return offsets


def partition_offsets(value: Any) -> dict[str, dict[int, int]] | None:
    """``{topic: {partition: offset}}`` of a Kafka offset's JSON (``KafkaSourceOffset``: every partition a number, every
    offset a long), None for JSON of another shape."""
    if not isinstance(value, dict) or not value or not all(
            isinstance(parts, dict) and parts and all(is_long(o) and is_number(k.removeprefix("-")) for k, o in parts.items())
            for parts in value.values()):
        return None
    return {topic: {int(p): o for p, o in parts.items()} for topic, parts in value.items()}


def kafka_json(offsets: Mapping[str, Mapping[int, int]]) -> dict[str, dict[str, int]]:
    """Offsets as Spark's ``startingOffsets``/``endingOffsets`` JSON object (topics and partitions sorted)."""
    return {topic: {str(p): offsets[topic][p] for p in sorted(offsets[topic])} for topic in sorted(offsets)}
DATA_LOST = "Some data may have been lost because they are not available in Kafka any more"
"""What Spark's Kafka source says when offsets it must read are no longer on the broker (``failOnDataLoss`` true)."""
