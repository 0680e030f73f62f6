"""A finding's fix as the command line prints it: the ``wmcheck`` command that runs its request (each parameter
spelled as its flag, every word quoted for a POSIX shell), or its instruction, marked as one."""
from __future__ import annotations

import dataclasses
import shlex
from typing import Any, Iterator, Mapping

from wmcheck.checkpoint.checks.definition import Fix, Instruction

from .flags import cli_spelling

BY_HAND = "by hand: "
"""How an instruction starts: no wmcheck command does it."""


def arguments(request: Any) -> Iterator[tuple[str, Any]]:
    """(parameter, value) of every parameter a request gives: not None, not False, not empty; those of the session
    that runs it (fields that take no part in comparison, such as Spark's runner) are left out."""
    for field in dataclasses.fields(request):
        value = getattr(request, field.name)
        if field.compare and value is not None and value is not False and value != {} and value != ():
            yield field.name, value


def command_words(request: Any, checkpoint: str, sink: str | None = None) -> list[str]:
    """``wmcheck COMMAND CHECKPOINT --flag value ...``; ``sink`` stands for the request's file sink when given
    (``SINK`` in the docs)."""
    words = ["wmcheck", request.command, checkpoint]
    for name, value in arguments(request):
        flag = cli_spelling(name, None)
        if value is True:
            words.append(flag)
        elif isinstance(value, Mapping):
            for key, to in value.items():
                words += [flag, f"{key}={to}"]
        elif isinstance(value, tuple):  # a repeatable flag
            for item in value:
                words += [flag, str(item)]
        else:
            words += [flag, sink if name == "file_sink" and sink is not None else str(value)]
    return words


def fix_text(fix: Fix, checkpoint: str, sink: str | None = None) -> str:
    """The fix in one line: a command line to run, or ``by hand: ...``."""
    if isinstance(fix, Instruction):
        return BY_HAND + fix.text
    return " ".join(shlex.quote(w) for w in command_words(fix, checkpoint, sink))


def fix_doc(fix: Fix, checkpoint: str) -> dict[str, Any]:
    """The fix in JSON: its kind (the wmcheck command, or ``instruction``), its text, and the request's parameters
    (None for an instruction)."""
    if isinstance(fix, Instruction):
        return {"kind": "instruction", "text": fix.text, "request": None}
    return {"kind": fix.command, "text": fix_text(fix, checkpoint), "request": dict(arguments(fix))}
