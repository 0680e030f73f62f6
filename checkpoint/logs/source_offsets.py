"""Source offsets as recorded in ``offsets/N``, kept exactly as read; their kind (:mod:`wmcheck.checkpoint.sources`)
recognises them by their shape."""
from __future__ import annotations

from functools import cached_property
from typing import Any

from wmcheck.checkpoint.logs.textlog import offset_json
from wmcheck.checkpoint.records import dataclass
from wmcheck.checkpoint.sources.protocol import SourceKind
from wmcheck.checkpoint.sources.registry import offset_kind


@dataclass(frozen=True)
class SourceOffset:
    """One source's end offset for a batch; ``raw`` is None for Spark's ``-`` (no offset yet)."""

    source_id: str
    raw: str | None

    @cached_property
    def value(self) -> Any:
        """The offset as JSON, or None when it is not JSON (kept raw): :func:`~wmcheck.checkpoint.logs.textlog.offset_json`."""
        return None if self.raw is None else offset_json(self.raw)

    @cached_property
    def source(self) -> SourceKind:
        """The kind of source the offset's shape tells (:func:`~wmcheck.checkpoint.sources.registry.offset_kind`)."""
        return offset_kind(self)

    @property
    def kind(self) -> str:
        """``file``, ``kafka``, ``delta``, ``long`` (rate, socket, memory, legacy file), ``none`` or ``unknown``."""
        return self.source.name

    @property
    def log_offset(self) -> int | None:
        """The file-source log batch this offset points at (also for the legacy bare long)."""
        return self.source.log_offset(self)

    @property
    def kafka_offsets(self) -> dict[str, dict[int, int]] | None:
        """``{topic: {partition: offset}}`` for a Kafka offset."""
        return self.source.kafka_offsets(self)

    def summary(self) -> str:
        """A short human description of the offset."""
        return self.source.summary(self)
