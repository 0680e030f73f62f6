"""Source offsets as recorded in ``offsets/N``, recognised by shape and kept exactly as read."""
from __future__ import annotations

import json
from functools import cached_property
from typing import Any

from wmcheck.checkpoint.logs.textlog import first_json_value
from wmcheck.checkpoint.numbers import LONG_MAX, LONG_MIN, is_number
from wmcheck.checkpoint.records import dataclass

DELTA_KEYS = frozenset({"sourceVersion", "reservoirVersion", "index"})


def _is_long(value: Any) -> bool:
    """An integer a Java long holds (JSON allows any size)."""
    return isinstance(value, int) and not isinstance(value, bool) and LONG_MIN <= value <= LONG_MAX


@dataclass(frozen=True)
class SourceOffset:
    """One source's end offset for a batch; ``raw`` is None for Spark's ``-`` (no offset yet)."""

    source_id: str
    raw: str | None

    @cached_property
    def value(self) -> Any:
        """The offset as JSON, or None when it is not JSON (kept raw). An object or array is read as Spark's sources
        read theirs (json4s: what follows it is ignored); a number must be the whole text (``LongOffset``: ``toLong``)."""
        if self.raw is None:
            return None
        try:
            value = json.loads(self.raw)
        except (ValueError, RecursionError):
            try:
                value = first_json_value(self.raw)
            except (ValueError, RecursionError):
                return None
            return value if isinstance(value, (dict, list)) else None
        return value

    @cached_property
    def kind(self) -> str:
        """``file``, ``kafka``, ``delta``, ``long`` (rate, socket, memory, legacy file), ``none`` or ``unknown``."""
        value = self.value
        if self.raw is None:
            return "none"
        if _is_long(value):
            return "long"
        if not isinstance(value, dict):
            return "unknown"
        if set(value) == {"logOffset"} and _is_long(value["logOffset"]):
            return "file"
        if DELTA_KEYS <= set(value):
            return "delta"
        if value and all(
            isinstance(parts, dict) and parts and all(_is_long(o) and is_number(k.removeprefix("-")) for k, o in parts.items())
            for parts in value.values()
        ):
            return "kafka"
        return "unknown"

    @property
    def log_offset(self) -> int | None:
        """The file-source log batch this offset points at (also for the legacy bare long)."""
        if self.kind == "file":
            return self.value["logOffset"]
        if self.kind == "long":
            return self.value
        return None

    @property
    def kafka_offsets(self) -> dict[str, dict[int, int]] | None:
        """``{topic: {partition: offset}}`` for a Kafka offset."""
        if self.kind != "kafka":
            return None
        return {topic: {int(p): o for p, o in parts.items()} for topic, parts in self.value.items()}

    def summary(self) -> str:
        """A short human description of the offset."""
        if self.kind == "file":
            return f"file log batch {self.log_offset}"
        kafka = self.kafka_offsets
        if kafka is not None:
            return ", ".join(f"{topic}[{p}]={o}" for topic, parts in sorted(kafka.items()) for p, o in sorted(parts.items()))
        if self.kind == "delta":
            return f"delta version {self.value['reservoirVersion']} index {self.value['index']}"
        if self.raw is None:
            return "-"
        return self.raw if len(self.raw) <= 60 else self.raw[:57] + "..."
