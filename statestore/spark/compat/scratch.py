"""The scratch copy a compat run restarts: exactly what Spark reads to re-run one batch, rewound so that it is
the next batch, on a local directory. The checkpoint itself is only read.

Batch N re-runs from ``offsets/N`` (kept), ``offsets/N-1`` and ``commits/N-1`` (its start), the source logs,
state version N of every store (the files that rebuild it, with the SSTs a snapshot names), the operator
metadata and schema files; a file sink's log comes along too (its data files do not). The rewind itself is
wmcheck's own rewind plan (``rewind --to-batch N-1 --keep-next-offsets --keep-source-log``), applied to the
copy, so that the operator metadata, schema files and sink log entries of batch N go exactly as a rewind
removes them; operator metadata naming schema files elsewhere is relocated to the copy's own.
"""
from __future__ import annotations

import os
import posixpath
import shutil

from wmcheck.checkpoint import repair
from wmcheck.checkpoint.errors import CheckpointError, MissingFileError, RefusedError, arg
from wmcheck.checkpoint.fs import FileSystem, LocalFileSystem
from wmcheck.checkpoint.layout import COMMITS, METADATA, OFFSETS, OWN_DIR, SINK_LOG, SOURCES, all_sidecars
from wmcheck.checkpoint.logs.metadata_log import COMMIT_LOG, OFFSET_LOG
from wmcheck.checkpoint.model import Checkpoint, store_unique_ids
from wmcheck.checkpoint.records import dataclass
from wmcheck.checkpoint.relocation import foreign_references
from wmcheck.checkpoint.repair.rewind import zip_sst_files
from wmcheck.checkpoint.watermarks.stall import batch_activity

CHECKPOINT_DIR, SINK_DIR = "checkpoint", "sink"
RERUN, PENDING, NEXT = "rerun", "pending", "next"
"""How the batch is chosen: a committed batch re-run with the new code, the planned batch a restart re-runs,
or the batch a restart plans next (when re-running a recorded one cannot say what a restart does)."""


@dataclass(frozen=True)
class Scratch:
    """A rewound copy: ``checkpoint`` re-runs ``batch`` next; ``sink`` holds the file sink's log (or None)."""

    root: str
    checkpoint: str
    sink: str | None
    batch: int
    files: int
    bytes: int


def rerun_batch(ckpt: Checkpoint, batch: int | None = None) -> tuple[int, str]:
    """The batch to run and how it is chosen: ``batch`` when given (checked); else the planned batch a restart
    re-runs (``pending``); else the last committed batch that read new input (``rerun``: a no-data batch only
    evicts, so it shows little of what new code does), else the last committed one."""
    committed = set(ckpt.commit_ids)
    offsets = ckpt.offset_id_set
    done = ckpt.last_committed_batch
    pending = ckpt.pending_batch

    def starts(b: int) -> bool:
        return b == 0 or (b - 1 in committed and b - 1 in offsets)

    if batch is not None:
        if batch == pending and starts(batch):
            return batch, PENDING
        if batch not in committed or batch not in offsets:
            raise CheckpointError(f"batch {batch} is not a committed batch with its offsets file", param="batch",
                                  hint=f"pick one of the retained committed batches (the last is {done})")
        if not starts(batch):
            raise MissingFileError(f"batch {batch} cannot be re-run: batch {batch - 1} it starts from was purged",
                                   path=COMMIT_LOG.path(batch - 1), hint="pick a later batch", param="batch")
        return batch, RERUN
    if pending is not None and starts(pending):
        return pending, PENDING
    if done is None:
        raise MissingFileError("the checkpoint has no committed batch: there is nothing to restart from",
                               path=COMMITS, hint="run the old query for at least one batch first")
    candidates = [b for b in sorted(committed & offsets, reverse=True) if starts(b)]
    if not candidates:
        raise MissingFileError(f"no committed batch can be re-run: the batches before {done} were purged",
                               path=OFFSETS, hint="Spark keeps spark.sql.streaming.minBatchesToRetain batches")
    return next((b for b in candidates if batch_activity(ckpt, b).data_batch), candidates[0]), RERUN


def _with_sidecars(fs: FileSystem, paths: list[str], present: set[str] | None = None) -> list[str]:
    out = []
    for path in paths:
        out.append(path)
        out += [s for s in all_sidecars(path) if (s in present if present is not None else fs.exists(s))]
    return out


def needed_files(ckpt: Checkpoint, batch: int) -> list[str]:
    """Every checkpoint file (relative path) Spark reads to run ``batch`` after ``batch - 1`` (its offsets file
    when it has one: a re-run)."""
    fs = ckpt.fs
    logs = [METADATA, OFFSET_LOG.path(batch)] + ([OFFSET_LOG.path(batch - 1), COMMIT_LOG.path(batch - 1)] if batch > 0 else [])
    if batch > 1 and not fs.exists(OFFSET_LOG.path(batch)):  # the next batch: a restart reads the offsets before the last
        logs.append(OFFSET_LOG.path(batch - 2))
    paths = _with_sidecars(fs, [p for p in logs if fs.exists(p)])
    paths += [i.path for i in fs.walk(SOURCES)] if fs.exists(SOURCES) else []
    if batch == 0:
        return paths
    layout = ckpt.state_layout
    present = {i.path for i in layout.crc_files}
    for op in ckpt.operators:
        for part in op.partitions:
            chain, missing = part.restore_plan(batch, store_unique_ids(ckpt, op, part))
            if missing is not None:
                raise MissingFileError(f"state version {batch} of {part.directory} cannot be rebuilt (version {missing} "
                                       "is missing)", path=part.directory, hint="pick a later batch", param="batch")
            paths += _with_sidecars(fs, [f.path for f in chain], present)
            bases = [f for f in chain if f.format.shared_dir]  # a RocksDB zip names the SSTs it needs
            if bases and part.sst_files:
                wanted = zip_sst_files(fs.read(bases[0].path), bases[0].path) or {i.name for i in part.sst_files}
                paths += _with_sidecars(fs, [i.path for i in part.sst_files if i.name in wanted], present)
            paths += [i.path for i in part.other_files]
    for files in layout.operators:
        paths += _with_sidecars(fs, [i.path for i in files.metadata_files + files.schema_files], present)
    return list(dict.fromkeys(paths))


def _copy(fs: FileSystem, paths: list[str], target: str) -> int:
    total = 0
    for path in paths:
        dst = os.path.join(target, *path.split("/"))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if isinstance(fs, LocalFileSystem):
            shutil.copyfile(fs.uri(path), dst)
        else:
            with open(dst, "wb") as out:
                out.write(fs.read(path))
        total += os.path.getsize(dst)
    return total


def make_scratch(ckpt: Checkpoint, batch: int, root: str, sink: FileSystem | None = None, rewind: bool = True) -> Scratch:
    """Copy what running ``batch`` needs into ``root`` (an empty local directory) and, with ``rewind``, rewind
    the copy so that the recorded ``batch`` runs again (else ``batch`` is the one after the last committed)."""
    files = needed_files(ckpt, batch)
    target = os.path.join(root, CHECKPOINT_DIR)
    size = _copy(ckpt.fs, files, target)
    sink_dir = None
    if sink is not None:
        sink_dir = os.path.join(root, SINK_DIR)
        logs = [i.path for i in sink.walk(SINK_LOG)]
        size += _copy(sink, logs, sink_dir)
        files += logs
        os.makedirs(sink_dir, exist_ok=True)
    copy = Checkpoint.open(target)
    if foreign_references(copy):
        repair.run(target, repair.RelocateRequest(), repair.RunOptions(execute=True, idle_ms=0))
    if rewind and batch > 0:
        try:
            repair.run(target, repair.RewindRequest(to_batch=batch - 1, file_sink=sink_dir, keep_next_offsets=True,
                                                    keep_source_log=True), repair.RunOptions(execute=True, idle_ms=0))
        except RefusedError as exc:
            raise RefusedError(f"batch {batch} cannot be re-run: {exc.message}", hint=f"pick another {arg('batch')}",
                               param="batch") from None
    elif rewind and sink_dir is not None:
        for name in os.listdir(os.path.join(sink_dir, SINK_LOG)):
            os.remove(os.path.join(sink_dir, SINK_LOG, name))  # batch 0 starts a sink without a log
    shutil.rmtree(os.path.join(target, OWN_DIR), ignore_errors=True)
    return Scratch(root, target, sink_dir, batch, len(files), size)


def sink_format(sink: FileSystem) -> str | None:
    """The data format of a file sink from its data files' names (``part-...snappy.parquet`` -> ``parquet``)."""
    for info in sink.list_dir(""):
        name = info.name
        if info.is_dir or name.startswith(("_", ".")):
            continue
        ext = posixpath.splitext(name)[1].lstrip(".")
        if ext in ("parquet", "json", "csv", "orc", "txt", "avro"):
            return "text" if ext == "txt" else ext
    return None
