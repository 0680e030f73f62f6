"""Numbers in file names and text headers: ASCII digits only (``str.isdigit`` also accepts ``²`` and ``٣``)."""
from __future__ import annotations

LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
MAX_DIGITS = 19
"""Spark's ids are Java longs: at most 19 digits."""


def is_number(text: str) -> bool:
    """Whether ``text`` is a non-negative decimal a Java long can hold the digits of (``0``-``9`` only)."""
    return 0 < len(text) <= MAX_DIGITS and text.isascii() and text.isdigit()
