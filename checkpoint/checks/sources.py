"""Checks of the file-source logs (``sources/<i>/``): input the restart reads again, never, or no longer finds (the file
sink's log and the logs' compaction: :mod:`.sink_log`)."""
from __future__ import annotations

import posixpath
from collections import Counter
from typing import Iterator, NamedTuple

from wmcheck.checkpoint.logs.file_logs import FileLogEntry
from wmcheck.checkpoint.logs.metadata_log import FILE_SOURCE_LOG
from wmcheck.checkpoint.watermarks.late_filters import operator_filter
from wmcheck.statestore.formats.schema import event_time_field

from ..batch_inputs import article, changed_kind, source_log_entries, unreadable_file_offset
from ..errors import CheckpointError
from ..fs import local_path, scheme_of
from ..layout import DEFAULT_STORE, log_file_batch
from ..locations import listed_spelling, moved_bases, present_files, spark_location, suggest_path_map, uri_form
from ..model import Operator
from ..numbers import is_number
from ..repair.requests import RelocateRequest
from ..repair.targets import restartable_batches
from ..sources.file import FILE, logged_file_source
from ..sources.registry import source_kind
from .context import Context
from .definition import ERROR, Instruction, Issue, check
from .remedies import rewind_before
from .seen_files import logged_by
from .text import plural


@check("WM022", ERROR, "file-source log does not reach the last offsets")
def source_log_behind(ctx: Context) -> Iterator[Issue]:
    ckpt = ctx.ckpt
    last = ckpt.last_batch
    seq = ctx.offsets.get(last) if last is not None else None
    if seq is None:
        return
    previous = ctx.offsets.get(last - 1) if last is not None and ckpt.pending_batch is not None else None
    for src in seq.sources:
        end = src.log_offset
        if end is None or not is_number(src.source_id):
            continue
        listed = int(src.source_id) in ckpt.source_dirs  # else gone, when the offset is a file source's by its shape
        if not listed and src.source is not FILE:
            continue
        folder = FILE_SOURCE_LOG.folder(src.source_id)
        log = ctx.tree.log(folder)
        start = log.compacts[-1] + 1 if log.compacts else 0  # Spark restores its seen files from there
        if previous is not None:
            before = next((s.log_offset for s in previous.sources if s.source_id == src.source_id), None)
            start = min(start, before + 1) if before is not None else start
        gone = [b for b in range(start, end + 1) if not log.covered(b)]
        if gone:
            reach = max(log.files, default=-1)
            ok = [b for b in restartable_batches(ctx.ckpt) if b in ctx.offsets and all(
                o.log_offset is None or o.source_id != src.source_id or o.log_offset < gone[0]
                for o in ctx.offsets[b].sources)]
            where = f"the log ends at {reach}" if listed else (
                f"{folder}/ is gone: Spark starts a new log at log batch 0, behind the offsets, and fails ('assertion "
                "failed', tested with Spark 4.3)")
            yield Issue(f"{folder}/{gone[0]}" if listed else folder, (
                f"offsets/{last} points at log batch {end} of {folder}, but log batch {gone[0]} is missing ({where}): "
                "Spark cannot list the files of the batch and fails, or writes new log batches over ids it already "
                + (f"used; a rewind to the newest committed batch that read none of it works too, as does restoring "
                   f"{folder}/ from a backup" if ok or not listed else
                   f"used (Spark reads the log from log batch {start} when the query starts: tested with Spark 4.3, "
                   f"'{folder}/{gone[0]} doesn't exist'); every committed batch read it, so only a backup brings it back")
            ), ctx.rewind(ok[-1]) if ok else Instruction(
                f"restore {folder}/{gone[0] if listed else ''} from a backup, or start the query from a new checkpoint"))


def last_input(ctx: Context) -> list[tuple[str, str]]:
    """The input files of the last batch (its file sources' log batches after the previous batch's ``logOffset``),
    as (logged path, where it is: the local path of a ``file:`` URI, else the location Spark reads): Spark asks its sources for them again on restart, to re-run the
    batch when it is not committed, and when it is (``getBatch`` of the last committed batch, which sources that
    restore their position rely on)."""
    ckpt = ctx.ckpt
    last = ckpt.last_batch
    seq = ctx.offsets.get(last) if last is not None else None
    before = ctx.offsets.get(last - 1) if last else None
    if seq is None or (last and before is None):
        return []
    out = []
    for src in seq.sources:
        end = src.log_offset
        if end is None or not is_number(src.source_id) or int(src.source_id) not in ckpt.source_dirs:
            continue
        start = next((s.log_offset for s in before.sources if s.source_id == src.source_id), None) if before else -1
        if start is None:
            continue
        try:
            entries = source_log_entries(ckpt, src.source_id, range(start + 1, end + 1))
        except CheckpointError:
            continue  # a log batch missing or unreadable: WM022 or WM001
        out += [(path, local_path(loc) or loc) for _, path in entries if (loc := spark_location(path))]
    return out


def last_input_gone(ctx: Context) -> tuple[list[str], tuple[str, str] | None]:
    """The logged paths of the last batch's input files that are not there, and the path map under which they are
    found below the checkpoint's parent (moved with it), if any."""
    return ctx.once(_last_input_gone)


def _last_input_gone(ctx: Context) -> tuple[list[str], tuple[str, str] | None]:
    logged = [(path, where, spark_location(path)) for path, where in last_input(ctx)]
    there = present_files(ctx.ckpt.fs, [loc for _, _, loc in logged])
    gone = [(path, where) for path, where, loc in logged if there.get(loc) is False]
    return [p for p, _ in gone], suggest_path_map([where for _, where in gone], moved_bases(ctx.ckpt.fs))


def gone_text(gone: list[str]) -> str:
    return f"{len(gone)} of them {'is' if len(gone) == 1 else 'are'} not there, e.g. {gone[0]}"


@check("WM049", ERROR, "input files of the batch Spark re-runs are gone")
def pending_input_lost(ctx: Context) -> Iterator[Issue]:
    gone, moved = last_input_gone(ctx)
    pending = ctx.ckpt.pending_batch
    if gone and moved is None and pending is not None:
        yield Issue(f"offsets/{pending}", (
            f"batch {pending} is planned but not committed, so Spark re-runs it on restart with the input files its "
            f"file-source log names, and {gone_text(gone)}: Spark reads each logged file as a path of its own and "
            "skips one that does not exist without an error, so the batch runs without their rows, which are lost "
            "(tested with Spark 4.3 and 3.5)"
        ), Instruction("restore the input files from a backup before restarting"))


@check("WM050", ERROR, "input files of the last batch moved with the checkpoint")
def last_input_moved(ctx: Context) -> Iterator[Issue]:
    gone, moved = last_input_gone(ctx)
    last = ctx.ckpt.last_batch
    if gone and moved is not None:
        how = ("is planned but not committed, so Spark re-runs it on restart" if ctx.ckpt.pending_batch is not None else
               "is the last batch, whose input Spark asks the file source for again on restart")
        yield Issue(f"offsets/{last}", (
            f"batch {last} {how}, reading the input files its file-source log names, and {gone_text(gone)}: they are "
            f"under {moved[1]} (moved with the checkpoint), where the query reads its input now, and Spark fails on "
            f"logged files outside that directory ('Wrong basePath … for the root path …', tested with Spark 4.3 and 3.5); "
            f"relocating maps the logs to them"
        ), RelocateRequest(path_map={moved[0]: moved[1]}, file_sink=ctx.sink_location))


@check("WM052", ERROR, "a file source's offset goes back at the last batch")
def offset_goes_back(ctx: Context) -> Iterator[Issue]:
    last = ctx.ckpt.last_batch
    if not last:
        return
    seq, before = ctx.offsets.get(last), ctx.offsets.get(last - 1)
    if seq is None or before is None:
        return
    ended = {s.source_id: s.log_offset for s in before.sources}
    for src in seq.sources:
        end, start = src.log_offset, ended.get(src.source_id)
        if end is None or start is None or end >= start or source_kind(ctx.ckpt, src) is not FILE:
            continue
        yield Issue(f"offsets/{last}", (
            f"source {src.source_id} (a file source) ends batch {last} at log batch {end} but batch {last - 1} at "
            f"{start}: on restart Spark asks the source for batch {last}'s files, from after {start} to {end}, and "
            "fails ('assertion failed', FileStreamSource.getBatch asserts its start is not after its end; tested with "
            f"Spark 4.3). offsets/{last} comes from another run or was edited; a rewind to before batch {last} drops "
            "it and Spark plans the batch again"
        ), rewind_before(ctx, last))


def rerun_from_none(ctx: Context) -> Issue | None:
    """The batch planned but not committed, which Spark re-runs from the previous batch's offsets to its own, when
    one of those ends is '-' (no offset) for a source that had one before: the re-run reads that source from the
    start."""
    pending = ctx.ckpt.pending_batch
    seq, before = ctx.offsets.get(pending or 0), ctx.offsets.get((pending or 0) - 1)
    if not pending or seq is None or before is None:
        return None
    started = {s.source_id: s for s in before.sources}
    had = {s.source_id: s for b, o in sorted(ctx.offsets.items()) if b < pending - 1 for s in o.sources if s.raw is not None}
    for src in seq.sources:
        start = started.get(src.source_id)
        if src.raw is None and start is not None and start.raw is not None:
            where, what = pending, f"ends batch {pending - 1} at {start.summary()} but has no offset ('-') in batch {pending}"
        elif (start is None or start.raw is None) and src.raw is not None and src.source_id in had:
            where, what = pending - 1, (f"had an offset before ({had[src.source_id].summary()}) but none ('-') in "
                                        f"batch {pending - 1}, where batch {pending} starts")
        else:
            continue
        if where == pending:
            how, fix = f"a rewind to before batch {pending} drops the file and Spark plans the batch again", \
                rewind_before(ctx, pending)
        else:
            how, fix = (f"offsets/{where} must be restored: a rewind to before batch {where} re-plans batches {where} and "
                        f"{pending} as one, and output that depends on batch boundaries changes (tested)"), Instruction(
                f"restore offsets/{where} from a backup (wmcheck undo if a wmcheck repair changed it)")
        return Issue(f"offsets/{where}", (
            f"source {src.source_id} {what}; batch {pending} is planned but not committed, so Spark re-runs it on "
            "restart between those offsets, and a file source given no offset reads its input from the start again "
            f"(tested with Spark 4.3: rows counted twice); {how}"
        ), fix)
    return None


@check("WM054", ERROR, "a source's offset changes kind at the last batches")
def offset_of_another_kind(ctx: Context) -> Iterator[Issue]:
    last = ctx.ckpt.last_batch
    if not last:
        return
    dropped = rerun_from_none(ctx)
    if dropped is not None:
        yield dropped
        return
    for batch in (b for b in (last - 1, last) if b >= 1):
        seq, before = ctx.offsets.get(batch), ctx.offsets.get(batch - 1)
        if seq is None or before is None:
            continue
        was = {s.source_id: s for s in before.sources if s.raw is not None}
        unreadable = [(was[s.source_id], s) for s in seq.sources
                      if s.source_id in was and unreadable_file_offset(ctx.ckpt, was[s.source_id], s)]
        if unreadable:
            old, new = unreadable[0]
            yield Issue(f"offsets/{batch}", (
                f"source {new.source_id} (a file source) ends batch {batch - 1} at {old.summary()} but batch {batch} "
                f"with {new.summary()}, which Spark cannot read as a file source's offset (a JSON object with a number "
                f"as logOffset): offsets/{batch} was edited or comes from another query. On restart Spark reads the "
                f"source offsets of the last two offsets files and fails ('No usable value for logOffset'; for null a "
                f"NullPointerException; tested with Spark 4.3); a rewind to before batch {batch} drops it and Spark "
                f"plans the batch again"
            ), rewind_before(ctx, batch))
            return
        changed = [(was[s.source_id], s) for s in seq.sources if s.source_id in was and changed_kind(ctx.ckpt, was[s.source_id], s)]
        if not changed:
            continue
        old, new = changed[0]
        yield Issue(f"offsets/{batch}", (
            f"source {new.source_id} ends batch {batch - 1} with {article(source_kind(ctx.ckpt, old).name)} offset "
            f"({old.summary()}) but batch {batch} with {article(source_kind(ctx.ckpt, new).name)} offset ({new.summary()}): "
            f"offsets/{batch} comes from another query or was edited. On restart Spark reads the source offsets of the "
            f"last two offsets files with the query's own sources and fails on the one of the other kind (a file source "
            f"given another kind's offset: 'No usable value for logOffset', tested with Spark 4.3); a rewind to before "
            f"batch {batch} drops it and Spark plans the batch again"
        ), rewind_before(ctx, batch))
        return


class Unseen(NamedTuple):
    """What a file source's log, as Spark restores its seen files from it, misses:

    - ``short``: files of the log holding fewer entries than log batches, or, for the log file of the log batch the
      last offsets reach, fewer files logged for the first time (log file, its log batches, its new files; Spark logs
      at least one new file per batch, so lines were lost or replaced by an earlier batch's; older input read again
      is mostly behind the watermark, and Spark drops its rows as late);
    - ``bare``: logged bare paths of files that are there on the checkpoint's store (Spark lists URIs, ``file:`` ones
      on a local disk, so the bare path does not name the file it read);
    - ``spelled``: logged URIs of files that are there spelled otherwise than Spark's listing spells them (seen files
      are matched by the string; log file, path, the listing's spelling);
    - ``foreign``: entries naming another source's files (log file, path, the other source)."""

    short: list[tuple[str, int, int]]
    bare: list[str]
    spelled: list[tuple[str, str, str]]
    foreign: list[tuple[str, str, str]]


def restored_entries(ctx: Context, source_id: str) -> dict[str, list[FileLogEntry]] | None:
    """Log file -> its entries, of the files a file source restores its seen files from on restart (the newest
    compact file and the files after it: ``FileStreamSource``'s ``metadataLog.restore()``); None when one of them does
    not parse (WM001)."""
    log = ctx.tree.log(FILE_SOURCE_LOG.folder(source_id))
    if any(p in ctx.failures for p in log.restart_files):
        return None
    return {path: list(ctx.ckpt.file_log(path).entries) for path in log.restart_files}


def new_entries(restored: dict[str, list[FileLogEntry]]) -> dict[str, int]:
    """Log file -> how many files it logs for the first time, in restore order. Spark logs a file only when its seen
    files lack the path; a path logged again with the same time was not logged by Spark (a file leaves the seen
    files only when its time is below the purge threshold, and comes back only with a time at or above it)."""
    seen: set[tuple[str, object]] = set()
    out = {}
    for path, entries in restored.items():
        fresh = {(e.path, e.fields.get("timestamp")) for e in entries} - seen
        out[path] = len(fresh)
        seen |= fresh
    return out


def unseen_input(ctx: Context, source_id: str, others: dict[str, set[str]], reached: int | None = None) -> Unseen:
    """What Spark's restore of a file source's seen files misses; ``others``: the paths each other file source's log
    names. Spark writes a log batch only for new files, each as a URI; ``N.compact`` holds every log batch from 0 to
    N. Two sources reading one directory name the same files throughout; a file in common that lies outside the
    directories of the source's other files was copied from the other source's log. ``reached``: the log batch the
    last offsets file reaches (the newest input the query read)."""
    logged = restored_entries(ctx, source_id)
    if logged is None:
        return Unseen([], [], [], [])
    restored = {path: [e.path for e in entries] for path, entries in logged.items()}
    fresh = new_entries(logged)
    mine = {p for paths in restored.values() for p in paths}
    mixed = {}
    for other, theirs in others.items():  # a file in common, in none of the directories of this source's own files
        own = {posixpath.dirname(p) for p in mine - theirs}
        common = {p for p in mine & theirs if own and posixpath.dirname(p) not in own}
        if common:
            mixed[other] = common
    short, bare, spelled, foreign = [], [], [], []
    there = present_files(ctx.ckpt.fs, [p for p in mine if p.startswith("/")])
    respelled = misspelled(mine)
    found = present_files(ctx.ckpt.fs, [spark_location(p) for p in respelled])
    for path, paths in restored.items():
        batch, compact = log_file_batch(posixpath.basename(path)) or (-1, False)
        batches = batch + 1 if compact else 1
        # older input read again is mostly behind the watermark: dropped as late where an operator drops rows (tested),
        # unless the watermark has not moved since the batch that read it
        newest = batch == reached or not late_rows_dropped(ctx) or not compact and held_since_read(ctx, source_id, batch)
        if len(paths) < batches or fresh[path] < batches and newest:
            short.append((path, batches, fresh[path]))
        bare += [p for p in paths if there.get(p)]
        spelled += [(path, p, respelled[p]) for p in paths if p in respelled and found.get(spark_location(p))]
        foreign += [(path, p, other) for p in paths for other, common in mixed.items() if p in common]
    return Unseen(short, bare, spelled, foreign)


DEDUPLICATIONS = frozenset({"dedupe", "dedupeWithinWatermark"})


def held_since_read(ctx: Context, source_id: str, log_batch: int) -> bool:
    """Whether the batch Spark runs next drops as late no more rows than the batch that read a file source's log batch
    ``log_batch`` did: a batch drops the rows at or before the watermark of the batch before it (Spark 3.5+'s late-events
    watermark), so when the next batch's is not above the reading batch's, the rows that batch took, read again, are
    taken again. Not judged where the query deduplicates (its state may hold their keys and drop them)."""
    if any(op.name in DEDUPLICATIONS for op in ctx.operators):
        return False
    reader, last = logged_by(ctx, source_id, log_batch), ctx.ckpt.last_batch
    if reader is None or last is None:
        return False
    now, then = recorded_watermark(ctx, last if last in ctx.commits else last - 1), recorded_watermark(ctx, reader - 1)
    return now is not None and then is not None and now <= then


def recorded_watermark(ctx: Context, batch: int) -> int | None:
    """``offsets/<batch>``'s batchWatermarkMs (0 before batch 0; None when the file or its metadata is missing)."""
    if batch < 0:
        return 0
    seq = ctx.offsets.get(batch)
    return None if seq is None or seq.metadata is None else seq.metadata.batch_watermark_ms


EVENT_KEYED = ("stateStoreSave", "dedupe", "StatefulStreamlineAggregate")
"""Operators that drop input rows as late only when their key holds the watermarked column (an aggregation by a
window, a deduplication by the event time): Spark defines no late-row predicate otherwise."""


def late_rows_dropped(ctx: Context) -> bool:
    """Whether a stateful operator of the query may drop input rows behind the watermark: one keyed by the watermarked
    column (:data:`EVENT_KEYED`), an event-time transformWithState, or any other stateful operator (a join, a
    (flat)MapGroupsWithState, a session window: taken to drop). Without one (a stateless query, a count by a key without
    event time, a processing-time transformWithState) every row read again comes out again (tested: wrong output)."""
    return ctx.once(_any_drops_late_rows)


def _any_drops_late_rows(ctx: Context) -> bool:
    return any(_drops_late_rows(ctx, op) for op in ctx.operators)


def _drops_late_rows(ctx: Context, op: Operator) -> bool:
    rule = operator_filter(ctx.ckpt, op)  # group state and transformWithState: late_filters' table
    if rule is not None:
        return rule.drops is not False
    if op.name in EVENT_KEYED:
        try:
            schema = ctx.ckpt.store_schema(op.operator_id, DEFAULT_STORE)
        except CheckpointError:
            return True
        return schema is None or event_time_field(schema.key_schema) is not None
    return True


def misspelled(paths: set[str]) -> dict[str, str]:
    """Logged URIs spelled otherwise than Spark's listing spells the file (``file:/in/a.json`` or
    ``file:///in/a%2Djson`` among ``file:///in/...`` entries) -> that spelling. The listing spells every file of a
    source alike: the part before the path as most entries spell it, the path quoted as ``java.net.URI`` quotes it."""
    forms = Counter(f for f in map(uri_form, paths) if f is not None).most_common(2)
    if not forms or len(forms) == 2 and forms[0][1] == forms[1][1]:
        return {}
    form = forms[0][0]
    return {p: listed for p in paths if (listed := listed_spelling(p, form)) is not None and listed != p}


@check("WM064", ERROR, "a file-source log misses files the query read")
def source_log_misses_files(ctx: Context) -> Iterator[Issue]:
    last = ctx.ckpt.last_batch
    seq = ctx.offsets.get(last) if last is not None else None
    reached = {src.source_id: src.log_offset for src in (seq.sources if seq is not None else ())
               if logged_file_source(ctx.ckpt, src)}
    ids = list(reached)
    named = {i: {e.path for entries in (restored_entries(ctx, i) or {}).values() for e in entries} for i in ids}
    for source_id in ids:
        unseen = unseen_input(ctx, source_id, {i: paths for i, paths in named.items() if i != source_id},
                              reached[source_id])
        if not unseen.short and not unseen.bare and not unseen.spelled and not unseen.foreign:
            continue
        folder = FILE_SOURCE_LOG.folder(source_id)
        where = unseen.short[0][0] if unseen.short else unseen.spelled[0][0] if unseen.spelled else \
            unseen.foreign[0][0] if unseen.foreign else \
            ctx.tree.log(folder).restart_files[0]
        what = []
        if unseen.short:
            path, batches, entries = unseen.short[0]
            what.append(f"{posixpath.basename(path)} names {plural(entries, 'input file')} not logged before it for "
                        f"its {plural(batches, 'log batch', 'log batches')} (Spark logs a batch only for files it has "
                        "not logged: lines were lost, or the file holds an earlier log batch's lines)")
        if unseen.bare:
            what.append(f"{plural(len(unseen.bare), 'logged path')} without a scheme "
                        f"(e.g. {unseen.bare[0]}; Spark logs and lists {scheme_of(ctx.ckpt.location) or 'file'}: URIs)")
        if unseen.spelled:
            _, path, listed = unseen.spelled[0]
            what.append(f"{plural(len(unseen.spelled), 'logged path')} spelled otherwise than Spark's listing spells "
                        f"the file (e.g. {path}, listed as {listed}; Spark matches the files it has read by that string)")
        if unseen.foreign:
            _, path, other = unseen.foreign[0]
            what.append(f"{plural(len(unseen.foreign), 'entry', 'entries')} naming files that source {other}'s log "
                        f"names, outside the directories of this source's other files (e.g. {path}: a log file copied "
                        "from the other source's log)")
        yield Issue(where, (
            f"{folder}: {' and '.join(what)}. On restart Spark takes the files it has read from this log, so it sees "
            "the input files these entries stood for as new and reads them again in the next batch (tested with "
            "Spark 4.3: rows counted twice)"
        ), Instruction(f"restore {where} from a backup before restarting"))
