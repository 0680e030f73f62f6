"""``commits/N``: the batch completion log (Spark's ``CommitLog``), versions v1 to v3."""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from wmcheck.checkpoint.errors import MalformedFileError
from wmcheck.checkpoint.logs.textlog import dump_json, int_field, open_log, parse_json_object
from wmcheck.checkpoint.records import dataclass

MAX_VERSION = 3

StateUniqueIds = Mapping[str, tuple[tuple[str, ...], ...]]
"""Operator id -> per partition -> one unique id per store (checkpoint format v2)."""


@dataclass(frozen=True)
class CommitEntry:
    """One ``commits/N`` file; ``fields`` keeps every key as read."""

    version: int
    fields: Mapping[str, Any]
    next_batch_watermark_ms: int | None
    state_unique_ids: StateUniqueIds | None

    def with_watermark(self, watermark_ms: int) -> "CommitEntry":
        """The same entry with ``nextBatchWatermarkMs`` replaced (key order kept)."""
        return dataclasses.replace(
            self, fields={**self.fields, "nextBatchWatermarkMs": watermark_ms}, next_batch_watermark_ms=watermark_ms
        )


def _unique_ids(value: Any, path: str) -> StateUniqueIds:
    def bad(what: str) -> MalformedFileError:
        return MalformedFileError(
            f"expected stateUniqueIds as {{operatorId: [[id per store] per partition]}}, {what}",
            path=path,
            line=2,
            hint="the commit was edited by hand or written by an unknown Spark build",
        )

    if not isinstance(value, dict):
        raise bad(f"found {type(value).__name__}")
    out: dict[str, tuple[tuple[str, ...], ...]] = {}
    for op, parts in value.items():
        if not isinstance(parts, list) or not all(
            isinstance(p, list) and all(isinstance(i, str) for i in p) for p in parts
        ):
            raise bad(f"operator {op} does not hold lists of strings")
        out[str(op)] = tuple(tuple(p) for p in parts)
    return out


def parse_commit(data: bytes, path: str) -> CommitEntry:
    """Parse a ``commits/N`` file (``v1`` alone or ``{}`` means no watermark recorded)."""
    version, lines = open_log(data, path, MAX_VERSION, "commit log", "the commit metadata",
                              "an empty commit file is left by a crash while writing; delete it so Spark re-runs the batch")
    text = lines[0] if lines else "{}"
    obj = parse_json_object(text, path, 2, "the commit metadata")
    ids = obj.get("stateUniqueIds")
    return CommitEntry(
        version=version,
        fields=obj,
        next_batch_watermark_ms=int_field(obj, "nextBatchWatermarkMs", path, 2, null_is_absent=True),
        state_unique_ids=None if ids is None else _unique_ids(ids, path),
    )


def serialize_commit(entry: CommitEntry) -> bytes:
    """Write a commit file exactly as Spark does (no trailing newline)."""
    return f"v{entry.version}\n{dump_json(dict(entry.fields))}".encode("utf-8")
