"""The checkpoint's root ``metadata`` file: the query id."""
from __future__ import annotations

from typing import Any, Mapping

from wmcheck.checkpoint.errors import MalformedFileError
from wmcheck.checkpoint.logs.textlog import decode_lines, parse_json_object
from wmcheck.checkpoint.records import dataclass


@dataclass(frozen=True)
class QueryMetadata:
    """``{"id": ...}``; ``fields`` keeps every key as read."""

    query_id: str
    fields: Mapping[str, Any]


def parse_query_metadata(data: bytes, path: str = "metadata") -> QueryMetadata:
    """Parse ``metadata`` (compact, or pretty-printed over several lines as Spark 2.1 wrote it)."""
    text = "\n".join(decode_lines(data, path)).strip()
    if not text:
        raise MalformedFileError(
            'file is empty: expected {"id":"<query uuid>"}',
            path=path,
            hint="Spark writes it when the query first starts; restore it from a backup",
        )
    obj = parse_json_object(text, path, 1, "the query metadata")
    query_id = obj.get("id")
    if not isinstance(query_id, str) or not query_id:
        raise MalformedFileError(
            'expected an "id" string (the query uuid)',
            path=path,
            line=1,
            hint="Spark writes it when the query first starts; restore it from a backup",
        )
    return QueryMetadata(query_id, obj)
