"""Entries of the file-source and file-sink logs that Spark's JSON reader (json4s, into ``FileEntry`` and
``SinkFileStatus``) cannot take, or that the sink's readers skip."""
from __future__ import annotations

import posixpath
from collections import Counter
from typing import Any, Iterator, Mapping, NamedTuple
from urllib.parse import unquote, urlsplit

from wmcheck.checkpoint.logs.file_logs import FileLogEntry
from wmcheck.checkpoint.logs.metadata_log import FILE_SOURCE_LOG

from ..layout import SINK_LOG, log_file_batch
from ..sources.file import logged_file_source
from .context import Context
from .definition import ERROR, Instruction, Issue, check
from .sink_files import edited_log_fix, log_unreadable, read_entries
from .text import plural

NUMBER, BOOLEAN, STRING = "a number", "true or false", "a string"
SOURCE_FIELDS: Mapping[str, str] = {"timestamp": NUMBER, "batchId": NUMBER}
"""``FileStreamSource.FileEntry(path, timestamp: Long, batchId: Long)`` (a ``batchId`` of another type: WM001)."""
SINK_FIELDS: Mapping[str, str] = {"size": NUMBER, "isDir": BOOLEAN, "modificationTime": NUMBER,
                                  "blockReplication": NUMBER, "blockSize": NUMBER, "action": STRING}
"""``SinkFileStatus(path, size: Long, isDir: Boolean, modificationTime: Long, blockReplication: Int, blockSize: Long,
action: String)``. json4s takes a JSON integer or float for a number field, only ``true``/``false`` for a boolean and
anything, null included, for a string (readers keep every entry whose action is not ``delete``); a missing field,
or ``null``, a string or any other value in a number or boolean field, fails the whole read ('No usable value for
size'; tested: the sink's readers fail)."""


class BadField(NamedTuple):
    """A field of a log entry Spark cannot take: the log file, its log batch, the field and what it holds."""

    path: str
    batch: int
    entry: str
    field: str
    value: str


def fits(value: Any, kind: str) -> bool:
    if kind == STRING:  # json4s takes any value for a string
        return True
    if kind == BOOLEAN:
        return isinstance(value, bool)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def bad_fields(entry: FileLogEntry, fields: Mapping[str, str]) -> list[tuple[str, str]]:
    """(field, what it holds) of each field of ``entry`` json4s cannot convert to its Scala type."""
    return [(name, "nothing" if name not in entry.fields else repr(entry.fields[name]))
            for name, kind in fields.items() if name not in entry.fields or not fits(entry.fields[name], kind)]


def unreadable_entries(entries: list[tuple[str, int, FileLogEntry]], fields: Mapping[str, str]) -> list[BadField]:
    return [BadField(path, batch, entry.path, name, value)
            for path, batch, entry in entries for name, value in bad_fields(entry, fields)]


def source_entries(ctx: Context) -> list[tuple[str, int, FileLogEntry]]:
    """The entries each file source restores its seen files from on restart (its newest compact file and later)."""
    out = []
    last = ctx.ckpt.last_batch
    seq = ctx.offsets.get(last) if last is not None else None
    for src in seq.sources if seq is not None else ():
        if not logged_file_source(ctx.ckpt, src):
            continue
        log = ctx.tree.log(FILE_SOURCE_LOG.folder(src.source_id))
        for path in log.restart_files:
            if path in ctx.failures:
                continue  # WM001
            batch = (log_file_batch(posixpath.basename(path)) or (-1, False))[0]
            out += [(path, batch, e) for e in ctx.ckpt.file_log(path).entries]
    return out


def spelled_elsewhere(entries: list[tuple[str, int, FileLogEntry]]) -> list[BadField]:
    """Sink entries naming a file of the directory most entries name, with another scheme or authority
    (``file://localhost/out/a`` among ``file:///out/...``): ``PartitioningAwareFileIndex.allFiles`` keeps the files
    whose parent is the sink's path (a Hadoop ``Path``: scheme, authority, decoded path), so readers drop them."""
    def where(path: str) -> tuple[str, str, str] | None:
        parts = urlsplit(path)
        return (parts.scheme.lower(), parts.netloc.lower(), posixpath.dirname(unquote(parts.path))) if parts.scheme else None

    added = [(p, b, e, where(e.path)) for p, b, e in entries if e.action != "delete"]
    dirs = Counter(d for *_, d in added if d is not None).most_common(2)
    if not dirs or len(dirs) == 2 and dirs[0][1] == dirs[1][1]:
        return []
    home = dirs[0][0]
    return [BadField(p, b, e.path, "path", e.path) for p, b, e, d in added
            if d is not None and d != home and d[0] == home[0] and d[2] == home[2]]


@check("WM063", ERROR, "file log entries Spark cannot read")
def unreadable_log_entries(ctx: Context) -> Iterator[Issue]:
    sources = unreadable_entries(source_entries(ctx), SOURCE_FIELDS)
    if sources:
        bad = sources[0]
        yield Issue(bad.path, (
            f"{plural(len(sources), 'field')} of the file source's log entries Spark cannot read "
            f"(e.g. {bad.field} of {bad.entry}: {bad.value}, where Spark writes {SOURCE_FIELDS[bad.field]}): Spark reads "
            "every entry of the newest compact file and the files after it when the query starts, and fails (tested "
            "with Spark 4.3: 'No usable value for timestamp'). The log was edited"
        ), Instruction(f"restore {bad.path} from a backup"))
    if ctx.sink is None or log_unreadable(ctx):
        return
    entries = [(SINK_LOG, batch, entry) for batch, entry in read_entries(ctx)]
    sink = unreadable_entries(entries, SINK_FIELDS)
    skipped = [BadField(p, b, e.path, "isDir", "true") for p, b, e in entries
               if e.fields.get("isDir") is True and e.action != "delete"]
    elsewhere = spelled_elsewhere(entries)
    if sink or skipped or elsewhere:
        first = min(b.batch for b in sink + skipped + elsewhere)
        fix, where = edited_log_fix(ctx, first, "edited")
        what = []
        if sink:
            what.append(
                f"{plural(len(sink), 'entry field')} Spark's readers cannot read (e.g. {sink[0].field} of "
                f"{sink[0].entry}: {sink[0].value}, where Spark writes {SINK_FIELDS[sink[0].field]}): every read of the "
                "sink fails (tested with Spark 4.3: 'No usable value for size')")
        if skipped:
            what.append(f"{plural(len(skipped), 'data file')} marked \"isDir\": true (e.g. "
                        f"{skipped[0].entry}): the sink's readers skip directories, so those rows are lost to them "
                        "(tested with Spark 4.3)")
        if elsewhere:
            what.append(f"{plural(len(elsewhere), 'data file')} of the sink's directory named with another scheme or "
                        f"authority than its other files (e.g. {elsewhere[0].entry}): the sink's readers take the files "
                        "of the sink's directory as a Hadoop path, so those rows are lost to them (tested with Spark "
                        "4.3: file://localhost/ among file:/// entries)")
        yield Issue(where, (
            f"the sink's log has {' and '.join(what)}. The query itself restarts; the log was edited"
            + (f"; a rewind to before batch {first} removes that log file and Spark writes that batch again"
               if not isinstance(fix, Instruction) else "")
        ), fix)
