"""Whether the user running the check can create files where Spark writes: a query running as that user fails
at its first batch otherwise (a read-only mount, a backup restored as another user)."""
from __future__ import annotations

import os
import stat
from typing import Iterator

from wmcheck.checkpoint.logs.metadata_log import FILE_SOURCE_LOG

from ..fs import local_path
from ..layout import COMMITS, OFFSETS, SINK_LOG
from .context import Context, Tree
from .definition import ERROR, Instruction, Issue, check
from .text import listed, plural


def written_dirs(ctx: Context) -> list[tuple[Tree, str]]:
    """The directories Spark creates files in: ``offsets/``, ``commits/``, each file source's log, every state
    store directory (and a RocksDB store's ``SSTs/``), the file sink and its log; those that exist."""
    tree, entries = ctx.tree, ctx.tree.entries
    dirs = [d for d in (OFFSETS, COMMITS) if d in entries] + [FILE_SOURCE_LOG.folder(i) for i in ctx.ckpt.source_dirs]
    for op in ctx.ckpt.state_layout.operators:
        for part in op.partitions:
            dirs.append(part.directory)
            if part.sst_files:
                dirs.append(f"{part.directory}/SSTs")
    out = [(tree, d) for d in dirs]
    if ctx.sink is not None:
        out += [(ctx.sink, ""), (ctx.sink, SINK_LOG)]
    return out


def why_not(path: str) -> str | None:
    """Why this process cannot create files in the local directory ``path`` (None when it can)."""
    if os.access(path, os.W_OK | os.X_OK):
        return None
    if os.statvfs(path).f_flag & os.ST_RDONLY:
        return "a read-only file system"
    info = os.stat(path)
    return f"owned by uid {info.st_uid}, mode {stat.filemode(info.st_mode)}"


@check("WM037", ERROR, "a directory Spark writes into is not writable")
def unwritable(ctx: Context) -> Iterator[Issue]:
    denied = []
    for tree, folder in written_dirs(ctx):
        path = local_path(tree.fs.uri(folder))
        reason = why_not(path) if path is not None and os.path.isdir(path) else None  # object stores: not knowable
        if reason is not None:
            denied.append((tree.shown(folder).rstrip("/") or ".", reason))
    if not denied:
        return
    uid = os.getuid()
    shown = [f"{d} ({reason})" for d, reason in denied]
    yield Issue(denied[0][0], (
        f"uid {uid}, the user this check ran as, cannot create files in {plural(len(denied), 'directory', 'directories')} "
        f"Spark writes into: {listed(shown)}. A query running as this user fails at the first batch that writes "
        f"there, on the temporary file it creates there ('Permission denied', or 'Read-only file system')"
    ), Instruction(f"run the query as a user that can write there, or give uid {uid} write access (chown or chmod; "
                   f"remount a read-only file system read-write); a query running as another user: check as that user"))
