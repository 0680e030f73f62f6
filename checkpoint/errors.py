"""One exception hierarchy for everything wmcheck reports about its input or refuses to do, and how messages
name the parameters of the library: as placeholders (:func:`arg`) that each caller spells its way (the Python
API by parameter name, the command line by flag)."""
from __future__ import annotations

import contextlib
import re
from typing import Callable, Iterator

Spelling = Callable[[str, "str | None"], str]
"""How a caller names a parameter (and the value given for it, or an example) in a message."""

_PLACEHOLDER = re.compile(r"\{\{([a-z_]+)(?:=(.*?))?\}\}")


def arg(name: str, value: object = None) -> str:
    """A placeholder for the library parameter ``name`` (with ``value``: as passed, or an example) in a message,
    a hint or a result's text; :func:`spelled` turns it into what the reader passes."""
    return f"{{{{{name}}}}}" if value is None else f"{{{{{name}={value}}}}}"


PYTHON_WORDING = {"debug": "the chained exception (__cause__)"}
"""What the Python API says for a placeholder that only the command line has a parameter for."""


def python_spelling(name: str, value: str | None) -> str:
    """Parameters as the Python API takes them: ``name`` or ``name=value``."""
    if name in PYTHON_WORDING:
        return PYTHON_WORDING[name]
    return name if value is None else f"{name}={value}"


def spelled(text: str, spelling: Spelling = python_spelling) -> str:
    """``text`` with every :func:`arg` placeholder spelled by ``spelling``."""
    return _PLACEHOLDER.sub(lambda m: spelling(m[1], m[2]), text) if "{{" in text else text


class CheckpointError(Exception):
    """A problem with a checkpoint, a file in it, or a request about it.

    ``path`` is relative to the checkpoint root where possible, ``line`` (1-based) or
    ``byte`` (0-based offset) locate the problem inside the file, ``hint`` says what to do, ``param`` names the
    library parameter whose value is wrong or missing. ``message`` and ``hint`` name parameters by :func:`arg`
    placeholders: ``str()`` spells them as the Python API takes them, :meth:`text` as a caller's ``spelling`` says.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        byte: int | None = None,
        hint: str | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.line = line
        self.byte = byte
        self.hint = hint
        self.param = param

    @property
    def where(self) -> str:
        """``path: line N`` (or ``byte N``), as much of it as is known."""
        parts = [self.path] if self.path else []
        if self.line is not None:
            parts.append(f"line {self.line}")
        elif self.byte is not None:
            parts.append(f"byte {self.byte}")
        return ": ".join(parts)

    def text(self, spelling: Spelling = python_spelling) -> str:
        """The error in one line: where, what, and the hint, parameters spelled by ``spelling``."""
        text = f"{self.where}: {self.message}" if self.where else self.message
        return spelled(f"{text} (hint: {self.hint})" if self.hint else text, spelling)

    def __str__(self) -> str:
        return self.text()


@contextlib.contextmanager
def on_param(param: str) -> Iterator[None]:
    """Blame ``param`` for a :class:`CheckpointError` raised inside (one that names no parameter itself): the value
    being read or used is that parameter's, so the error says which option to change."""
    try:
        yield
    except CheckpointError as exc:
        if exc.param is None:
            exc.param = param
        raise


class MalformedFileError(CheckpointError):
    """A file does not have the shape Spark writes."""


class NewerVersionError(CheckpointError):
    """A file carries a format version newer than wmcheck knows."""


class NotACheckpointError(CheckpointError):
    """The location is not a Structured Streaming checkpoint at all.

    ``suggested``: the checkpoint the caller most likely meant (the one below the location, or the one holding it),
    when there is one."""

    suggested: str | None = None


class MissingFileError(CheckpointError):
    """A file or directory that should exist does not."""


class UnsupportedError(CheckpointError):
    """Valid input that wmcheck cannot handle (a URI scheme, a source kind, ...)."""


class RefusedError(CheckpointError):
    """A change was refused because it could lose data or the checkpoint looks in use.

    ``oldest_batch``: for a refused rewind, the oldest batch the checkpoint can be rewound to (None: none)."""

    oldest_batch: int | None = None


class SparkUnavailableError(CheckpointError):
    """pyspark or a suitable Java is missing, or the Spark session failed to start."""
