"""Rewinding a compactible file log: a file source's ``sources/<i>/`` or a file sink's ``_spark_metadata/``.

Spark reads such a log from its latest file: the latest ``C.compact`` at or before it holds every
entry up to ``C``, the plain files after it one batch each. Rewinding to log batch ``T`` removes
every file after ``T``. When ``T``'s own file was already cleaned up (its entries survive only in a
later compact file), a file-source log is rebuilt as one ``T.compact`` holding every entry with
``batchId <= T``: Spark derives a compact interval that divides ``T + 1`` from a single compact file,
so the rebuilt log is one it reads and continues. Sink entries carry no batch id: a sink log is
never rebuilt.
"""
from __future__ import annotations

import posixpath
from typing import Callable

from wmcheck.checkpoint.logs.file_logs import FileLog, FileLogEntry, parse_file_log, serialize_file_log
from wmcheck.checkpoint.logs.metadata_log import MetadataLog
from wmcheck.checkpoint.records import dataclass

from ..errors import CheckpointError
from ..fs import FileInfo, FileSystem
from ..layout import all_sidecars
from .plan import Root, Step


@dataclass(frozen=True)
class LogRewind:
    """The steps that rewind one log, or why it cannot be rewound."""

    steps: tuple[Step, ...] = ()
    problem: str | None = None
    removed: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    rebuilt: str | None = None


def remove_steps(root: Root, info, lookup: Callable[[str], FileInfo | None], phase: str, reason: str) -> list[Step]:
    """Remove a file (a FileInfo or StateFile), then each of its checksum sidecars that ``lookup`` finds."""
    out = [Step("remove", root, info.path, phase, reason, info.size, info.mtime_ms)]
    for side in all_sidecars(info.path):
        got = lookup(side)
        if got is not None:
            out.append(Step("remove", root, side, phase, f"checksum of {posixpath.basename(info.path)}", got.size, got.mtime_ms))
    return out


def rewind_log(
    log: MetadataLog,
    root: Root,
    target: int,
    phase: str,
    read: Callable[[str], FileLog],
    rebuild: bool,
) -> LogRewind:
    """Keep log batches ``<= target`` (none when ``target`` is negative), highest files removed first."""
    later = [b for b in sorted(log.files, reverse=True) if b > target]
    kept = [b for b in log.files if b <= target]
    steps: list[Step] = []
    rebuilt = None
    if target >= 0 and target not in log.files:
        compacts = [b for b in log.compacts if b > target]
        if not rebuild or not compacts:
            where = f"{log.directory}/{target}"
            return LogRewind(problem=f"{where} is gone (cleaned up after compaction)" + (
                "; sink log entries carry no batch id, so it cannot be rebuilt" if not rebuild else
                " and no later compact file holds its entries"))
        source = log.files[min(compacts)]
        entries, problem = _entries_up_to(read(source), target, source)
        if problem:
            return LogRewind(problem=problem)
        rebuilt = posixpath.join(log.directory, f"{target}.compact")
        data = serialize_file_log(FileLog(read(source).version, entries))
        steps.append(Step("write", root, rebuilt, phase,
                          f"rebuilt from {posixpath.basename(source)}: the entries of log batches 0..{target}", data=data,
                          crc=log.has_crc))
        later += sorted(kept, reverse=True)
        kept = []
    reason = f"log batch {{}} > {target}" if target >= 0 else "log batch {} (the source had no offset yet)"
    for b in later:
        why = reason.format(b) if b > target else f"log batch {b}: replaced by {rebuilt}"
        steps += remove_steps(root, log.info(b), log.infos.get, phase, why)
    for b, path in log.orphaned_sidecars:
        if b > target:
            info = log.infos[path]
            steps.append(Step("remove", root, path, phase, f"orphaned checksum of log batch {b} > {target}: Hadoop's "
                              "checksummed rename refuses it when Spark writes that file again", info.size, info.mtime_ms))
    return LogRewind(tuple(steps), None, tuple(log.files[b] for b in later), tuple(log.files[b] for b in kept), rebuilt)


def _entries_up_to(log: FileLog, target: int, path: str) -> tuple[tuple[FileLogEntry, ...], str | None]:
    if any(e.batch_id is None for e in log.entries):
        return (), f"{path} has entries without a batchId, so log batch {target} cannot be rebuilt from it"
    entries = tuple(e for e in log.entries if e.batch_id is not None and e.batch_id <= target)
    missing = sorted(set(range(target + 1)) - {e.batch_id for e in entries})
    if missing:
        return (), f"{path} holds no entries of log batch {missing[0]}, so log batch {target} cannot be rebuilt"
    return entries, None


def read_parsed(fs: FileSystem) -> Callable[[str], FileLog]:
    """A cached reader of log files on ``fs``."""
    cache: dict[str, FileLog] = {}

    def read(path: str) -> FileLog:
        if path not in cache:
            cache[path] = parse_file_log(fs.read(path), path)
        return cache[path]

    return read


def sink_orphans(rewind: LogRewind, read: Callable[[str], FileLog]) -> tuple[list[str], list[str]]:
    """Data files added only by the removed sink log files (deleted ones are not resurrected), and the removed log
    files that do not parse (what they name is unknown: removing them is what the rewind is for)."""
    kept = {e.path for p in rewind.kept for e in read(p).entries}
    removed: set[str] = set()
    unreadable = []
    for path in rewind.removed:
        try:
            removed |= {e.path for e in read(path).entries if e.action == "add"}
        except CheckpointError:
            unreadable.append(path)
    return sorted(removed - kept), unreadable

