"""Shared reading of Spark's text metadata logs: a ``vN`` header line, then JSON lines."""
from __future__ import annotations

import json
import math
import re
from typing import Any, overload

from wmcheck.checkpoint.errors import MalformedFileError, NewerVersionError
from wmcheck.checkpoint.numbers import LONG_MAX, LONG_MIN, java_int

_LINE_END = re.compile("\r\n|\r|\n")


def decode_lines(data: bytes, path: str) -> list[str]:
    """UTF-8 text split as Scala's ``getLines`` does, which reads with Java's ``BufferedReader.readLine``: a line ends
    at ``\\n``, ``\\r\\n`` or a lone ``\\r`` (old Mac line ends restart as the control run does), no final empty line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedFileError(
            f"not UTF-8 text ({exc.reason})",
            path=path,
            byte=exc.start,
            hint="the file is binary or corrupt; restore it from a backup or rewind past this batch",
        ) from None
    if not text:
        return []
    lines = _LINE_END.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


def open_log(data: bytes, path: str, max_version: int, what: str, body: str, empty_hint: str,
             trim: bool = True) -> tuple[int, list[str]]:
    """The opening every Spark text log file shares: UTF-8 lines, not empty, a ``vN`` header Spark accepts.

    Returns the version and the lines after the header. ``what`` names the log (``"commit log"``), ``body`` what
    follows the header (``"the commit metadata"``), ``empty_hint`` what to do about an empty file; ``trim``: whether
    the log's reader trims the header line before reading it (:func:`parse_version`)."""
    lines = decode_lines(data, path)
    if not lines:
        raise MalformedFileError(f"file is empty: expected a version line, then {body}", path=path, hint=empty_hint)
    return parse_version(lines[0], path, max_version, what, trim), lines[1:]


def parse_version(line: str, path: str, max_version: int, what: str, trim: bool = True) -> int:
    """Validate a ``vN`` header the way Spark's ``MetadataVersionUtil.validateVersion`` does: ``v``, then what
    ``Integer.parseInt`` reads as a positive int (``v01``, ``v+1`` are 1). ``trim``: the line is trimmed first, as
    ``CommitLog`` does; ``OffsetSeqLog`` and the file logs do not (``v1 `` fails there)."""
    text = line.strip() if trim else line
    shown = text if len(text) <= 40 else text[:40] + "..."
    if text.startswith("v") and (number := java_int(text[1:])) is not None and number > 0:
        version = number
        if version > max_version:
            raise NewerVersionError(
                f'line 1 is "{shown}": written by a newer Spark than wmcheck knows (up to v{max_version})',
                path=path,
                hint=f"upgrade wmcheck; this {what} format is not supported yet",
            )
        return version
    raise MalformedFileError(
        f'line 1 is "{shown}": expected a {what} version header like "v1"',
        path=path,
        line=1,
        hint="the file is truncated or not a Spark metadata log file",
    )


_DECODER = json.JSONDecoder()
JSON_SPACE = " \t\r\n"


def first_json_value(text: str) -> Any:
    """The first JSON value of ``text`` as Spark's JSON reader (json4s on Jackson) takes it: leading whitespace
    skipped, whatever follows the value ignored (Jackson does not fail on trailing tokens: a line edited to end in
    ``xyz`` restarts as the control run does); ValueError where no value starts."""
    value, _ = _DECODER.raw_decode(text, len(text) - len(text.lstrip(JSON_SPACE)))
    return value


def offset_json(raw: str) -> Any:
    """A source offset's text as JSON, or None when it is not JSON (kept raw). An object or array is read as Spark's
    sources read theirs (json4s: what follows it is ignored); a number must be the whole text (``LongOffset``: ``toLong``)."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        try:
            value = first_json_value(raw)
        except (ValueError, RecursionError):
            return None
        return value if isinstance(value, (dict, list)) else None


def parse_json(text: str, path: str, line: int | None, what: str) -> Any:
    """Parse a JSON value as Spark does (:func:`first_json_value`), pointing at the line on failure."""
    try:
        return first_json_value(text)
    except (ValueError, RecursionError) as exc:
        shown = text if len(text) <= 60 else text[:60] + "..."
        reason = "too deeply nested" if isinstance(exc, RecursionError) else getattr(exc, "msg", str(exc))
        raise MalformedFileError(
            f"expected {what} as JSON, found {shown!r} ({reason})",
            path=path,
            line=line,
            hint="the file is truncated or was edited by hand; restore it or rewind past this batch",
        ) from None


def parse_json_object(text: str, path: str, line: int | None, what: str) -> dict[str, Any]:
    """Parse a JSON object (anything else is malformed)."""
    value = parse_json(text, path, line, what)
    if not isinstance(value, dict):
        raise MalformedFileError(
            f"expected {what} as a JSON object, found {type(value).__name__}",
            path=path,
            line=line,
            hint="the file was not written by Spark or was edited by hand",
        )
    return value


@overload
def int_field(obj: dict[str, Any], key: str, path: str, line: int | None, default: int, *,
              null_is_absent: bool = False) -> int: ...
@overload
def int_field(obj: dict[str, Any], key: str, path: str, line: int | None, default: None = None, *,
              null_is_absent: bool = False) -> int | None: ...
def int_field(obj: dict[str, Any], key: str, path: str, line: int | None, default: int | None = None, *,
              null_is_absent: bool = False) -> int | None:
    """An integer field (Spark's longs), ``default`` when absent (or null, with ``null_is_absent``: json4s reads a
    null as the field's default where Spark's class gives it one, 0 for a batch's and a commit's watermarks). A JSON
    number with a fraction or an exponent is taken as json4s takes it for a long (``1.704067285E12``,
    ``1704067285000.0``: the double's ``toLong``, toward zero; an integer beyond a long: ``BigInt.longValue``, its
    low 64 bits)."""
    if key not in obj or null_is_absent and obj[key] is None:
        return default
    value = obj[key]
    if isinstance(value, float) and math.isfinite(value):
        return max(LONG_MIN, min(LONG_MAX, int(value)))
    if isinstance(value, int) and not isinstance(value, bool) and not LONG_MIN <= value <= LONG_MAX:
        return (value - LONG_MIN) % (1 << 64) + LONG_MIN
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedFileError(
            f"expected {key} to be an integer (a Java long), found {json.dumps(value)[:40]}",
            path=path,
            line=line,
            hint="the file was edited by hand or written by an unknown tool",
        )
    return value


def dump_json(value: Any) -> str:
    """Compact JSON the way Spark's json4s writes it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
