"""Checks of leftover files: temp files a crash left and checksum sidecars whose file is gone, in the checkpoint and the
file sink (one Spark writes next fails the batch that writes it)."""
from __future__ import annotations

import posixpath
from typing import Iterator

from wmcheck.checkpoint.logs.metadata_log import COMMIT_LOG, FILE_SOURCE_LOG, OFFSET_LOG
from wmcheck.statestore.formats.files import is_crc, is_temp
from wmcheck.statestore.formats.registry import version_file

from ..activity import DEFAULT_IDLE_MS, newest_recent, now_ms
from ..layout import (
    COMMITS,
    OFFSETS,
    SINK_LOG,
    SOURCES,
    STATE,
    log_file_batch,
    sidecar_target,
    sidecars,
)
from ..numbers import is_number
from ..repair.requests import RewindRequest
from ..repair.targets import restartable_batches
from ..timeutil import format_duration
from .context import Context, Tree
from .definition import ERROR, WARNING, Fix, Instruction, Issue, check


def strays(ctx: Context) -> tuple[list[tuple[Tree, str]], list[tuple[Tree, str]]]:
    """Leftover temp files and checksum sidecars whose file is gone, in the checkpoint and the file sink."""
    return ctx.once(_strays)


def _strays(ctx: Context) -> tuple[list[tuple[Tree, str]], list[tuple[Tree, str]]]:
    temps, orphans = [], []
    for tree in ctx.trees:
        covered = {s for path in tree.entries for s in sidecars(path)}
        for path in tree.entries:
            name = path.rpartition("/")[2]
            if is_temp(name):
                temps.append((tree, path))
            elif is_crc(name) and path not in covered:
                orphans.append((tree, path))
    return temps, orphans


@check("WM009", WARNING, "leftover temp file")
def temp_files(ctx: Context) -> Iterator[Issue]:
    temps = strays(ctx)[0]
    active = newest_recent(ctx.ckpt, DEFAULT_IDLE_MS, now_ms()) if temps else None
    for tree, path in temps:
        if active:  # the rule of the repair guard: a running query writes through such temp files
            yield Issue(tree.shown(path), (
                f"the query looks active ({active.path} changed within the last {format_duration(DEFAULT_IDLE_MS)}): "
                "probably a write in flight, not a leftover"
            ), Instruction("check again once the query is stopped"))
        else:
            yield Issue(tree.shown(path), "leftover of an interrupted write; Spark ignores it, but it hides what happened "
                        "and takes space", Instruction(f"delete {tree.shown(path)} while the query is stopped"))


def upcoming_file(ctx: Context, tree: Tree, folder: str) -> str | None:
    """The next file Spark writes to a metadata log folder: ``offsets/`` the batch after the last, ``commits/`` the
    commit of the batch it runs next, ``sources/<i>/`` the log batch after the latest (``FileStreamSource`` adds
    one when it finds new files), the file sink's log the first batch it runs that the sink has not committed
    (``N`` or ``N.compact`` by the log's compact interval)."""
    ckpt = ctx.ckpt
    if tree is ctx.sink:
        if folder != SINK_LOG:
            return None
        log = tree.log(folder)
        return log.path(log.name_of(max(ckpt.next_batch, (-1 if log.latest is None else log.latest) + 1)))
    if folder == OFFSETS:
        return OFFSET_LOG.path((-1 if ckpt.last_batch is None else ckpt.last_batch) + 1)
    if folder == COMMITS:
        return COMMIT_LOG.path(ckpt.next_batch)
    head, _, source = folder.partition("/")
    if head == SOURCES and is_number(source):
        log = tree.log(folder)
        return log.path(log.name_of((-1 if log.latest is None else log.latest) + 1))
    if head == STATE:
        return upcoming_state_metadata(ctx, folder)
    return None


def upcoming_state_metadata(ctx: Context, folder: str) -> str | None:
    """The operator metadata or state schema file Spark writes to ``folder`` (under ``state/<op>/``) when the query
    starts: ``_metadata/v2/<batch>`` of the batch it runs first (an operator with v2 metadata, transformWithState),
    else ``_metadata/metadata`` (v1), and each store's ``0/[<store>/]_metadata/schema`` when there are none
    (``StateSchemaCompatibilityChecker`` keeps the schema in partition 0), the schema of an operator without
    ``_stateSchema/`` files."""
    parts = folder.split("/")
    op = next((o for o in ctx.ckpt.state_layout.operators if [STATE, str(o.operator_id)] == parts[:2]), None)
    if op is None:
        return None
    v2 = any(posixpath.basename(posixpath.dirname(f.path)) == "v2" for f in op.metadata_files)
    if parts[2:] == ["_metadata", "v2"]:
        return f"{folder}/{ctx.ckpt.next_batch}"
    if parts[2:] == ["_metadata"] and not v2:
        return f"{folder}/metadata"
    if parts[2:3] == ["0"] and parts[-1] == "_metadata" and len(parts) in (4, 5) and not op.schema_files:
        return f"{folder}/schema"
    return None


def orphans(ctx: Context) -> tuple[list[tuple[Tree, str, str]], list[tuple[Tree, str, str]]]:
    """Orphaned sidecars with the name of their file: (of files Spark writes next, the others)."""
    upcoming: list[tuple[Tree, str, str]] = []
    other: list[tuple[Tree, str, str]] = []
    for tree, path in strays(ctx)[1]:
        target = (sidecar_target(path) or ("", path))[1]
        (upcoming if target == upcoming_file(ctx, tree, target.rpartition("/")[0]) else other).append((tree, path, target))
    return upcoming, other


@check("WM010", WARNING, "orphaned checksum sidecar")
def orphan_crc(ctx: Context) -> Iterator[Issue]:
    for tree, path, target in orphans(ctx)[1]:
        name = target.rpartition("/")[2]
        written = version_file(name)
        if tree is ctx.tree and target.startswith(f"{STATE}/") and written and written[0].provider == "hdfs":
            then = ("; Spark writes HDFS state files over existing ones, checksum files included, so it is only a "
                    "leftover that hides what happened")
        else:
            then = (", but when Spark or a rewind writes a file of that name again, Hadoop's checksummed rename refuses "
                    "the existing sidecar (as WM029 shows for the next file)")
        yield Issue(tree.shown(path), f"checksum of {name}, which does not exist: the restart works{then}",
                    Instruction(f"delete {tree.shown(path)} while the query is stopped"))


@check("WM029", ERROR, "orphaned checksum sidecar of a file Spark writes next")
def upcoming_orphan_crc(ctx: Context) -> Iterator[Issue]:
    for tree, path, target in orphans(ctx)[0]:
        folder = target.rpartition("/")[0]
        when = " (when the source finds new files)" if folder.startswith(FILE_SOURCE_LOG.directory + "/") else ""
        fix = sidecar_fix(ctx, tree.shown(path), target)
        if folder.startswith(f"{STATE}/"):  # operator metadata and schemas go through CheckpointFileManager.createAtomic
            fails = f"'Rename destination .../{posixpath.basename(path)} already exists'"
        else:  # the metadata logs report a failed rename as a concurrent writer
            fails = f"'Multiple streaming queries are concurrently using .../{folder}'"
        yield Issue(tree.shown(path), (
            f"checksum of {tree.shown(target)}, which does not exist but is the next file Spark writes to "
            f"{tree.shown(folder)}/{when}: Hadoop's checksummed rename refuses the existing sidecar and the query fails "
            f"({fails}); " + ("a rewind removes it, with every orphaned sidecar after the batch it keeps in every log it "
                              "rewinds" if isinstance(fix, RewindRequest) else
                              f"once it is deleted Spark writes {posixpath.basename(target)} again, as for a new query")
        ), fix)


def sidecar_fix(ctx: Context, shown: str, target: str) -> Fix:
    """The rewind that removes the orphaned sidecar of ``target`` (a rewind removes those after the batch it keeps in
    each log): to the last committed batch (keeping a pending batch's offsets), for a file-source log to the newest
    committed batch that had not read that log batch yet; the sidecar of an operator metadata or state schema file
    that no batch names (v1 metadata, a schema) is deleted by hand."""
    done, by_hand = ctx.ckpt.last_committed_batch, Instruction(f"delete {shown} while the query is stopped")
    folder, _, name = target.rpartition("/")
    head, _, source = folder.partition("/")
    parsed = log_file_batch(name)
    if head == SOURCES and parsed is not None:
        ok = [b for b in restartable_batches(ctx.ckpt) if b in ctx.offsets and all(
            o.log_offset is None or o.source_id != source or o.log_offset < parsed[0] for o in ctx.offsets[b].sources)]
        return ctx.rewind(ok[-1]) if ok else by_hand
    if done is None or (head == STATE and posixpath.basename(folder) != "v2"):  # no batch names them: by hand
        return by_hand
    return RewindRequest(to_batch=done, file_sink=ctx.sink_location, keep_next_offsets=ctx.ckpt.pending_batch is not None)
