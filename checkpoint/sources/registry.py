"""Every kind of source wmcheck knows, in the order an offset is matched against them (the first that matches is its
kind; :data:`~.other.UNKNOWN` matches any). A new kind is a module of :mod:`wmcheck.checkpoint.sources` implementing
:class:`~.protocol.SourceKind`, listed here."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .delta import DELTA
from .file import FILE
from .kafka import KAFKA
from .other import LONG, NONE, UNKNOWN
from .protocol import SourceKind

if TYPE_CHECKING:
    from wmcheck.checkpoint.logs.source_offsets import SourceOffset

    from .protocol import CheckpointReads

KINDS: tuple[SourceKind, ...] = (NONE, LONG, FILE, DELTA, KAFKA, UNKNOWN)


def offset_kind(src: SourceOffset) -> SourceKind:
    """The kind ``src``'s shape tells (``SourceOffset.source``)."""
    return next(k for k in KINDS if k.matches(src))


def source_kind(ckpt: CheckpointReads, src: SourceOffset) -> SourceKind:
    """The kind of ``src`` in ``ckpt`` (a bare long with a ``sources/<id>/`` log is the legacy file-source offset)."""
    return src.source.resolve(ckpt, src)


def kind_named(name: str) -> SourceKind:
    """The kind an input or a label names (``SourceInput.kind``)."""
    return next(k for k in KINDS if k.name == name)
