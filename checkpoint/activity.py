"""Whether a query looks active: what the repair guard refuses and ``check`` says of in-flight temp files."""
from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from .errors import arg
from .model import COMMITS, OFFSETS, Checkpoint
from .timeutil import format_duration

DEFAULT_IDLE_MS = 10 * 60_000
"""A query that changed offsets/, commits/ or state/ within this long is taken to be running."""


def now_ms() -> int:
    return int(time.time() * 1000)


def newest_recent(ckpt: Checkpoint, idle_ms: int, now: int, ignore: frozenset[str] = frozenset()) -> Any | None:
    """The newest file in offsets/, commits/ or state/ (not in ``ignore``) if it changed within ``idle_ms``."""
    if idle_ms <= 0:
        return None
    newest = None
    for info in [*ckpt.fs.list_dir(OFFSETS), *ckpt.fs.list_dir(COMMITS), *_state_infos(ckpt)]:
        if not getattr(info, "is_dir", False) and info.path not in ignore and (newest is None or info.mtime_ms > newest.mtime_ms):
            newest = info
    return None if newest is None or newest.mtime_ms < now - idle_ms else newest


def recent_activity(ckpt: Checkpoint, idle_ms: int, now: int, ignore: frozenset[str] = frozenset()) -> str | None:
    """Why the query looks active: the newest file in offsets/, commits/ or state/ changed within ``idle_ms``."""
    newest = newest_recent(ckpt, idle_ms, now, ignore)
    if newest is None:
        return None
    return (f"the query looks active: {newest.path} was modified {format_duration(max(0, now - newest.mtime_ms))} "
            f"ago, within {arg('idle_ms')} {format_duration(idle_ms)}")


def _state_infos(ckpt: Checkpoint) -> Iterator[Any]:
    layout = ckpt.state_layout
    yield from layout.temp_files
    yield from layout.crc_files
    yield from layout.unknown_files
    for op in layout.operators:
        yield from op.metadata_files
        yield from op.schema_files
        for part in op.partitions:
            yield from part.sst_files
            yield from part.other_files
            for f in part.files:
                yield f
