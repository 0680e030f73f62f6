"""Findings, and the registry of checks: one stable code, one severity and one title per check."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable

if TYPE_CHECKING:
    from .context import Context

ERROR, WARNING = "error", "warning"
SEVERITIES = (ERROR, WARNING)


@dataclass(frozen=True)
class Finding:
    """One problem: ``path`` is relative to ``checkpoint``; ``message`` says what is wrong and what to do."""

    code: str
    severity: str
    checkpoint: str
    path: str
    message: str


Issue = tuple[str, str]
"""What a check yields: (path relative to the checkpoint, message with a hint)."""


@dataclass(frozen=True)
class Check:
    """A registered check; ``run`` is None for codes reported outside the checks (WM000)."""

    code: str
    severity: str
    title: str
    run: Callable[["Context"], Iterable[Issue]] | None
    needs_sink: bool = False


CHECKS: dict[str, Check] = {}


def register(code: str, severity: str, title: str, *, needs_sink: bool = False) -> Callable:
    """Decorator: add a check function under ``code``."""

    def decorate(fn: Callable[["Context"], Iterable[Issue]]) -> Callable:
        add(Check(code, severity, title, fn, needs_sink))
        return fn

    return decorate


def add(check: Check) -> None:
    if check.code in CHECKS or check.severity not in SEVERITIES:
        raise ValueError(f"check {check.code} registered twice or with an unknown severity")
    ordered = sorted([*CHECKS.values(), check], key=lambda c: c.code)
    CHECKS.clear()
    CHECKS.update((c.code, c) for c in ordered)


OPEN_FAILED = "WM000"
add(Check(OPEN_FAILED, ERROR, "checkpoint cannot be opened", None))
