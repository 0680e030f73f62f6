"""``offsets/N``: the batch plan (Spark's ``OffsetSeqLog``), versions v1 and v2."""
from __future__ import annotations

import dataclasses
import re
from functools import cached_property
from typing import Any, Mapping

from wmcheck.checkpoint.errors import MalformedFileError, arg
from wmcheck.checkpoint.logs.source_offsets import SourceOffset
from wmcheck.checkpoint.logs.textlog import dump_json, int_field, open_log, parse_json_object
from wmcheck.checkpoint.records import dataclass

MAX_VERSION = 2
VOID_OFFSET = "-"


@dataclass(frozen=True)
class BatchMetadata:
    """The metadata line: watermark, timestamp, pinned conf.

    The watermark and timestamp are read up front; the whole line (``fields``, every key as read,
    and ``conf``) is parsed on first use, which keeps reading thousands of batches fast.
    """

    text: str
    batch_watermark_ms: int
    batch_timestamp_ms: int
    path: str = dataclasses.field(default="", compare=False)

    @cached_property
    def fields(self) -> dict[str, Any]:
        return parse_json_object(self.text, self.path, 2, "the batch metadata")

    @property
    def conf(self) -> Mapping[str, str]:
        """The pinned conf as Spark's reader (json4s, a ``Map[String, String]``) takes it: a number is taken (as its
        text), a ``true``, list or object fails the whole file ('No usable value for conf')."""
        conf = self.fields.get("conf", {})
        if not isinstance(conf, dict):
            raise MalformedFileError(
                "expected conf to be a JSON object", path=self.path, line=2, hint="the file was edited by hand"
            )
        for key, value in conf.items():
            if isinstance(value, (bool, list, dict)):
                raise MalformedFileError(
                    f"expected conf {key} to be a string, found {dump_json(value)[:40]}: Spark's reader takes a string "
                    "or a number only and fails on the whole file ('No usable value for conf')",
                    path=self.path, line=2, hint="the file was edited by hand; write the value as a JSON string",
                )
        return conf

    @classmethod
    def from_fields(cls, fields: Mapping[str, Any], path: str = "") -> "BatchMetadata":
        """Metadata for ``fields`` (written compactly, as Spark does)."""
        return parse_metadata(dump_json(dict(fields)), path)

    def with_watermark(self, watermark_ms: int) -> "BatchMetadata":
        """The same metadata with ``batchWatermarkMs`` replaced (key order kept)."""
        return self.from_fields({**self.fields, "batchWatermarkMs": watermark_ms}, self.path)


@dataclass(frozen=True)
class OffsetSeq:
    """One ``offsets/N`` file: its version, metadata (None when blank or missing) and source offsets."""

    version: int
    metadata: BatchMetadata | None
    sources: tuple[SourceOffset, ...]


_LONG = r"(-?(?:0|[1-9]\d{0,17}))"  # a JSON integer a long holds whatever its digits (longer ones: the full parse)
FAST_METADATA = re.compile(rf'\{{"batchWatermarkMs":{_LONG},"batchTimestampMs":{_LONG}[,}}]')
_STRING = r'"[^"\\]*"'
SPARK_CONF = re.compile(rf'(?:"conf":\{{(?:{_STRING}:{_STRING}(?:,{_STRING}:{_STRING})*)?\}})?\}}')
"""The rest of a metadata line as Spark writes it (after the timestamp's comma): a conf of plain strings."""


def parse_metadata(text: str, path: str) -> BatchMetadata:
    """The metadata line; Spark's own key order is read without a full JSON parse."""
    match = FAST_METADATA.match(text)
    if match and (text[match.end() - 1] == "}" and match.end() == len(text) or SPARK_CONF.fullmatch(text, match.end())):
        return BatchMetadata(text, int(match[1]), int(match[2]), path)
    obj = parse_json_object(text, path, 2, "the batch metadata")
    meta = BatchMetadata(
        text, int_field(obj, "batchWatermarkMs", path, 2, 0, null_is_absent=True),
        int_field(obj, "batchTimestampMs", path, 2, 0, null_is_absent=True), path
    )
    meta.__dict__["fields"] = obj
    meta.conf  # noqa: B018 - validate the shape now that it is parsed anyway
    return meta


def _parse_v2_source(line: str, path: str, number: int) -> SourceOffset:
    source_id, sep, raw = line.partition(":")
    if not sep:
        raise MalformedFileError(
            f"expected sourceId:offset, found {line[:60]!r}",
            path=path,
            line=number,
            hint="v2 offsets files hold one 'sourceId:offset' line per source",
        )
    return SourceOffset(source_id, None if raw == VOID_OFFSET else raw)


def empty_offsets_hint(path: str) -> str:
    """What to do about an empty ``offsets/N``: Spark fails to restart on it; removing it makes Spark plan N again."""
    name = path.rsplit("/", 1)[-1]
    before = f"rewind with {arg('to_batch', int(name) - 1)}" if name.isdigit() and int(name) > 0 else "rewind past it"
    return (f"a crash while Spark wrote the file leaves it empty; when it is the last batch, {before} removes it "
            "with its checksum file and Spark plans the batch again on restart")


def parse_offsets(data: bytes, path: str) -> OffsetSeq:
    """Parse an ``offsets/N`` file."""
    version, lines = open_log(data, path, MAX_VERSION, "offsets log", "the batch metadata and the source offsets",
                              empty_offsets_hint(path), trim=False)
    meta_text = lines[0].strip() if lines else ""
    metadata = parse_metadata(meta_text, path) if meta_text else None
    rest = lines[1:]
    if version == 2:
        sources = tuple(_parse_v2_source(line, path, i) for i, line in enumerate(rest, start=3))
    else:
        sources = tuple(SourceOffset(str(i), None if line == VOID_OFFSET else line) for i, line in enumerate(rest))
    return OffsetSeq(version, metadata, sources)


def serialize_offsets(seq: OffsetSeq) -> bytes:
    """Write an offsets file exactly as Spark does (no trailing newline)."""
    lines = [f"v{seq.version}", seq.metadata.text if seq.metadata else ""]
    for src in seq.sources:
        raw = VOID_OFFSET if src.raw is None else src.raw
        lines.append(f"{src.source_id}:{raw}" if seq.version == 2 else raw)
    return "\n".join(lines).encode("utf-8")
