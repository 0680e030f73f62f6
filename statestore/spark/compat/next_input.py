"""What the next batches read: the input the sources hold now, or for a file source the new files the user points to
(``next_inputs``: source id -> a directory). A source of another kind (Kafka, a Python data source) cannot be given
input: its next batches would read its live input, so they are not run (:class:`~.results.NotFed`).

A given directory's files are copied into a directory of the scratch copy, which the source reads instead of its own
path (its ``spark.readStream`` call is answered by the same reader over that directory). A restart reads the files
the last committed batch logged once more (the file source restores its position from them), under the source's
path: those are copied there too, and the copy's source log relocated to it.
"""
from __future__ import annotations

import os
import posixpath
import shutil
from typing import Mapping

from wmcheck.checkpoint import repair
from wmcheck.checkpoint.batch_inputs import article, plan_batch
from wmcheck.checkpoint.errors import CheckpointError, MissingFileError, UnsupportedError, arg
from wmcheck.checkpoint.fs import local_path, open_fs
from wmcheck.checkpoint.locations import spark_location
from wmcheck.checkpoint.model import Checkpoint
from wmcheck.checkpoint.records import dataclass
from wmcheck.statestore.spark.compat.results import NotFed
from wmcheck.statestore.spark.compat.substitute import BatchRows

FED = "file"
"""The source kind compat can give the next batches input for."""


@dataclass(frozen=True)
class NextInput:
    """New files for a file source's next batches: the directory given and its data files (path under it, mtime)."""

    source_id: str
    location: str
    files: tuple[tuple[str, int], ...]


def not_fed(ckpt: Checkpoint, last: int) -> tuple[NotFed, ...]:
    """The sources (of the last committed batch ``last``) whose next input compat cannot give."""
    if last < 0:
        return ()
    return tuple(NotFed(s.source_id, s.kind, f"compat can give the next batches a file source's files only; {article(s.kind)} "
                        "source would read its live input")
                 for s in plan_batch(ckpt, last, sizes=False).sources if s.kind != FED)


def _data_files(location: str, fs_options: Mapping[str, str]) -> tuple[tuple[str, int], ...]:
    fs = open_fs(location, fs_options)
    return tuple(sorted((i.path, i.mtime_ms) for i in fs.walk("")
                        if not any(p.startswith(("_", ".")) for p in i.path.split("/"))))


def next_inputs(ckpt: Checkpoint, last: int, given: Mapping[str, str], fs_options: Mapping[str, str]
                ) -> tuple[NextInput, ...]:
    """Check ``given`` (before Spark starts): each names a file source of the last committed batch and a directory
    with data files."""
    if not given:
        return ()
    kinds = {s.source_id: s.kind for s in plan_batch(ckpt, last, sizes=False).sources} if last >= 0 else {}
    out = []
    for sid, location in sorted(given.items()):
        named, kind = arg("next_inputs", f"{sid}={location}"), kinds.get(sid)
        if kind != FED:
            raise CheckpointError(f"{named}: " + (f"the checkpoint has no source {sid}" if kind is None else
                                                  f"source {sid} is {article(kind)} source; only a file source's next "
                                                  "batches can be given files"), param="next_inputs",
                                  hint="source ids as `wmcheck batches` lists them (0, 1, ...)")
        files = _data_files(location, fs_options)
        if not files:
            raise MissingFileError(f"{named}: no data files there", param="next_inputs",
                                   hint=f"a directory of the new input files source {sid} would find")
        out.append(NextInput(sid, location, files))
    return tuple(out)


def _copy_local(location: str, target: str) -> None:
    found = local_path(spark_location(location))
    if found is None:
        raise UnsupportedError(f"{arg('next_inputs')} needs the last batch's logged files on a local file system: "
                               f"{location} is not", param="next_inputs")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    shutil.copy2(found, target)


def feed(checkpoint: str, last: int, root: str, given: NextInput, fs_options: Mapping[str, str]) -> BatchRows:
    """Put ``given``'s files (and the files the last committed batch logged) in a directory of the scratch copy
    ``checkpoint`` under ``root``, the copy's source log relocated to it: the directory the source then reads."""
    target = os.path.join(root, "next-input", given.source_id)
    fs = open_fs(given.location, fs_options)
    for path, mtime_ms in given.files:
        out = os.path.join(target, path)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "wb") as stream:
            stream.write(fs.read(path))
        os.utime(out, (mtime_ms / 1000, mtime_ms / 1000))
    logged = [s for s in plan_batch(Checkpoint.open(checkpoint), last, sizes=False).sources
              if s.source_id == given.source_id][0].files
    if logged:
        base = posixpath.commonpath([posixpath.dirname(f.path) for f in logged])
        for f in logged:
            _copy_local(f.location, os.path.join(target, f.path[len(base):].lstrip("/")))
        repair.run(checkpoint, repair.RelocateRequest(path_map={base: target}), repair.RunOptions(execute=True, idle_ms=0))
        shutil.rmtree(f"{checkpoint}/_wmcheck", ignore_errors=True)
    return BatchRows(given.source_id, target, FED, ())
