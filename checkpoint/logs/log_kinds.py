"""Where a metadata log is and how its files parse (:class:`LogKind`), and the two logs of file sources and file sinks;
apart from :mod:`.metadata_log` (which adds the offset and commit logs) so that what reads a file source's log
needs no offsets parser."""
from __future__ import annotations

from typing import Callable, Generic, TypeVar

from wmcheck.checkpoint.layout import SINK_LOG, SOURCES
from wmcheck.checkpoint.logs.file_logs import FileLog, parse_file_log
from wmcheck.checkpoint.records import dataclass

T = TypeVar("T")


@dataclass(frozen=True)
class LogKind(Generic[T]):
    """One kind of Spark metadata log, as ``HDFSMetadataLog`` and its subclasses define it: where it is (a file source
    has one per source, ``sources/<id>``), how its files parse, and, for a ``CompactibleFileStreamLog``, the conf of
    its compact interval. Spark purges offsets and commits below ``spark.sql.streaming.minBatchesToRetain``; a
    compactible log is never purged, its files held by a compact file are deleted instead."""

    name: str
    directory: str
    parse: Callable[[bytes, str], T]
    interval_conf: str | None = None
    """None: never compacted."""

    def folder(self, source: object = None) -> str:
        """The log's directory: ``sources/<source>`` for a file source."""
        return self.directory if source is None else f"{self.directory}/{source}"

    def path(self, batch: int, folder: str | None = None) -> str:
        """The file of ``batch`` in a log that is not compacted (``offsets/12``)."""
        return f"{folder or self.directory}/{batch}"


FILE_SOURCE_LOG: LogKind[FileLog] = LogKind("file source", SOURCES, parse_file_log,
                                            "spark.sql.streaming.fileSource.log.compactInterval")
FILE_SINK_LOG: LogKind[FileLog] = LogKind("file sink", SINK_LOG, parse_file_log,
                                          "spark.sql.streaming.fileSink.log.compactInterval")
