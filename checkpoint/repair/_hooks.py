"""Test hooks of repairs and undo, kept out of the public signatures: a fixed clock and a simulated crash."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from wmcheck.checkpoint.records import dataclass


@dataclass(frozen=True)
class Hooks:
    now: int | None = None
    """The clock (epoch ms) instead of the real one."""
    fail_after: int | None = None
    """Raise ``InjectedFailure`` once this many steps are done (or reverted)."""


NONE = Hooks()
_CURRENT: ContextVar[Hooks] = ContextVar("wmcheck_repair_hooks", default=NONE)


def current() -> Hooks:
    return _CURRENT.get()


@contextmanager
def injected(now: int | None = None, fail_after: int | None = None) -> Iterator[None]:
    """Run the repairs and undos inside the ``with`` block with these hooks."""
    token = _CURRENT.set(Hooks(now, fail_after))
    try:
        yield
    finally:
        _CURRENT.reset(token)
