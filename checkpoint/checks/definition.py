"""What a check is: its code, severity and title, what it yields, and the findings it becomes."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Final, Iterable, Literal, NamedTuple, Union, get_args

from wmcheck.checkpoint.records import dataclass

if TYPE_CHECKING:
    from ..repair.requests import RepairRequest, UndoRequest
    from .context import Context

Severity = Literal["error", "warning"]
ERROR: Final = "error"
WARNING: Final = "warning"
SEVERITIES: tuple[Severity, ...] = get_args(Severity)


@dataclass(frozen=True)
class Instruction:
    """A fix no wmcheck command carries out: something to do by hand (restore a file from a backup, send data)."""

    text: str


Fix = Union["RepairRequest", "UndoRequest", Instruction]
"""What a finding says to do: the request of the wmcheck repair that fixes it (``repair.run`` takes it, or
``repair.undo_repair`` an :class:`UndoRequest`), or an instruction, which says it is one."""


@dataclass(frozen=True)
class Finding:
    """One problem: ``path`` is relative to ``checkpoint``; ``message`` says what is wrong and what Spark does with
    it; ``fix`` is what to do: the request of the wmcheck repair that fixes it, or an instruction."""

    code: str
    severity: Severity
    checkpoint: str
    path: str
    message: str
    fix: Fix


class Issue(NamedTuple):
    """What a check yields: the path relative to the checkpoint, the message, the fix."""

    path: str
    message: str
    fix: Fix


@dataclass(frozen=True)
class Check:
    """A check of the registry; ``run`` is None for codes reported outside the checks (WM000)."""

    code: str
    severity: Severity
    title: str
    run: Callable[["Context"], Iterable[Issue]] | None
    needs_sink: bool = False

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"check {self.code}: unknown severity {self.severity!r}")


def check(code: str, severity: Severity, title: str, *, needs_sink: bool = False) -> Callable[..., Check]:
    """Decorator: the function as a :class:`Check` under ``code`` (listed in :mod:`.registry` to run)."""

    def define(fn: Callable[["Context"], Iterable[Issue]]) -> Check:
        return Check(code, severity, title, fn, needs_sink)

    return define
