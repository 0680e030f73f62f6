"""Checks of the data files a file sink's log names: outside the sink directory (a copied or moved sink), gone from
it or changed, and files in the sink directory that the log does not name."""
from __future__ import annotations

import posixpath
from typing import Iterator, NamedTuple

from wmcheck.checkpoint.logs.file_logs import FileLogEntry

from ..errors import CheckpointError
from ..fs import FileInfo, local_path
from ..layout import log_file_batch
from ..locations import SinkFiles, entry_location, parent_location, present_files, root_location, spark_location
from ..repair.requests import RelocateRequest
from .context import SINK_LOG, Context, Tree
from .definition import ERROR, WARNING, Fix, Instruction, Issue, check
from .remedies import rewind_before
from .text import plural


def sink_files(ctx: Context) -> SinkFiles:
    """The sink's data files, found by the names its log records."""
    return ctx.once(_sink_files)


def _sink_files(ctx: Context) -> SinkFiles:
    return SinkFiles(sink_of(ctx).fs, sink_of(ctx).fs.root.rstrip("/"))


def sink_of(ctx: Context) -> Tree:
    """The file sink (these checks run only with one)."""
    assert ctx.sink is not None
    return ctx.sink


def log_unreadable(ctx: Context) -> bool:
    """Whether a file of the sink's log does not parse: which files the log names is then unknown (WM001 reports
    the file)."""
    return any(p.startswith(sink_of(ctx).shown(SINK_LOG)) for p in ctx.failures)


def log_files_in_order(ctx: Context) -> list[str]:
    """The sink's log files by log batch."""
    return sorted(ctx.sink_logs, key=lambda p: log_file_batch(posixpath.basename(p)) or (-1, False))


def live_entries(ctx: Context) -> list[FileLogEntry]:
    """The files the sink's log holds now (added and not deleted), as Spark's readers of the sink see them."""
    live: dict[str, FileLogEntry] = {}
    for path in log_files_in_order(ctx):
        for entry in ctx.sink_logs[path].entries:
            if entry.action == "delete":
                live.pop(entry.path, None)
            else:
                live[entry.path] = entry
    return list(live.values())


def outside(ctx: Context) -> tuple[list[tuple[str, str | None]], list[tuple[str, str | None]]]:
    """Entries naming files outside the sink directory, with the file's path below the sink when it is there
    too: (those whose named file is gone, those whose named file exists or is not looked up)."""
    return ctx.once(_outside)


def _outside(ctx: Context) -> tuple[list[tuple[str, str | None]], list[tuple[str, str | None]]]:
    root = sink_of(ctx).fs.root.rstrip("/")
    files = sink_files(ctx)
    gone: list[tuple[str, str | None]] = []
    elsewhere: list[tuple[str, str | None]] = []
    named = [entry.path for entry in live_entries(ctx) if not entry_location(entry.path).startswith(root + "/")]
    there = present_files(sink_of(ctx).fs, [spark_location(path) for path in named])
    for path in named:
        found = files.find(path)
        (gone if there.get(spark_location(path)) is False else elsewhere).append((path, found.path if found else None))
    return gone, elsewhere


def path_map_fix(ctx: Context, entries: list[tuple[str, str | None]]) -> RelocateRequest:
    """The relocation that maps the directory that moved (the old sink directory and the new one without their
    common trailing part: a moved parent maps the input beside the sink too)."""
    uri, here = next(((u, h) for u, h in entries if h is not None), entries[0])
    location = local_path(spark_location(uri)) or spark_location(uri)
    old = location[: -len(here) - 1] if here is not None and location.endswith("/" + here) else parent_location(location) or location
    new = root_location(sink_of(ctx).fs, old)
    while posixpath.basename(old) == posixpath.basename(new):
        up_old, up_new = parent_location(old), parent_location(new)
        if up_old is None or up_new is None or parent_location(up_old) is None or parent_location(up_new) is None:
            break
        old, new = up_old, up_new
    return RelocateRequest(path_map={old: new}, file_sink=ctx.sink_location)


@check("WM032", ERROR, "file sink log names missing files outside the sink directory", needs_sink=True)
def sink_files_gone(ctx: Context) -> Iterator[Issue]:
    gone = outside(ctx)[0]
    if gone:
        yield Issue(sink_of(ctx).shown(SINK_LOG), (
            f"the sink's log names {plural(len(gone), 'data file')} outside the sink directory that no longer exist, "
            f"e.g. {gone[0][0]}: the sink was moved, and Spark's readers of the sink do not read these files (tested "
            f"with Spark 4.3: with none left, '[UNABLE_TO_INFER_SCHEMA] Unable to infer schema'); relocating maps the "
            f"directory that moved (which covers input that moved with it)"
        ), path_map_fix(ctx, gone))


class Changed(NamedTuple):
    """A live entry naming a file inside the sink directory that is gone (``size`` None) or not the size the log
    records, with the batch whose log file added it (None when only a compact file names it: which batch wrote
    the file is not recorded)."""

    path: str
    batch: int | None
    size: int | None
    logged: int | None


def changed_inside(ctx: Context) -> list[Changed]:
    """The live entries inside the sink directory whose file is gone or another size than the log records (Spark's
    readers of the sink take the file's length from the log: ``SinkFileStatus.toFileStatus``), but for a gone file
    logged with no bytes (a JSON sink's file of a batch without output), which they never open."""
    root = sink_of(ctx).fs.root.rstrip("/")
    files = sink_files(ctx)
    added: dict[str, int | None] = {}
    for path in log_files_in_order(ctx):
        batch, compact = log_file_batch(posixpath.basename(path)) or (-1, True)
        for entry in ctx.sink_logs[path].entries:
            added.setdefault(entry.path, None if compact else batch)
    out = []
    for entry in live_entries(ctx):
        if not entry_location(entry.path).startswith(root + "/"):
            continue
        found = files.find(entry.path)
        logged = entry.size
        if found is None and logged == 0:
            continue  # a file of no bytes has no split: Spark's readers never open it
        if found is None or (logged is not None and not found.is_dir and found.size != logged):
            out.append(Changed(entry.path, added.get(entry.path), None if found is None else found.size, logged))
    return out


@check("WM047", ERROR, "file sink log names data files that are gone or changed", needs_sink=True)
def sink_files_changed(ctx: Context) -> Iterator[Issue]:
    if log_unreadable(ctx):
        return
    changed = changed_inside(ctx)
    if not changed:
        return
    gone = [c for c in changed if c.size is None]
    resized = [c for c in changed if c.size is not None]
    batches = sorted({c.batch for c in changed if c.batch is not None})
    fix = rewind_before(ctx, batches[0]) if batches and all(c.batch is not None for c in changed) else Instruction(
        "restore the data files from a backup (the compact file that names them does not say which batch wrote "
        "them, so no rewind writes them again)")
    what = []
    if gone:
        what.append(f"{plural(len(gone), 'data file')} in the sink directory that {'is' if len(gone) == 1 else 'are'} "
                    f"gone (e.g. {gone[0].path})")
    if resized:
        what.append(f"{plural(len(resized), 'data file')} of another size than it records (e.g. {resized[0].path}: "
                    f"{resized[0].size} bytes, the log says {resized[0].logged}: rewritten after the sink wrote it)")
    yield Issue(sink_of(ctx).shown(SINK_LOG), (
        f"the sink's log names {' and '.join(what)}: the query restarts, but Spark's readers of the sink read every "
        "file its log names, at the length the log records, and fail or read other rows than the query wrote "
        "(tested with Spark 4.3: '[FAILED_READ_FILE.FILE_NOT_EXIST]' for a file that is gone, '[FAILED_READ_FILE.NO_HINT] "
        "Encountered error while reading file' for a Parquet file rewritten with the same rows)"
        + (f"; a rewind to before batch {batches[0]}, which wrote one of them, makes Spark write that output again"
           if not isinstance(fix, Instruction) else "")
    ), fix)


def read_entries(ctx: Context) -> list[tuple[int, FileLogEntry]]:
    """The entries Spark's readers of the sink take from its log, with their log batch: its newest compact file's
    and those of the files after it (``CompactibleFileStreamLog.allFiles``), in order."""
    compacts = sink_of(ctx).log(SINK_LOG).compacts
    first = compacts[-1] if compacts else 0
    out = []
    for path in log_files_in_order(ctx):
        batch = log_file_batch(posixpath.basename(path))
        if batch is not None and batch[0] >= first and (batch[1] or batch[0] > first or not compacts):
            out += [(batch[0], entry) for entry in ctx.sink_logs[path].entries]
    return out


def edited_log_fix(ctx: Context, batch: int, entries: str) -> tuple[Fix, str]:
    """The fix of entries of log batch ``batch`` Spark's sink never writes, and the log file to name: the rewind to
    before it, or, in the newest compact file (no rewind removes it), an instruction to remove them."""
    compacts = sink_of(ctx).log(SINK_LOG).compacts
    if not compacts or batch > compacts[-1]:
        return rewind_before(ctx, batch), sink_of(ctx).shown(posixpath.join(SINK_LOG, str(batch)))
    return Instruction(f"remove the {entries} entries from {sink_of(ctx).shown(SINK_LOG)}/{batch}.compact (from a "
                       "backup of it)"), sink_of(ctx).shown(posixpath.join(SINK_LOG, f"{batch}.compact"))


PARQUET_MAGIC = b"PAR1"
FOOTER_READ = 1 << 16
"""Bytes read from a data file's end to find its Parquet footer (a larger footer is read again whole)."""


def holds_no_rows(ctx: Context, entry_path: str) -> bool:
    """Whether a data file the sink's log names is there and holds no row: empty (a JSON sink's file of a batch without
    output), or a Parquet file whose footer counts none (Spark's sink writes one for each task of a batch that emitted
    nothing); reading it twice adds nothing."""
    found = sink_files(ctx).find(entry_path)
    return found is not None and no_rows(ctx, found)


def no_rows(ctx: Context, found: FileInfo) -> bool:
    """Whether a data file of the sink holds no row (:func:`holds_no_rows`)."""
    if found.is_dir:
        return False
    if found.size == 0:
        return True
    if found.size < 12 or not found.path.endswith(".parquet"):
        return False
    import io

    import pyarrow.parquet as pq

    fs = sink_of(ctx).fs
    try:
        tail = fs.read_tail(found.path, min(found.size, FOOTER_READ))
        length = int.from_bytes(tail[-8:-4], "little")
        if tail[-4:] != PARQUET_MAGIC or length + 8 > found.size:
            return False
        if length + 8 > len(tail):
            tail = fs.read_tail(found.path, length + 8)
        return bool(pq.read_metadata(io.BytesIO(tail[-(length + 8):])).num_rows == 0)
    except (OSError, ValueError, CheckpointError):
        return False


@check("WM056", ERROR, "file sink log names a data file twice", needs_sink=True)
def sink_files_twice(ctx: Context) -> Iterator[Issue]:
    if log_unreadable(ctx):
        return
    entries = read_entries(ctx)
    deleted = {e.path for _, e in entries if e.action == "delete"}
    first: dict[str, int] = {}
    twice: list[tuple[str, int, int]] = []
    empty: list[tuple[str, int, int]] = []
    for batch, entry in entries:
        if entry.action != "add" or entry.path in deleted:
            continue
        if entry.path in first:
            (empty if holds_no_rows(ctx, entry.path) else twice).append((entry.path, first[entry.path], batch))
        else:
            first[entry.path] = batch
    if not twice and empty:
        lost = [p for p in unlisted(ctx) if not no_rows(ctx, sink_files(ctx).listing()[p])]
        if lost:
            yield repeated_empty(ctx, empty[0], lost)
        return
    if not twice:
        return
    path, was, again = twice[0]
    fix, where = edited_log_fix(ctx, again, "repeated")
    yield Issue(where, (
        f"the sink's log names {plural(len(twice), 'data file')} twice (e.g. {path}, in log batch {was} and again in "
        f"{again}): Spark's readers of the sink read every entry of its log, so they read those rows twice "
        "(tested with Spark 4.3: duplicated output). The log was edited or its files mixed"
        + (f"; a rewind to before batch {again} removes the repeating log file, keeps the data file the earlier "
           "batch names, and Spark writes that batch again" if not isinstance(fix, Instruction) else "")
    ), fix)


def repeated_empty(ctx: Context, repeat: tuple[str, int, int], lost: list[str]) -> Issue:
    """A log batch naming a data file without rows an earlier one names, beside data files with rows the log lacks."""
    path, was, again = repeat
    fix, where = edited_log_fix(ctx, again, "repeated")
    return Issue(where, (
        f"log batch {again} of the sink names a data file log batch {was} names (e.g. {path}, which holds no row): "
        f"Spark's sink writes new files in every batch, so that log file is not the one batch {again} wrote, and the "
        f"sink directory holds {plural(len(lost), 'data file')} with rows its log does not list (e.g. "
        f"{sink_of(ctx).shown(lost[0])}): the output of that batch, which Spark's readers of the sink never read "
        "(tested with Spark 4.3: rows lost)"
        + (f"; a rewind to before batch {again} removes the log file and Spark writes that batch again"
           if not isinstance(fix, Instruction) else "")
    ), fix)


def deleted_entries(ctx: Context) -> list[tuple[int, str]]:
    """The delete entries Spark's readers of the sink take (log batch, path) whose data file is still in the sink
    directory: Spark's sink never writes one, so the log was edited and the file's rows are lost to the readers."""
    files = sink_files(ctx)
    return [(batch, e.path) for batch, e in read_entries(ctx) if e.action == "delete" and files.find(e.path) is not None]


@check("WM061", ERROR, "file sink log deletes a data file that is still in the sink", needs_sink=True)
def sink_files_deleted(ctx: Context) -> Iterator[Issue]:
    if log_unreadable(ctx):
        return
    deleted = deleted_entries(ctx)
    if not deleted:
        return
    again = min(batch for batch, _ in deleted)
    fix, where = edited_log_fix(ctx, again, "delete")
    yield Issue(where, (
        f"the sink's log deletes {plural(len(deleted), 'data file')} that the query wrote (e.g. {deleted[0][1]}, in log "
        f"batch {deleted[0][0]}): Spark's file sink never writes a delete, but its readers drop every file a delete "
        "names (CompactibleFileStreamLog.allFiles), so the query's output loses those rows (tested with Spark 4.3: "
        "rows missing, the restart itself runs). The log was edited"
        + (f"; a rewind to before batch {again} removes the deleting log file and Spark writes that batch again"
           if not isinstance(fix, Instruction) else "")
    ), fix)


def compacted_inputs(ctx: Context) -> tuple[int, list[str]] | None:
    """The newest compact file's batch and the log files it was written from (``CompactibleFileStreamLog.compact``:
    the compact file before it and every file after that one, or every file from 0 without an earlier compact file);
    None without a compact file or when one of them is gone or does not parse (nothing to compare it with)."""
    log = sink_of(ctx).log(SINK_LOG)
    if not log.compacts:
        return None
    newest = log.compacts[-1]
    start = log.compacts[-2] if len(log.compacts) > 1 else 0
    inputs = [log.files.get(b) for b in range(start, newest)]
    if not inputs or any(p is None or p not in ctx.sink_log_files for p in inputs) or \
            log.files[newest] not in ctx.sink_log_files:
        return None
    return newest, [p for p in inputs if p is not None]


def dropped_by_compaction(ctx: Context) -> tuple[int, list[str], list[FileLogEntry]] | None:
    """What the newest compact file lacks of the files it was written from: (its batch, those files, the added and
    not deleted entries it lacks). Spark's compaction keeps every entry but deleted files' and, with the sink's
    ``retention`` option, those older than every entry it keeps (``FileStreamSinkLog.shouldRetain``: the time of
    the file); an entry it lacks that is no older than one it keeps was lost."""
    found = compacted_inputs(ctx)
    if found is None:
        return None
    newest, inputs = found
    compact = ctx.sink_log_files[sink_of(ctx).log(SINK_LOG).files[newest]].entries
    entries = [e for path in inputs for e in ctx.sink_log_files[path].entries]
    files = sink_files(ctx)

    def data_file(path: str) -> str:  # entries naming one file otherwise (a damaged or relocated path) are one
        found = files.find(path)
        return found.path if found is not None else path

    deleted = {data_file(e.path) for e in (*entries, *compact) if e.action == "delete"}
    kept = {data_file(e.path) for e in compact}
    oldest = min((t for e in compact if isinstance(t := e.fields.get("modificationTime"), (int, float))), default=None)
    lost = list({e.path: e for e in entries if e.action != "delete" and data_file(e.path) not in deleted | kept
                 and (oldest is None or not isinstance(t := e.fields.get("modificationTime"), (int, float))
                      or t >= oldest)}.values())
    return (newest, inputs, lost) if lost and compact else None


@check("WM076", ERROR, "file sink's newest compact file lacks files of the log files it compacts", needs_sink=True)
def sink_compaction_lost_files(ctx: Context) -> Iterator[Issue]:
    found = dropped_by_compaction(ctx)
    if found is None:
        return
    newest, inputs, lost = found
    where = sink_of(ctx).shown(posixpath.join(SINK_LOG, f"{newest}.compact"))
    fix = rewind_before(ctx, newest)
    if isinstance(fix, Instruction):  # no batch before it Spark can restart from
        fix = Instruction(f"restore {where} from a backup; without one, add back the entries it lacks from the files "
                          "it compacts")
    names = ", ".join(posixpath.basename(p) for p in inputs)
    yield Issue(where, (
        f"{where} lacks {plural(len(lost), 'data file')} that the log files it compacts ({names}) "
        f"name (e.g. {lost[0].path}): Spark writes a compact file as those files' entries plus its batch's, dropping "
        "only deleted files and, with a retention, the oldest, and its readers of the sink take the newest compact "
        "file and the files after it only, so they miss those files' rows (tested with Spark 4.3: rows missing, the "
        "restart itself runs). The compact file was replaced or edited"
        + (f"; a rewind to before batch {newest} removes it and Spark compacts the log again from the files before it"
           if not isinstance(fix, Instruction) else "")
    ), fix)


@check("WM033", ERROR, "file sink log names files of another directory", needs_sink=True)
def sink_files_elsewhere(ctx: Context) -> Iterator[Issue]:
    elsewhere = outside(ctx)[1]
    if elsewhere:
        yield Issue(sink_of(ctx).shown(SINK_LOG), (
            f"the sink's log names {plural(len(elsewhere), 'data file')} outside the sink directory that exist there, "
            f"e.g. {elsewhere[0][0]}: the sink was copied. The query restarts, but Spark's readers of this sink do not "
            "read those files (tested with Spark 4.3: with none left, '[UNABLE_TO_INFER_SCHEMA] Unable to infer "
            "schema'), so its output looks lost"
        ), path_map_fix(ctx, elsewhere))


def unlisted(ctx: Context) -> list[str]:
    """The data files in the sink directory (paths below it) that its log does not name, in order."""
    files = sink_files(ctx)
    named = [entry.path for entry in live_entries(ctx)] + [path for _, path in deleted_entries(ctx)]  # WM061
    listed = {found.path for path in named if (found := files.find(path)) is not None}
    return sorted(p for p in files.listing() if not any(part.startswith((".", "_")) for part in p.split("/"))
                  and p not in listed)


@check("WM034", WARNING, "data files in the sink directory that its log does not list", needs_sink=True)
def unlisted_sink_files(ctx: Context) -> Iterator[Issue]:
    if not ctx.sink_logs or log_unreadable(ctx):
        return
    extra = unlisted(ctx)
    if extra:
        yield Issue(sink_of(ctx).shown(extra[0]), (
            f"{plural(len(extra), 'data file')} in the sink directory that its log does not list (e.g. {extra[0]}): "
            "left by failed or rewound batches. Spark reads the sink through its log and ignores them (tested), but "
            "readers that list the directory (pyarrow, Hive, Trino) see them as output"
        ), Instruction("move them out of the sink once no query writes to it"))
