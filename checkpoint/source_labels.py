"""Which input each source is: its id (the name of a named source in offsets v2), kind, and where it reads from."""
from __future__ import annotations

from wmcheck.checkpoint.logs.source_offsets import SourceOffset
from wmcheck.checkpoint.records import dataclass

from .model import Checkpoint
from .sources.file import file_source_dir as file_source_dir
from .sources.registry import source_kind


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


def label(ckpt: Checkpoint, src: SourceOffset) -> SourceLabel:
    """The label of one source offset of the checkpoint."""
    kind = source_kind(ckpt, src)
    return SourceLabel(src.source_id, kind.name, kind.location(ckpt, src))


def source_labels(ckpt: Checkpoint) -> dict[str, SourceLabel]:
    """Every source of the last batch that parses, by source id (in offsets order)."""
    last = ckpt.last_readable_batch
    if last is None:
        return {}
    return {src.source_id: label(ckpt, src) for src in ckpt.offsets(last).sources}
