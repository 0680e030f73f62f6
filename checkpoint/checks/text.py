"""Small wording helpers shared by the checks' messages."""
from __future__ import annotations


def span(lo: int, hi: int) -> str:
    """``3`` or ``3..5``."""
    return str(lo) if lo == hi else f"{lo}..{hi}"


def plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {many or word + 's'}"


def listed(items: list[str], limit: int = 5) -> str:
    """The first ``limit`` items, then how many more."""
    return ", ".join(items[:limit]) + (f" and {len(items) - limit} more" if len(items) > limit else "")
