"""The check for state entries of the wrong kind: a directory where Spark reads a state file, a file where it writes a
directory."""
from __future__ import annotations

import posixpath
from typing import Iterator

from wmcheck.statestore.formats.registry import StateFormat, formats_of, version_file

from ..layout import STATE
from ..numbers import is_number
from .context import Context
from .definition import ERROR, Instruction, Issue, check
from .state_reads import load_version

SNAPSHOT, _ = formats_of("hdfs")
"""The HDFS-backed store's full copy: Spark lists every entry named so, directories too, and fails on the newest."""


def named_dirs(ctx: Context, version: int) -> Iterator[tuple[str, StateFormat, int]]:
    """(directory, the format its name gives, that version) of each directory named as a state file that Spark reads
    or writes from the load of ``version`` on: an HDFS snapshot's name, the newest at or below ``version``; an
    increment's name after the full copy that load starts from."""
    for op in ctx.operators:
        for part in op.live_partitions:
            named = [(d, *found[:2]) for d in part.named_dirs if (found := version_file(posixpath.basename(d)))]
            bases = [f.version for f in part.files if f.format.role == "base" and f.version <= version]
            snapshots = [v for _, fmt, v in named if fmt == SNAPSHOT and v <= version]
            start = max([*bases, *snapshots], default=0)
            for directory, fmt, at in named:
                if fmt == SNAPSHOT and at == start and at not in bases or fmt.role == "increment" and at > start:
                    yield directory, fmt, at


@check("WM073", ERROR, "a directory where Spark reads a state file, or a file where it writes a directory")
def misplaced_entries(ctx: Context) -> Iterator[Issue]:
    version = load_version(ctx)
    for directory, fmt, at in named_dirs(ctx, version):
        move = f"move the directory {directory} out of the checkpoint (or delete it) while the query is stopped"
        if fmt == SNAPSHOT:
            yield Issue(directory, (
                f"a directory named as the snapshot of version {at}: Spark 4.3's HDFS-backed state store lists every "
                f"entry named 'V.snapshot', directories too, and loading state version {version}, which the next batch "
                f"loads, starts from the newest at or below it, this one: the load fails, and automatic snapshot repair "
                f"does not step over it ('[CANNOT_LOAD_STATE_STORE.UNCATEGORIZED] An error occurred during loading "
                f"state', caused by 'NoSuchElementException: None.get', tested, an empty directory too). Without it "
                f"Spark rebuilds the version from the older snapshot or the deltas (tested: the control run's output). "
                f"Spark 3.5 opens a snapshot by its name only, takes the directory for none and rebuilds the version from "
                f"the deltas: it restarts correctly (tested)"
            ), Instruction(move))
        elif at <= version:
            yield Issue(directory, (
                f"a directory named as the {fmt.kind} of version {at}, which loading state version {version} (the next "
                f"batch's) replays: Spark fails to read it (tested: 'CANNOT_READ_DELTA_FILE_NOT_EXISTS … (Is a "
                f"directory)'), and a rewind that makes Spark write that version again fails on it too ('… must both "
                f"be directories', tested), so the {fmt.kind} is gone (WM016) and the directory must go first"
            ), Instruction(f"{move}; then run the rewind WM016 gives for the missing {fmt.kind} (check again)"))
        else:
            yield Issue(directory, (
                f"a directory named as the {fmt.kind} of version {at}, which Spark writes when a batch gets there: its "
                f"commit renames the new file onto that name and fails ('[CANNOT_WRITE_STATE_STORE.CANNOT_COMMIT] … must "
                f"both be directories', tested with a rewound batch)"
            ), Instruction(move))
    for info in ctx.ckpt.state_layout.unknown_files:
        parts = info.path.split("/")
        if len(parts) == 3 and parts[0] == STATE and is_number(parts[1]) and parts[2] == "_metadata":
            yield Issue(info.path, (
                f"a file where Spark keeps operator {parts[1]}'s metadata directory: every batch writes the operator "
                f"metadata into {info.path}/ (Spark 4), and the restart's first batch fails "
                f"('FileAlreadyExistsException: Destination exists and is not a directory', tested); Spark 3.5 writes no "
                f"operator metadata and restarts correctly (tested)"
            ), Instruction(f"move the file {info.path} out of the checkpoint (or delete it) while the query is stopped: "
                           f"Spark writes the operator metadata anew"))
