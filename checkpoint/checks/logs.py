"""Checks of the metadata logs: ``offsets/``, ``commits/``, ``metadata``, and wmcheck's own repair records (leftover temp
files and checksum sidecars: :mod:`.stray_files`)."""
from __future__ import annotations

import posixpath
import re
from collections import Counter
from typing import Iterator

from wmcheck.checkpoint.logs.metadata_log import (
    COMMIT_LOG,
    DEFAULT_COMPACT_INTERVAL,
    FILE_SINK_LOG,
    FILE_SOURCE_LOG,
    OFFSET_LOG,
    is_compaction_batch,
)

from ..errors import CheckpointError
from ..fs import NOT_A_FILE
from ..layout import (
    COMMITS,
    COMPACT_SUFFIX,
    OFFSETS,
    REPAIR_JOURNAL,
    SINK_LOG,
    log_file_batch,
    odd_batch_names,
)
from ..numbers import is_number
from ..repair.requests import UndoRequest
from ..repair_records import find_interrupted, read_journal
from .async_progress import async_gaps
from .context import Context, Tree, error_text
from .definition import ERROR, WARNING, Fix, Instruction, Issue, check
from .remedies import NEW_CHECKPOINT, RESTORE, rewind_before
from .text import plural, span

JAVA_UUID = re.compile(r"^[0-9a-fA-F]{1,8}-[0-9a-fA-F]{1,4}-[0-9a-fA-F]{1,4}-[0-9a-fA-F]{1,4}-[0-9a-fA-F]{1,12}$")


def odd_log_names(ctx: Context) -> dict[str, tuple[str, Fix]]:
    """Files of a file source's or the file sink's log named as Spark never names them (``013``, ``013.compact``)
    that Spark takes as a batch after the log's latest: shown path -> (what Spark does, the instruction)."""
    logs: list[tuple[Tree, str, str]] = [(ctx.tree, FILE_SOURCE_LOG.folder(i), "source") for i in ctx.ckpt.source_dirs]
    if ctx.sink is not None:
        logs.append((ctx.sink, FILE_SINK_LOG.folder(), "sink"))
    out: dict[str, tuple[str, Fix]] = {}
    for tree, folder, kind in logs:
        log = tree.log(folder)
        for name, batch in odd_batch_names(list(log.names), compactible=True).items():
            if log.latest is not None and batch <= log.latest:
                continue  # Spark reads the log's own files up to its latest batch
            interval = (log.interval or (DEFAULT_COMPACT_INTERVAL, ""))[0]
            own = f"{batch}{COMPACT_SUFFIX}" if is_compaction_batch(batch, interval) else str(batch)
            shown, reads = tree.shown(log.path(name)), tree.shown(log.path(own))
            does = (f"the restart fails ('File .../{reads} does not exist')" if kind == "source" else
                    f"the sink takes batch {span(log.latest + 1 if log.latest is not None else 0, batch)} as written "
                    f"and skips it (its output lost), and its readers fail ('.../{reads} doesn't exist')")
            out[shown] = (f"Spark lists this file as log batch {batch}, after the log's latest batch "
                          f"{'none' if log.latest is None else log.latest} (it takes any name Long.parseLong reads once "
                          f"'.compact' is stripped, leading zeros, a sign or another script's digits included), but "
                          f"reads each batch from the file of its own name: {does}",
                          Instruction(f"delete {shown} while the query is stopped"))
    return out


@check("WM001", ERROR, "a file does not parse")
def unparseable(ctx: Context) -> Iterator[Issue]:
    last = ctx.ckpt.last_batch
    tail = {OFFSET_LOG.path(last), COMMIT_LOG.path(last)} if last is not None and last - 1 in ctx.ckpt.commit_ids else set()
    problems: dict[str, tuple[str, Fix | None]] = {path: (error_text(exc), None) for path, exc in ctx.failures.items()}
    seq = ctx.offsets.get(last) if last is not None else None
    if last is not None and seq is not None and seq.metadata is None:
        problems[OFFSET_LOG.path(last)] = (
            "line 2 is empty: the offsets file Spark restarts from has no batch metadata (watermark, timestamp, conf), "
            f"and Spark 4.3 cannot restart without it ('Batch {last} metadata not found' when the batch is pending, a "
            "NullPointerException on the watermark tracker when it is committed)", None)
    for folder, ids in ((OFFSETS, ctx.ckpt.offset_id_set), (COMMITS, frozenset(ctx.ckpt.commit_ids))):
        for name, batch in odd_batch_names(ctx.tree.names(folder)).items():
            if batch >= 0 and batch not in ids:
                problems[f"{folder}/{name}"] = (
                    f"Spark lists this file as batch {batch} (it takes any name Long.parseLong reads, leading zeros, "
                    f"a sign or another script's digits included) and then reads {folder}/{batch}, which does not exist: the restart fails "
                    f"('File .../{folder}/{batch} does not exist')", Instruction(
                        f"delete {folder}/{name} while the query is stopped (rename it to {folder}/{batch} instead if it "
                        f"is that batch's file)"))
    problems.update(odd_log_names(ctx))
    for path, exc in ctx.failures.items():
        if exc.message == NOT_A_FILE:
            problems[path] = (error_text(exc) + (
                ": Spark fails to read it, and it fails to write a file of that name while the directory is there (a "
                "rewind leaves it in place: tested with a file sink's log file, the restart after the rewind alone "
                "fails), so it goes first"),
                Instruction(f"move the directory {path} out (or delete it) while the query is stopped, then run wmcheck "
                            "check again: the file is then missing, and the fix it gives (a rewind) makes Spark write it "
                            "anew"))
    unread = unread_on_restart(ctx)
    for path, (text, fix) in sorted(problems.items()):
        if path in unread:
            continue
        if fix is not None:
            yield Issue(path, text, fix)
        elif last is not None and path in tail:
            yield Issue(path, text + f" (a file of the last batch: rewinding to batch {last - 1} drops it with "
                        f"its checksum files, and Spark plans batch {last} again)", ctx.rewind(last - 1))
        elif (written := sink_batch_written_again(ctx, path)) is not None:
            yield Issue(path, text + f" (the sink's log file of batch {written}, after its newest compact file: the "
                        "query restarts, but Spark's readers of the sink fail on it; a rewind to before batch "
                        f"{written} removes it with the sink's later log files, and Spark runs those batches again and "
                        "writes them anew)", rewind_before(ctx, written))
        else:
            yield Issue(path, text, RESTORE)


def sink_batch_written_again(ctx: Context, path: str) -> int | None:
    """The batch of a file sink's log file (not a compact one) after the log's newest compact file, which a rewind to
    before it makes Spark write again; None for any other path."""
    if ctx.sink is None or not path.startswith(ctx.sink.shown(SINK_LOG) + "/"):
        return None
    batch = log_file_batch(posixpath.basename(path))
    compacts = ctx.sink.log(SINK_LOG).compacts
    return batch[0] if batch is not None and not batch[1] and batch[0] > max(compacts, default=-1) else None


def unread_on_restart(ctx: Context) -> dict[str, str]:
    """The files that do not parse and that Spark 4.3 never reads on restart, with why: offsets files before the last
    two (``populateStartOffsets`` reads those), commit files before the newest (``commitLog.getLatest``), and file-log
    files before the log's newest compact file (its readers and its next compaction start there), except a file-source
    log batch that the last batch read (Spark asks the source for that batch's files again)."""
    last = ctx.ckpt.last_batch
    if last is None:
        return {}
    done = max(ctx.ckpt.commit_ids, default=None)
    before = ctx.offsets.get(last - 1)
    started = {s.source_id: s.log_offset for s in before.sources} if before is not None else {}
    logs: dict[str, tuple[Tree, str, int | None]] = {  # shown folder -> (tree, folder in it, first log batch read again)
        FILE_SOURCE_LOG.folder(i): (ctx.tree, FILE_SOURCE_LOG.folder(i), None if before is None else
                                    (started.get(str(i)) or -1) + 1) for i in ctx.ckpt.source_dirs}
    if ctx.sink is not None:
        logs[ctx.sink.shown(SINK_LOG)] = (ctx.sink, SINK_LOG, None)
    out = {}
    for path in ctx.failures:
        folder, _, name = path.rpartition("/")
        if folder == OFFSETS and is_number(name) and int(name) < last - 1:
            out[path] = f"Spark reads only the last two offsets files, {last - 1} and {last}, on restart"
        elif folder == COMMITS and is_number(name) and done is not None and int(name) < done:
            out[path] = f"Spark reads only the newest commit file, {done}, on restart"
        elif folder in logs and (batch := log_file_batch(name)) is not None:
            tree, log, read_from = logs[folder]
            compacts = tree.log(log).compacts
            source = tree is ctx.tree
            if compacts and batch[0] < compacts[-1] and not (source and (read_from is None or batch[0] >= read_from)):
                out[path] = (f"Spark reads this log from its newest compact file, {compacts[-1]}.compact, on restart"
                             + (f" (and the last batch's files from log batch {read_from})" if source else ""))
    return out


@check("WM055", WARNING, "a file Spark does not read on restart does not parse")
def unparseable_unread(ctx: Context) -> Iterator[Issue]:
    for path, why in sorted(unread_on_restart(ctx).items()):
        yield Issue(path, (
            f"{error_text(ctx.failures[path], hint=False)}; {why}, so the restart is not affected (tested with Spark 4.3: the "
            "control run's output), but a rewind to a batch that needs this file cannot be made and tools reading "
            "the whole log (wmcheck batches, replay) skip or stop at it"
        ), RESTORE)


def read_gaps(ctx: Context, read: bool) -> list[tuple[int, int]]:
    """The gaps in offsets/ ids that reach the offsets file before the last (``read``: Spark reads it on restart as
    where the last batch started), or, not ``read``, those before it; none that async progress tracking left (WM085)."""
    last = ctx.ckpt.last_batch
    if async_gaps(ctx):
        return []
    return [(lo, hi) for lo, hi in ctx.ckpt.gaps(ctx.ckpt.offset_ids) if last is not None and (hi >= last - 1) == read]


@check("WM002", ERROR, "gap in offsets/ ids")
def offsets_gap(ctx: Context) -> Iterator[Issue]:
    for lo, hi in read_gaps(ctx, read=True):
        yield Issue(OFFSET_LOG.path(lo), (
            f"offsets/{span(lo, hi)} missing between batches {lo - 1} and {hi + 1}: Spark cannot restart when the batch "
            f"before the last is missing ('batch {hi} doesn't exist') and no batch in the gap can be restored; a rewind "
            f"to before the gap drops the batches after it, and Spark plans them again"
        ), rewind_before(ctx, lo))
    ids = ctx.ckpt.offset_ids
    if len(ids) == 1 and ids[0] > 0:
        last = ids[0]
        committed = last in set(ctx.ckpt.commit_ids)
        yield Issue(OFFSET_LOG.path(last - 1), (
            f"offsets/ holds only batch {last}: on restart Spark reads the offsets file before the last as where batch "
            f"{last} started, and fails ('batch {last - 1} doesn't exist'); Spark keeps at least two "
            "(spark.sql.streaming.minBatchesToRetain), so the others were removed by hand or by a retention rule of the "
            "store" + (f"; batch {last} is committed, so offsets/{last} copied as offsets/{last - 1} restarts it "
                       f"exactly: Spark reads that file only as where batch {last} started, and runs nothing again"
                       if committed else "")
        ), Instruction(f"copy offsets/{last} to offsets/{last - 1}" if committed else
                       f"restore offsets/{last - 1} from a backup, or start the query from a new checkpoint"))


@check("WM043", ERROR, "offsets name another number of sources than the query has")
def source_count(ctx: Context) -> Iterator[Issue]:
    counts = {b: len(seq.sources) for b, seq in ctx.offsets.items()}
    if len(set(counts.values())) < 2:
        return
    tally = Counter(counts.values())
    usual = max(tally, key=lambda n: (tally[n], -min(b for b, c in counts.items() if c == n)))
    read = sorted(counts)[-2:]  # Spark matches the last two offsets files with the query's sources on restart
    odd = [b for b in read if counts[b] != usual]
    if not odd:
        return
    first = odd[0]
    yield Issue(OFFSET_LOG.path(first), (
        f"offsets/{first} lists {plural(counts[first], 'source offset')} but the other batches list {usual} (every "
        f"line after the batch metadata is one source's offset, a blank line too): Spark matches the offsets of the "
        f"last two batches with the query's sources when it restarts and fails ('There are [{counts[first]}] sources "
        f"in the checkpoint offsets and now there are [{usual}] sources requested by the query'); the file was edited "
        f"or comes from another query, and a rewind to before batch {first} drops it"
    ), rewind_before(ctx, first))


@check("WM003", WARNING, "gap in commits/ ids")
def commits_gap(ctx: Context) -> Iterator[Issue]:
    for lo, hi in [] if async_gaps(ctx) else ctx.ckpt.gaps(ctx.ckpt.commit_ids):
        yield Issue(COMMIT_LOG.path(lo), (
            f"commits/{span(lo, hi)} missing although commits/{hi + 1} exists: the completion of batch {span(lo, hi)} "
            f"was never recorded (a lost file or logs of two runs mixed); Spark restarts from the last commit and does "
            f"not notice, but these batches cannot be rewound to"
        ), Instruction("find out how the checkpoint was copied, and restore the missing commit files from a backup if "
                       "you have them"))


@check("WM004", ERROR, "commit without its offsets")
def commit_without_offsets(ctx: Context) -> Iterator[Issue]:
    ckpt = ctx.ckpt
    offsets = set(ckpt.offset_ids)
    first = ckpt.offset_ids[0] if offsets else None
    last = ckpt.last_batch
    for batch in ckpt.commit_ids:
        if batch not in offsets and (first is None or batch >= first) and (last is None or batch >= last - 1):
            yield Issue(COMMIT_LOG.path(batch), (
                f"commits/{batch} has no offsets/{batch}: Spark re-runs batch {last} and then fails to record its "
                f"commit ('Concurrent update to the commit log')" if last is not None and batch > last else
                f"commits/{batch} has no offsets/{batch}: the batch was committed but its plan is gone"
            ) + "; a rewind to the last batch before it with both files removes the commit", rewind_before(ctx, batch))


def state_written(ctx: Context, batches: list[int]) -> bool:
    """Whether every stateful operator's partitions hold the state version each of ``batches`` wrote."""
    return all(b + 1 in p.versions for op in ctx.operators for p in op.live_partitions for b in batches)


def ran_through(ctx: Context, batches: list[int]) -> bool:
    """Whether every one of ``batches`` ran to its end though its commit file is gone: the file sink's log holds it
    (known with the sink only) and the state holds what it wrote. Spark then re-runs the last batch alone, as after
    a stop before its commit, and loses nothing (tested: every commit file deleted, the control run's output)."""
    return ctx.sink is not None and all(ctx.sink.log(SINK_LOG).covered(b) for b in batches) and state_written(ctx, batches)


@check("WM005", ERROR, "more than one batch past the last commit")
def uncommitted_batches(ctx: Context) -> Iterator[Issue]:
    ckpt = ctx.ckpt
    done = ckpt.last_committed_batch
    if done is None and COMMITS not in ctx.tree.entries:
        return  # written before Spark 2.2 had a commit log
    pending = [b for b in ckpt.offset_ids if done is None or b > done]
    if len(pending) > 1 and not ran_through(ctx, pending[:-1]):
        first, last = pending[0], pending[-1]
        yield Issue(OFFSET_LOG.path(first), (
            f"batches {span(first, last)} are planned but not committed: Spark re-runs only batch {last}, from the "
            f"offsets of batch {last - 1}, so the input of batch {span(first, last - 1)} is never processed; after a "
            f"rewind to the last committed batch Spark plans that input again"
            + (f" (the state holds the versions batch {span(first, last - 1)} wrote: if their output reached a file "
               f"sink too, only their commit files were lost and the restart is correct; checking the checkpoint with "
               f"its file sink tells)" if ctx.sink is None and ctx.operators and state_written(ctx, pending[:-1]) else "")
        ), ctx.rewind(done) if done is not None else NEW_CHECKPOINT)


def checkpoint_format(ctx: Context) -> tuple[int | None, str]:
    """The state checkpoint format (1 or 2) the state files were written with, and what shows it (their names); None
    without state files. Spark writes no checkpointFormatVersion into the offsets files, nor restores one found there
    (a value added by hand changes nothing: tested both ways, the control run's output)."""
    files = [f for op in ctx.ckpt.state_layout.operators for p in op.partitions for f in p.files]
    if not files:
        return None, ""
    if any(f.unique_id for f in files):
        return 2, "its state files carry unique ids"
    return 1, "its state files carry no unique ids"


@check("WM006", ERROR, "log versions that the checkpoint format does not allow")
def log_versions(ctx: Context) -> Iterator[Issue]:
    fmt, source = checkpoint_format(ctx)
    if fmt is not None:
        wrong = [b for b, entry in sorted(ctx.commits.items()) if entry.version != fmt]
        if wrong:
            got = ctx.commits[wrong[-1]].version
            later = wrong[0] > min(ctx.commits)
            yield Issue(COMMIT_LOG.path(wrong[0]), (
                f"commits/{span(wrong[0], wrong[-1])}: {len(wrong)} commit file(s) are v{got} but the checkpoint uses "
                f"state checkpoint format {fmt} ({source}): "
                + ("Spark refuses to restart (tested with HDFS state: Spark 4.3 '[STATE_STORE_CHECKPOINT_IDS_NOT_SUPPORTED] "
                   "HDFSBackedStateStoreProvider does not support checkpointFormatVersion > 1', Spark 3.5 "
                   "'UnsupportedLogVersion: maximum supported log version is v1, but encountered v2')"
                   if got > fmt else "these commits carry no stateUniqueIds, so Spark cannot tell which state files to load")
                + ("; the logs come from another run or were edited (wmcheck undo restores them if a repair did it)"
                   if later else "; the commit log and the state were written with different checkpoint formats")
            ), rewind_before(ctx, wrong[0]) if later else NEW_CHECKPOINT)
    versions = sorted((b, s.version) for b, s in ctx.offsets.items())
    for (b1, v1), (b2, v2) in zip(versions, versions[1:]):
        if v2 < v1:
            yield Issue(OFFSET_LOG.path(b2), (
                f"offsets/{b2} is v{v2} after offsets/{b1} v{v1}: Spark never downgrades the offset log format, so "
                f"the logs were mixed or edited"
            ), rewind_before(ctx, b2))
            break


@check("WM007", ERROR, "metadata is missing")
def metadata_missing(ctx: Context) -> Iterator[Issue]:
    if "metadata" not in ctx.tree.entries and (ctx.ckpt.offset_ids or ctx.ckpt.commit_ids):
        yield Issue("metadata", (
            "the checkpoint has no metadata file but its offsets or commits hold batches: since Spark 4.2 Spark refuses "
            "to start ('[STREAMING_CHECKPOINT_MISSING_METADATA_FILE] ... the metadata file is missing but offset and/or "
            "commit logs contain data', tested with 4.3); Spark 3.5 writes a new metadata file with a new query id and "
            "restarts"
        ), Instruction("restore metadata from a backup (wmcheck undo if a wmcheck repair removed it)"))


@check("WM008", ERROR, "metadata holds no valid query id")
def metadata_invalid(ctx: Context) -> Iterator[Issue]:
    meta = ctx.query_metadata
    if meta is not None and not JAVA_UUID.match(meta.query_id):
        yield Issue("metadata", f"the query id {meta.query_id!r} is not a UUID: Spark fails to start the query "
                    f"(UUID.fromString)", Instruction("restore metadata from a backup"))


@check("WM026", ERROR, "interrupted wmcheck repair")
def interrupted_repair(ctx: Context) -> Iterator[Issue]:
    if REPAIR_JOURNAL.partition("/")[0] not in ctx.tree.entries:
        return
    journal = None
    try:
        journal = read_journal(ctx.ckpt.fs)
        pending = find_interrupted(ctx.ckpt.fs)
    except CheckpointError as exc:
        if journal is None:
            yield Issue(REPAIR_JOURNAL, f"a wmcheck repair was interrupted and its journal does not parse "
                        f"({error_text(exc)})", Instruction("list the backups (wmcheck backups) and restore the one "
                                                            "of the interrupted repair before restarting the query"))
            return
        pending = None
    if pending is not None:
        command, action, backup_id = pending.head.command, pending.action, pending.head.backup_id
    elif journal is not None:
        command, action, backup_id = journal.command, journal.action, journal.backup_id
    else:
        return
    where = REPAIR_JOURNAL if journal is not None else f"_wmcheck/backups/{backup_id}/manifest.json"
    head = (f"wmcheck {command} ({action}, backup {backup_id}) was interrupted: the checkpoint is half changed and "
            f"Spark may restart from a mix of old and new files")
    if pending is None:  # the journal names a backup whose manifest cannot be read: undo cannot restore it
        yield Issue(where, f"{head}, and its backup's manifest cannot be read", Instruction(
            "list the backups (wmcheck backups) and restore the checkpoint from the interrupted repair's backup "
            "before restarting the query"))
        return
    then = ("undo finishes the undo" if action == "undo" else
            "undo restores it (running the same command again finishes it instead)")
    yield Issue(where, f"{head}; {then}", UndoRequest())


@check("WM075", WARNING, "gap in offsets/ ids before the files Spark reads on restart")
def unread_offsets_gap(ctx: Context) -> Iterator[Issue]:
    last = ctx.ckpt.last_batch
    commits = set(ctx.ckpt.commit_ids)
    for lo, hi in read_gaps(ctx, read=False):
        kept = [b for b in range(lo, hi + 1) if b in commits]
        yield Issue(OFFSET_LOG.path(lo), (
            f"offsets/{span(lo, hi)} missing between batches {lo - 1} and {hi + 1}"
            + (f" (commits/{span(kept[0], kept[-1]) if len(kept) == hi - lo + 1 else ', '.join(map(str, kept))} kept)"
               if kept else "")
            + f": on restart Spark reads only offsets/{last} and offsets/{(last or 0) - 1}, so the restart is not "
            f"affected (tested with Spark 4.3: the control run's output), but no rewind to batch {span(lo, hi + 1)} can be "
            f"made (Spark would read the missing files), and tools reading the whole log (wmcheck batches, replay) skip "
            f"those batches"
        ), Instruction("nothing to change for a restart; restore the files from a backup before rewinding to those "
                       "batches"))
