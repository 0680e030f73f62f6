"""One exception hierarchy for everything wmcheck reports about its input or refuses to do."""
from __future__ import annotations


class CheckpointError(Exception):
    """A problem with a checkpoint, a file in it, or a request about it.

    ``path`` is relative to the checkpoint root where possible, ``line`` (1-based) or
    ``byte`` (0-based offset) locate the problem inside the file, ``hint`` says what to do.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        byte: int | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.line = line
        self.byte = byte
        self.hint = hint

    @property
    def where(self) -> str:
        """``path: line N`` (or ``byte N``), as much of it as is known."""
        parts = [self.path] if self.path else []
        if self.line is not None:
            parts.append(f"line {self.line}")
        elif self.byte is not None:
            parts.append(f"byte {self.byte}")
        return ": ".join(parts)

    def __str__(self) -> str:
        text = f"{self.where}: {self.message}" if self.where else self.message
        return f"{text} (hint: {self.hint})" if self.hint else text


class MalformedFileError(CheckpointError):
    """A file does not have the shape Spark writes."""


class NewerVersionError(CheckpointError):
    """A file carries a format version newer than wmcheck knows."""


class NotACheckpointError(CheckpointError):
    """The location is not a Structured Streaming checkpoint at all."""


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
