"""Epoch-millisecond times: display in a time zone, parse user input (ISO, epoch ms, durations)."""
from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone, tzinfo

from .errors import CheckpointError

UNIT_MS = {
    "ms": 1, "milli": 1, "millis": 1, "millisecond": 1, "milliseconds": 1,
    "s": 1000, "sec": 1000, "secs": 1000, "second": 1000, "seconds": 1000,
    "m": 60_000, "min": 60_000, "mins": 60_000, "minute": 60_000, "minutes": 60_000,
    "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
    "w": 604_800_000, "week": 604_800_000, "weeks": 604_800_000,
}
DURATION_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]+)")
ANCHORS = ("now", "watermark")


def zone(name: str | None) -> tzinfo:
    """``UTC`` (default: None), ``local`` or an IANA zone name; an empty name is refused."""
    if name is not None and not name.strip():
        raise CheckpointError("empty time zone name", hint="use UTC, local or an IANA name like Europe/Berlin", param="tz")
    if name is None or name.upper() == "UTC":
        return timezone.utc
    if name == "local":
        return datetime.now().astimezone().tzinfo or timezone.utc
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CheckpointError(f"unknown time zone {name!r}", hint="use UTC, local or an IANA name like Europe/Berlin",
                              param="tz") from None


def format_ms(ms: int | None, tz: tzinfo = timezone.utc) -> str | None:
    """ISO-8601 with milliseconds; ``Z`` for UTC."""
    if ms is None:
        return None
    try:
        when = datetime.fromtimestamp(ms / 1000, tz)
    except (OverflowError, OSError, ValueError):
        return f"{ms} ms (out of range)"
    text = when.isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def format_duration(ms: int | None) -> str | None:
    """``1d 2h 3m 4.500s`` style, signed; seconds with their milliseconds (``24.780s``), whole ones bare (``8s``)."""
    if ms is None:
        return None
    sign, ms = ("-", -ms) if ms < 0 else ("", ms)
    days, rest = divmod(ms, 86_400_000)
    hours, rest = divmod(rest, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds = rest / 1000
    parts = [f"{days}d"] if days else []
    parts += [f"{hours}h"] if hours else []
    parts += [f"{minutes}m"] if minutes else []
    if seconds or not parts:
        parts.append(f"{rest // 1000}s" if rest % 1000 == 0 else f"{seconds:.3f}s")
    return sign + " ".join(parts)


def parse_duration_ms(text: str) -> int:
    """Spark-style durations: ``10 seconds``, ``2 hours 30 minutes``, ``1500ms``; may start with ``-``."""
    body = text.strip()
    sign = -1 if body.startswith("-") else 1
    body = body.lstrip("+-").strip()
    pos, total = 0, 0.0
    while pos < len(body):
        match = DURATION_PART.match(body, pos)
        if not match or match[2].lower() not in UNIT_MS:
            raise CheckpointError(
                f"cannot read {text!r} as a duration",
                hint='write it like Spark does: "10 seconds", "2 hours", "1 day 6 hours", "500 ms"',
            )
        total += float(match[1]) * UNIT_MS[match[2].lower()]
        pos = match.end()
    if pos == 0:
        raise CheckpointError(f"cannot read {text!r} as a duration", hint='e.g. "-2 hours"')
    return sign * int(total)


def parse_time_ms(text: str, *, now_ms: int | None = None, watermark_ms: int | None = None, default_anchor: str = "now") -> int:
    """A point in time as epoch ms.

    Accepts epoch milliseconds (``1704067200000``), ISO-8601 (``2024-01-01T00:00:00Z``; no zone
    means UTC), and durations relative to an anchor: ``now-2 hours``, ``watermark-30 minutes``,
    or a bare ``-2 hours`` relative to ``default_anchor``.
    """
    body = text.strip()
    if re.fullmatch(r"-?\d+", body):
        return int(body)
    lowered = body.lower()
    anchor = next((a for a in ANCHORS if lowered.startswith(a)), None)
    if anchor or body[:1] in "+-":
        rest = body[len(anchor):] if anchor else body
        anchor = anchor or default_anchor
        base = watermark_ms if anchor == "watermark" else (now_ms if now_ms is not None else int(time.time() * 1000))
        if base is None:
            raise CheckpointError(f"{text!r} is relative to the watermark, which is not known here")
        return base + (parse_duration_ms(rest) if rest.strip() else 0)
    try:
        when = datetime.fromisoformat(body.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise CheckpointError(
            f"cannot read {text!r} as a time",
            hint='use ISO-8601 (2024-01-01T00:00:00Z), epoch milliseconds, or a duration like "watermark-2 hours"',
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return int((when - datetime(1970, 1, 1, tzinfo=timezone.utc)) / timedelta(milliseconds=1))
