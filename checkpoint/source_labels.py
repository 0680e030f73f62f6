"""Which input each source is: its id (the name of a named source in offsets v2), kind, and where it reads from."""
from __future__ import annotations

import posixpath

from wmcheck.checkpoint.logs.metadata_log import FILE_SOURCE_LOG
from wmcheck.checkpoint.logs.source_offsets import SourceOffset
from wmcheck.checkpoint.records import dataclass

from .batch_inputs import source_kind, spark_location
from .fs import local_path
from .model import Checkpoint
from .numbers import is_number


@dataclass(frozen=True)
class SourceLabel:
    """One source: ``location`` is a file source's input directory (from its logged files), a Kafka
    source's topics, or a Delta source's table id; None when the checkpoint does not say."""

    source_id: str
    kind: str
    location: str | None

    @property
    def text(self) -> str:
        """``1 (file /data/in/right)``: how messages name the source."""
        where = f" {self.location}" if self.location else ""
        return f"{self.source_id} ({self.kind}{where})"

    @property
    def short(self) -> str:
        """``1 file …/input/right``: for table cells and picture lanes."""
        where = self.location or ""
        parts = where.rstrip("/").split("/")
        if where.startswith("/") and len(parts) > 3:
            where = "…/" + "/".join(parts[-2:])
        return f"{self.source_id} {self.kind} {where}".strip()


def file_source_dir(ckpt: Checkpoint, source_id: str) -> str | None:
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


def label(ckpt: Checkpoint, src: SourceOffset) -> SourceLabel:
    """The label of one source offset of the checkpoint."""
    kind = source_kind(ckpt, src)
    location = None
    if kind == "file":
        location = file_source_dir(ckpt, src.source_id)
    elif kind == "kafka":
        location = "topics " + ", ".join(sorted(src.kafka_offsets or {}))
    elif kind == "delta" and isinstance(src.value, dict) and src.value.get("reservoirId"):
        location = f"table {src.value['reservoirId']}"
    return SourceLabel(src.source_id, kind, location)


def source_labels(ckpt: Checkpoint) -> dict[str, SourceLabel]:
    """Every source of the last batch that parses, by source id (in offsets order)."""
    last = ckpt.last_readable_batch
    if last is None:
        return {}
    return {src.source_id: label(ckpt, src) for src in ckpt.offsets(last).sources}
