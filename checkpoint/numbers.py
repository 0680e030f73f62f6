"""Numbers in file names and text headers: those Spark writes (ASCII digits only: ``str.isdigit`` also accepts ``²`` and
``٣``), and those Java's ``Long.parseLong`` and ``Integer.parseInt`` read when Spark reads a name or a header."""
from __future__ import annotations

import unicodedata

LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
MAX_DIGITS = 19
"""Spark's ids are Java longs: at most 19 digits."""


def is_long(value: object) -> bool:
    """An integer a Java long holds (JSON allows any size)."""
    return isinstance(value, int) and not isinstance(value, bool) and LONG_MIN <= value <= LONG_MAX


def is_number(text: str) -> bool:
    """Whether ``text`` is a non-negative decimal a Java long can hold the digits of (``0``-``9`` only)."""
    return 0 < len(text) <= MAX_DIGITS and text.isascii() and text.isdigit()


def java_long(text: str) -> int | None:
    """``text`` as Spark's ``String.toLong`` (Java's ``Long.parseLong``) reads it, which is how ``HDFSMetadataLog`` tells
    batch files: an optional sign, then decimal digits of any script Java's ``Character.digit`` knows, in a long's
    range (``013``, ``+13`` and ``\u0661\u0663`` are 13; ``\u00b2`` is no digit); None if it fails."""
    return _java_integer(text, LONG_MIN, LONG_MAX)


def java_int(text: str) -> int | None:
    """``text`` as ``String.toInt`` (Java's ``Integer.parseInt``) reads it: as :func:`java_long`, in an int's range."""
    return _java_integer(text, INT_MIN, INT_MAX)


def _java_integer(text: str, low: int, high: int) -> int | None:
    sign, digits = (text[:1], text[1:]) if text[:1] in "+-" else ("", text)
    if not digits or not digits.isdecimal() or max(map(ord, digits)) > 0xFFFF:  # Java reads a UTF-16 unit at a time
        return None
    significant = "".join(str(unicodedata.decimal(c)) for c in digits).lstrip("0") or "0"
    if len(significant) > MAX_DIGITS:
        return None
    value = int(sign + significant)
    return value if low <= value <= high else None


def is_canonical(text: str) -> bool:
    """Whether ``text`` is the name Spark gives a batch file: the id in plain decimal (``13``, not ``013`` or ``+13``)."""
    return is_number(text) and str(int(text)) == text
