"""Why a location is no checkpoint, and which one the user meant: the checkpoint below it (a query's folder holding
``checkpoint/``), the one holding it (``state/0/1``, ``offsets``), or the query of a file sink's output."""
from __future__ import annotations

import posixpath

from .errors import CheckpointError, NotACheckpointError, arg
from .fs import FileSystem
from .layout import COMMITS, OFFSETS, SINK_LOG

CHECKPOINT_ENTRIES = frozenset({OFFSETS, COMMITS, "metadata"})
LOOKED_INTO = 20
"""How many directories below a location that is not a checkpoint are looked into for one."""


LOOKED_ABOVE = 5
"""How many directories above a location that is not a checkpoint are looked at for the one holding it
(``state/<op>/<partition>/SSTs`` lies four below its checkpoint)."""


def checkpoints_below(fs: FileSystem, names: set[str]) -> list[str]:
    """The directories among ``names`` (the entries of ``fs``'s root) that are checkpoints: what a user meant who
    passed the directory above one (a query's folder holding ``checkpoint/``, ``input/`` and ``output/``)."""
    candidates = sorted(names, key=lambda n: (n != "checkpoint", n))[:LOOKED_INTO]
    return [name for name in candidates if not name.startswith((".", "_")) and set(fs.names(name)) & CHECKPOINT_ENTRIES]


def holder_above(fs: FileSystem) -> tuple[FileSystem, str, bool] | None:
    """The checkpoint, or file sink output, that holds ``fs``'s root: what a user meant who passed a directory inside
    one (``state/0/1``, ``offsets``, ``sources/0``, a sink's ``_spark_metadata``); as (its file system, the root's
    path in it, whether it is a file sink's output). None when none of the :data:`LOOKED_ABOVE` directories above
    is one, or one cannot be listed."""
    here, inside = fs, ""
    for _ in range(LOOKED_ABOVE):
        up = here.parent()
        if up is None:
            return None
        inside = posixpath.join(posixpath.basename(here.root.rstrip("/")), inside).rstrip("/")
        try:
            names = set(up.names(""))
        except CheckpointError:
            return None
        if names & CHECKPOINT_ENTRIES or SINK_LOG in names:
            return up, inside, not names & CHECKPOINT_ENTRIES
        here = up
    return None


def not_a_checkpoint(fs: FileSystem, names: set[str]) -> NotACheckpointError:
    """Why ``fs``'s root (whose entries are ``names``) is no checkpoint, the hint naming the location the user meant:
    the checkpoint below it or the one holding it (:attr:`~.errors.NotACheckpointError.suggested`), or, for a file
    sink's output directory or a directory in it, the query's checkpoint with the sink."""
    below = checkpoints_below(fs, names)
    above = None if below or SINK_LOG in names else holder_above(fs)
    sink = fs if SINK_LOG in names else above[0] if above is not None and above[2] else None
    if below:
        hint = f"did you mean {' or '.join(fs.uri(b) for b in below)}? It holds offsets/ and commits/"
    elif sink is not None:
        hint = (f"{sink.uri()} is the output directory of a file sink: pass the query's checkpointLocation, and "
                f"{arg('file_sink', sink.uri())} to check the sink against it")
    elif above is not None:
        hint = f"did you mean {above[0].uri()}? It is the checkpoint that {above[1]}/ belongs to"
    else:
        hint = "pass the directory given as checkpointLocation (it holds offsets/ and commits/)"
    error = NotACheckpointError(f"not a Structured Streaming checkpoint: no offsets/, commits/ or metadata in {fs.uri()}",
                                hint=hint)
    error.suggested = fs.uri(below[0]) if len(below) == 1 else above[0].uri() if above and sink is None else None
    return error
