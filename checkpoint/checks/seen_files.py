"""The times a file source logged for the files it read, as its restart uses them to decide what is new."""
from __future__ import annotations

import posixpath
from typing import Iterator, NamedTuple

from wmcheck.checkpoint.logs.metadata_log import FILE_SOURCE_LOG

from ..errors import CheckpointError
from ..fs import local_path, open_fs
from ..layout import log_file_batch
from ..locations import spark_location
from ..repair.requests import RewindRequest
from ..sources.file import file_source_dir, logged_file_source
from ..timeutil import format_ms
from .context import Context
from .definition import ERROR, Instruction, Issue, check
from .remedies import NEW_CHECKPOINT, rewind_before
from .text import plural

MAX_FILE_AGE_MS = 7 * 86_400_000
"""The file source's ``maxFileAge`` by default (``FileStreamOptions``: "7d")."""

WALL_CLOCK_FROM_MS = 946_684_800_000
"""2000-01-01: a batch time before it comes from a test's manual clock, not the wall clock input files are written by."""


class Stamp(NamedTuple):
    """A logged file's ``timestamp`` (its modification time when the source listed it), where it is logged."""

    ms: int
    log_file: str
    log_batch: int
    path: str


def stamps(ctx: Context, source_id: str) -> list[Stamp] | None:
    """The logged times of the files a file source restores as seen on restart (its newest compact file and the
    files after it); None when one of them does not parse (WM001)."""
    log = ctx.tree.log(FILE_SOURCE_LOG.folder(source_id))
    if any(p in ctx.failures for p in log.restart_files):
        return None
    out = []
    for log_file in log.restart_files:
        named = log_file_batch(posixpath.basename(log_file))
        for entry in ctx.ckpt.file_log(log_file).entries:
            ms = entry.fields.get("timestamp")
            if isinstance(ms, (int, float)) and not isinstance(ms, bool):  # another type: WM063
                batch = entry.batch_id if entry.batch_id is not None else named[0] if named else -1
                out.append(Stamp(int(ms), log_file, batch, entry.path))
    return out


def logged_by(ctx: Context, source_id: str, log_batch: int) -> int | None:
    """The batch that logged ``log_batch`` of a file source: the first whose offset reaches it."""
    return next((b for b, seq in sorted(ctx.offsets.items()) for s in seq.sources
                 if s.source_id == source_id and s.log_offset is not None and s.log_offset >= log_batch), None)


def mtime_on_disk(path: str) -> int | None:
    """The modification time of a logged local input file now (None when it is not a local file or not there)."""
    local = local_path(spark_location(path))
    if local is None:
        return None
    try:
        info = open_fs("/").info(local.lstrip("/"))
    except Exception:  # noqa: BLE001 - an unreadable input file is another check's business
        return None
    return None if info is None else info.mtime_ms


@check("WM067", ERROR, "a file source's logged file times make it skip new input files")
def hidden_new_files(ctx: Context) -> Iterator[Issue]:
    last = ctx.ckpt.last_batch
    seq = ctx.offsets.get(last) if last is not None else None
    if seq is None or seq.metadata is None or seq.metadata.batch_timestamp_ms < WALL_CLOCK_FROM_MS:
        return
    now = seq.metadata.batch_timestamp_ms
    for src in seq.sources:
        if not logged_file_source(ctx.ckpt, src):
            continue
        logged = stamps(ctx, src.source_id) or []
        ahead = sorted((s for s in logged if s.ms - MAX_FILE_AGE_MS > now), key=lambda s: (s.log_batch, s.ms))
        if not ahead:
            continue
        newest = max(s.ms for s in logged)
        first = ahead[0]
        batch = logged_by(ctx, src.source_id, first.log_batch)
        fix = rewind_before(ctx, batch) if batch is not None else NEW_CHECKPOINT
        disk = mtime_on_disk(first.path)
        skewed = disk is not None and disk - MAX_FILE_AGE_MS > now
        if skewed and isinstance(fix, RewindRequest):
            fix = Instruction(f"set the modification time of the input files logged with these times to when they were "
                              f"written (touch -m {local_path(spark_location(first.path))}), then rewind to batch "
                              f"{fix.to_batch} with the file sink (wmcheck rewind CKPT --to-batch {fix.to_batch} "
                              "--file-sink SINK --execute)")
        folder = FILE_SOURCE_LOG.folder(src.source_id)
        yield Issue(first.log_file, (
            f"{folder}: {plural(len(ahead), 'logged input file')} with a time more than 7 days after the last batch's "
            f"({format_ms(now)}), e.g. {first.path} at {format_ms(first.ms)} (log batch {first.log_batch}"
            + (", its file's modification time on disk too: a clock skew where it was written" if skewed else "")
            + f"). On restart the file source takes its seen files' times from the log and forgets, and never reads, "
            f"any file older than the newest logged time minus maxFileAge (FileStreamSource.SeenFilesMap: "
            f"{format_ms(newest)} minus 7 days by default; not with latestFirst and maxFilesPerTrigger or "
            f"maxBytesPerTrigger), so every input file written until {format_ms(newest - MAX_FILE_AGE_MS)} is skipped "
            "without an error (tested with Spark 4.3: the new input is never read)"
            + (f"; a rewind to before batch {batch}, which logged it, makes Spark list and read those files again"
               if fix != NEW_CHECKPOINT else "")
        ), fix)


def hidden_name(relative: str) -> bool:
    """A path Spark's file listing leaves out: a name starting with ``_`` or ``.`` at any level."""
    return any(part.startswith(("_", ".")) for part in relative.split("/"))


@check("WM071", ERROR, "input files a file source will never read: older than its purge threshold")
def too_old_to_read(ctx: Context) -> Iterator[Issue]:
    last = ctx.ckpt.last_batch
    seq = ctx.offsets.get(last) if last is not None else None
    for src in seq.sources if seq is not None else ():
        if not logged_file_source(ctx.ckpt, src):
            continue
        logged = stamps(ctx, src.source_id)
        folder = file_source_dir(ctx.ckpt, src.source_id)
        if not logged or folder is None or not folder.startswith("/"):
            continue
        threshold = max(s.ms for s in logged) - MAX_FILE_AGE_MS
        seen = {local_path(spark_location(s.path)) for s in logged}
        try:
            files = open_fs("/").walk(folder.lstrip("/"))
        except CheckpointError:
            continue  # an input directory this user cannot list
        top = folder.rstrip("/")
        old = sorted(("/" + f.path.lstrip("/") for f in files if f.mtime_ms < threshold
                      and not hidden_name(posixpath.relpath("/" + f.path.lstrip("/"), top))
                      and "/" + f.path.lstrip("/") not in seen))
        if not old:
            continue
        yield Issue(FILE_SOURCE_LOG.folder(src.source_id), (
            f"{plural(len(old), 'file')} in the input directory {folder} that the source has not read, e.g. {old[0]}, "
            f"{'is' if len(old) == 1 else 'are'} older than the newest time its log records minus maxFileAge "
            f"({format_ms(threshold, ctx.tz)}: FileStreamSource.SeenFilesMap, 7 days by default; not with latestFirst "
            "and maxFilesPerTrigger or maxBytesPerTrigger): Spark takes a file as new only when it is not older than that, "
            "so it never reads them and says nothing (tested with Spark 4.3: a new input file with a modification time "
            "a month old is not read). A file copied in with its old modification time (cp -p, rsync -t, an archive) "
            "does this"
        ), Instruction(f"set the modification time of these files to now (touch -m {old[0]}"
                       + (" …" if len(old) > 1 else "") + ") before the query lists them"))
