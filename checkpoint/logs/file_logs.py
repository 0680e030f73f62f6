"""File-source logs (``sources/<i>/N``) and the file-sink log (``_spark_metadata/N``), with compaction."""
from __future__ import annotations

from typing import Any, Mapping

from wmcheck.checkpoint.errors import MalformedFileError
from wmcheck.checkpoint.logs.textlog import int_field, open_log, parse_json_object
from wmcheck.checkpoint.records import dataclass

MAX_VERSION = 1


@dataclass(frozen=True)
class FileLogEntry:
    """One line: a file the source saw or the sink wrote; ``raw`` is the line exactly as read."""

    raw: str
    fields: Mapping[str, Any]
    path: str
    batch_id: int | None

    @property
    def action(self) -> str:
        """``add`` or ``delete`` (sink logs); sources only add."""
        return str(self.fields.get("action", "add"))

    @property
    def size(self) -> int | None:
        """The file's size in bytes as the sink log records it (None when it does not, or not as a number)."""
        size = self.fields.get("size")
        return size if isinstance(size, int) and not isinstance(size, bool) else None


@dataclass(frozen=True)
class FileLog:
    """One log file: ``N`` or ``N.compact``."""

    version: int
    entries: tuple[FileLogEntry, ...]


def parse_file_log(data: bytes, path: str) -> FileLog:
    """Parse a file-source or file-sink log file."""
    version, lines = open_log(data, path, MAX_VERSION, "file log", "one JSON line per file",
                              "an empty log file is left by a crash while writing", trim=False)
    entries = []
    for number, line in enumerate(lines, start=2):
        obj = parse_json_object(line, path, number, "a file entry")
        file_path = obj.get("path")
        if not isinstance(file_path, str):
            raise MalformedFileError(
                'expected a "path" string in the file entry', path=path, line=number, hint="the log was edited by hand"
            )
        entries.append(FileLogEntry(line, obj, file_path, int_field(obj, "batchId", path, number)))
    return FileLog(version, tuple(entries))


def serialize_file_log(log: FileLog) -> bytes:
    """Write a log file as Spark does: the version line, then each entry's line as read."""
    return "\n".join([f"v{log.version}", *(e.raw for e in log.entries)]).encode("utf-8")
