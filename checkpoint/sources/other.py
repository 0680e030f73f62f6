"""The offsets of no kind of their own: a bare long (``LongOffset``: rate, socket and memory sources, and Spark 2.1's file
source, whose ``sources/<i>/`` log tells it apart), Spark's ``-`` (no offset yet), and JSON wmcheck does not recognise."""
from __future__ import annotations

from typing import TYPE_CHECKING

from wmcheck.checkpoint.numbers import is_long, is_number

from .file import FILE
from .protocol import InputRequest, SourceInput, SourceKind, not_rebuilt

if TYPE_CHECKING:
    from wmcheck.checkpoint.logs.source_offsets import SourceOffset

    from .protocol import CheckpointReads


class LongOffset(SourceKind):
    name = "long"
    restarts_from_offsets = False

    def matches(self, src: SourceOffset) -> bool:
        return src.raw is not None and is_long(src.value)

    def resolve(self, ckpt: CheckpointReads, src: SourceOffset) -> SourceKind:
        """A bare long with a ``sources/<id>/`` log is the legacy file-source offset."""
        return FILE if is_number(src.source_id) and int(src.source_id) in ckpt.source_dirs else self

    def log_offset(self, src: SourceOffset) -> int | None:
        return src.value


class NoOffset(SourceKind):
    name = "none"
    recognised = False
    restarts_from_offsets = False

    def matches(self, src: SourceOffset) -> bool:
        return src.raw is None

    def batch_input(self, ckpt: CheckpointReads, batch: int, src: SourceOffset, prev: SourceOffset | None,
                    request: InputRequest) -> SourceInput:
        return SourceInput(src.source_id, self.name, prev, src, note="no offset yet: the source read nothing")


class UnknownOffset(SourceKind):
    name = "unknown"
    recognised = False

    def matches(self, src: SourceOffset) -> bool:
        return True

    def batch_input(self, ckpt: CheckpointReads, batch: int, src: SourceOffset, prev: SourceOffset | None,
                    request: InputRequest) -> SourceInput:
        return not_rebuilt(self.name, src, prev, f" ({src.raw})" if src.raw and len(src.raw) <= 80 else "")


LONG, NONE, UNKNOWN = LongOffset(), NoOffset(), UnknownOffset()
