"""File sources (``FileStreamSource``): the offset ``{"logOffset": n}`` is a batch of the source's log ``sources/<i>/``,
which names the files each batch read (``FileStreamSource.getBatch`` asks ``FileStreamSourceLog.get(start + 1, end)``)."""
from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, Any, Callable, Iterable

from wmcheck.checkpoint.errors import MissingFileError
from wmcheck.checkpoint.fs import local_path
from wmcheck.checkpoint.layout import COMPACT_SUFFIX
from wmcheck.checkpoint.locations import map_location, spark_location, stat_locations
from wmcheck.checkpoint.logs.log_kinds import FILE_SOURCE_LOG
from wmcheck.checkpoint.numbers import is_long, is_number

from .protocol import InputFile, InputRequest, SourceInput, SourceKind

if TYPE_CHECKING:
    from wmcheck.checkpoint.logs.source_offsets import SourceOffset

    from .protocol import CheckpointReads


class FileSource(SourceKind):
    name = "file"
    restarts_from_offsets = False
    position = "log batch"

    def matches(self, src: SourceOffset) -> bool:
        value = src.value
        return isinstance(value, dict) and set(value) == {"logOffset"} and is_long(value["logOffset"])

    def log_offset(self, src: SourceOffset) -> int | None:
        return src.value["logOffset"]

    def summary(self, src: SourceOffset) -> str:
        return f"file log batch {self.log_offset(src)}"

    def location(self, ckpt: CheckpointReads, src: SourceOffset) -> str | None:
        return file_source_dir(ckpt, src.source_id)

    def cannot_read(self, after: SourceOffset) -> bool:
        """A later offset Spark cannot read as ``FileStreamSourceOffset``: not a JSON object with a number as
        ``logOffset`` (json4s takes 9.0 as 9; ``null``, ``{}`` or ``"9"`` fail), nor the legacy bare long."""
        if after.raw is None or after.source.recognised:
            return False
        value = after.value
        number = value.get("logOffset") if isinstance(value, dict) else None
        return not (isinstance(number, (int, float)) and not isinstance(number, bool))

    def batch_input(self, ckpt: CheckpointReads, batch: int, src: SourceOffset, prev: SourceOffset | None,
                    request: InputRequest) -> SourceInput:
        first = (prev.log_offset if prev is not None and prev.log_offset is not None else -1) + 1
        end = src.log_offset
        assert end is not None  # a file source's offset is a log batch
        log_batches = tuple(range(first, end + 1))
        entries = source_log_entries(ckpt, src.source_id, log_batches)
        locations = [map_location(spark_location(path), request.path_map) for _, path in entries]
        found = stat_locations(locations, request.fs_options, ckpt.fs) if request.sizes else {}
        files = tuple(
            InputFile(path, loc, batch, found.get(loc, (None, None))[1], found.get(loc, (None, None))[0])
            for (batch, path), loc in zip(entries, locations)
        )
        return SourceInput(src.source_id, self.name, prev, src, files=files, log_batches=log_batches)

    def rewind_position(self, src: SourceOffset) -> str:
        return str(src.log_offset)

    def input_text(self, src: SourceInput) -> str | None:
        batches = src.log_batches
        if not batches:
            return "no new files"
        return f"log batch {batches[0]}" if len(batches) == 1 else f"log batches {batches[0]}..{batches[-1]}"

    def input_fields(self, src: SourceInput, plain: Callable[[Any], Any]) -> dict[str, Any]:
        return {"log_batches": list(src.log_batches), "num_files": len(src.files), "bytes": src.total_bytes,
                "missing_files": len(src.missing), "files": plain(src.files)}

    def input_counts(self, src: SourceInput) -> tuple[int | None, int | None, int | None]:
        return len(src.files), src.total_bytes, len(src.missing)


FILE = FileSource()


def logged_file_source(ckpt: CheckpointReads, src: SourceOffset) -> bool:
    """Whether ``src`` is a file source's ``{"logOffset": n}`` whose log ``sources/<i>/`` is there."""
    return src.source is FILE and is_number(src.source_id) and int(src.source_id) in ckpt.source_dirs


def source_log_entries(ckpt: CheckpointReads, source_id: str, log_batches: Iterable[int]) -> list[tuple[int, str]]:
    """(log batch, logged path) of the given file-source log batches, read from ``N`` or a later ``K.compact``."""
    wanted = list(log_batches)
    if not wanted:
        return []
    log = ckpt.metadata_log(FILE_SOURCE_LOG.folder(source_id))
    out: list[tuple[int, str]] = []
    for batch in wanted:
        path = log.holder(batch)
        if path is None:
            raise MissingFileError(
                f"file-source log batch {batch} is missing (no {batch} file and no later .compact file)",
                path=FILE_SOURCE_LOG.path(batch, FILE_SOURCE_LOG.folder(source_id)),
                hint="the source log was purged or damaged: the files of this batch are not recorded anywhere",
            )
        entries = ckpt.file_log(path).entries
        out += [(batch, e.path) for e in entries if e.batch_id == batch] if path.endswith(COMPACT_SUFFIX) else \
            [(batch, e.path) for e in entries]
    return out


def file_source_dir(ckpt: CheckpointReads, source_id: str) -> str | None:
    """The directory a file source reads: the common directory of the files in its newest log file."""
    if not is_number(source_id) or int(source_id) not in ckpt.source_dirs:
        return None
    log = ckpt.metadata_log(FILE_SOURCE_LOG.folder(source_id))
    if not log.log_files:
        return None
    entries = ckpt.file_log(log.log_files[-1].path).entries
    dirs = {posixpath.dirname(local_path(spark_location(e.path)) or spark_location(e.path)) for e in entries}
    if len(dirs) > 1 and len({d.startswith("/") for d in dirs}) > 1:
        return None  # local paths beside URIs of another file system: no common directory
    common = dirs.pop() if len(dirs) == 1 else posixpath.commonpath(sorted(dirs)) if dirs else None
    return common[len("file:"):] if common is not None and common.startswith("file:/") else common
