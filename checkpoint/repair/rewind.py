"""Planning ``wmcheck rewind``: every file to remove or rebuild so that batch N is the last committed one.

Batch N reads state version N and writes N+1, so after the rewind Spark re-runs batch N+1 from
state version N+1: every state file of a higher version goes, with the operator metadata v2 and
state schema v3 files written by later batches. File-source logs go back to the ``logOffset`` of
the last offsets file kept (their files are then new again); a file sink's ``_spark_metadata`` goes
back to N, and the data files only the removed sink batches wrote are moved out of the sink.
"""
from __future__ import annotations

import posixpath
from functools import cached_property

from wmcheck.checkpoint.logs.metadata_log import COMMIT_LOG, FILE_SOURCE_LOG, OFFSET_LOG, MetadataLog
from wmcheck.checkpoint.logs.source_offsets import SourceOffset
from wmcheck.checkpoint.records import dataclass
from wmcheck.statestore.formats.files import StorePartition
from wmcheck.statestore.formats.registry import SST_DIR
from wmcheck.statestore.rocksdb.zips import read_snapshot_zip

from ..errors import CheckpointError, RefusedError, arg
from ..fs import FileInfo, FileSystem
from ..layout import COMMITS, OFFSETS, SINK_LOG, SOURCES, sidecar_target
from ..locations import SinkFiles
from ..model import Checkpoint, Operator, store_unique_ids
from ..numbers import is_number
from ..repartitions import partitions_of
from ..sources.other import NONE
from .logs import LogRewind, read_parsed, remove_steps, rewind_log, sink_orphans
from .plan import Plan, SourcePosition, Step
from .plan_params import Position, RewindParams
from .targets import retained_batches

MAX_ZIP = 256 << 20
"""A snapshot zip holds RocksDB's small files (SSTs are shared); a larger one is not read for its SST list."""
MAX_LISTED = 3


@dataclass(frozen=True)
class FileSink:
    """The file sink directory named by ``--file-sink`` (it holds ``_spark_metadata/``)."""

    fs: FileSystem
    location: str


class RewindView:
    """What the planner lists and reads once, shared by every candidate batch it checks."""

    def __init__(self, ckpt: Checkpoint, sink: FileSink | None = None) -> None:
        self.ckpt = ckpt
        self.sink = sink
        self.read_source = ckpt.file_log
        self.read_sink = read_parsed(sink.fs) if sink else None

    @cached_property
    def commits(self) -> dict[str, FileInfo]:
        return {i.path: i for i in self.ckpt.fs.list_dir(COMMITS)}

    @cached_property
    def offsets(self) -> dict[str, FileInfo]:
        return {i.path: i for i in self.ckpt.fs.list_dir(OFFSETS)}

    @cached_property
    def state_crc(self) -> dict[str, FileInfo]:
        return {i.path: i for i in self.ckpt.state_layout.crc_files}

    @cached_property
    def source_dirs(self) -> set[str]:
        return {i.name for i in self.ckpt.fs.list_dir(SOURCES) if i.is_dir}

    @cached_property
    def sink_log(self) -> MetadataLog | None:
        return MetadataLog.listed(self.sink.fs, SINK_LOG) if self.sink else None

    @cached_property
    def latest_sources(self) -> tuple:
        """The sources of the newest offsets file that parses (files after a rewind target may be broken)."""
        for batch in reversed(self.ckpt.offset_ids):
            try:
                return tuple(self.ckpt.offsets(batch).sources)
            except CheckpointError:
                continue
        return ()

    def source_log(self, name: str) -> MetadataLog:
        return self.ckpt.metadata_log(FILE_SOURCE_LOG.folder(name))

    def file_sources(self, batch: int) -> list[tuple[str, int]]:
        """(``sources/`` directory, log batch to keep) of each file source, as of offsets/``batch``.

        A source is a file source when its offset in the last offsets file is ``{"logOffset": n}``
        (or a bare number, Spark 2.1) and it has a log directory; no offset yet keeps nothing (-1).
        """
        last = self.latest_sources
        out = []
        for index, src in enumerate(self.ckpt.offsets(batch).sources):
            name = src.source_id if src.source_id in self.source_dirs else str(index)
            latest = next((s for s in last if s.source_id == src.source_id), src)
            if name in self.source_dirs and (src.log_offset is not None or latest.log_offset is not None):
                out.append((name, src.log_offset if src.log_offset is not None else -1))
        return out


@dataclass(frozen=True)
class Options:
    keep_next_offsets: bool = False
    keep_source_log: bool = False
    restoring: bool = False
    """Removing a batch a repair wrote: the checkpoint goes back to what it was, whether Spark restarted from it or not."""

    def last_offsets(self, batch: int) -> int:
        return batch + 1 if self.keep_next_offsets else batch


def loadable(ckpt: Checkpoint, op: Operator, part: StorePartition, version: int) -> bool:
    """Whether ``version`` of one store partition can be rebuilt (by unique id for checkpoint format v2)."""
    return part.can_load(version, store_unique_ids(ckpt, op, part))


def problems(view: RewindView, batch: int, opts: Options) -> list[str]:
    """Why ``batch`` cannot be rewound to (empty when it can)."""
    ckpt = view.ckpt
    done = ckpt.last_committed_batch
    if done is None:
        return ["no batch is committed yet"]
    if batch > done:
        return [f"batch {batch} is not committed: the last committed batch is {done}"]
    out = [f"{d}/{batch} " + ("does not exist, a gap in the log (async progress tracking logs only some batches; "
                              "otherwise a lost file)" if ids and batch > ids[0] else
                              "no longer exists (purged by spark.sql.streaming.minBatchesToRetain)")
           for d, ids in ((COMMITS, ckpt.commit_ids), (OFFSETS, ckpt.offset_ids)) if batch not in ids]
    if out:
        return out
    if opts.keep_next_offsets and batch + 1 not in ckpt.offset_id_set:
        return [f"{arg('keep_next_offsets')}: there is no offsets/{batch + 1} to keep"]
    last = opts.last_offsets(batch)
    gone = ckpt.start_offsets_missing(last)
    if gone is not None and not opts.restoring:
        out.append(f"offsets/{gone} no longer exists: Spark restarting with offsets/{last} as the last offsets file "
                   f"reads it as where batch {last} started, and fails ('batch {gone} doesn't exist')"
                   + (f"; with {arg('keep_next_offsets')} it reads offsets/{batch} instead"
                      if batch + 1 in ckpt.offset_id_set else ""))
    version = batch + 1
    count = partitions_of(ckpt, batch)  # partitions above it were added by a later repartition: never loaded
    bad = [p.directory for op in ckpt.operators for p in op.partitions
           if (count is None or p.partition < count) and not loadable(ckpt, op, p, version)]
    if bad:
        out.append(f"state version {version} can no longer be rebuilt in {_some(bad)} "
                   "(its files were purged by spark.sql.streaming.minBatchesToRetain)")
    if not opts.keep_source_log:
        for name, target in view.file_sources(opts.last_offsets(batch)):
            got = rewind_log(view.source_log(name), "checkpoint", target, "sources", view.read_source, rebuild=True)
            if got.problem:
                out.append(got.problem)
    if view.sink_log is not None and view.read_sink is not None:
        got = rewind_log(view.sink_log, "sink", batch, "sink", view.read_sink, rebuild=False)
        if got.problem:
            out.append(f"file sink: {got.problem}")
    return out


def _some(items: list[str]) -> str:
    more = len(items) - MAX_LISTED
    return ", ".join(items[:MAX_LISTED]) + (f" and {more} more" if more > 0 else "")


def oldest_rewindable(view: RewindView, opts: Options) -> int | None:
    """The oldest batch this checkpoint (and sink) can be rewound to, None when there is none."""
    return next((b for b in retained_batches(view.ckpt) if not problems(view, b, opts)), None)


def newest_rewindable(view: RewindView, opts: Options) -> int | None:
    """The newest batch this checkpoint (and sink) can be rewound to, None when there is none."""
    return next((b for b in reversed(retained_batches(view.ckpt)) if not problems(view, b, opts)), None)


def refuse(view: RewindView, batch: int | None, reasons: list[str], opts: Options, how: str,
           param: str | None = None) -> RefusedError:
    """The refusal of a rewind to ``batch`` (chosen ``how``, by ``param``); its hint names the nearest batch that
    can be rewound to: the newest for a batch past it, else the oldest."""
    oldest = oldest_rewindable(view, opts)
    newest = newest_rewindable(view, opts) if batch is not None and oldest is not None and batch > oldest else None
    what = f"cannot rewind to batch {batch}" if batch is not None else f"cannot rewind: {how}"
    detail = f": {reasons[0]}" + (f" (and {len(reasons) - 1} more problems)" if len(reasons) > 1 else "") if reasons else ""
    hint = (f"the newest batch this checkpoint can be rewound to is {newest}" if batch is not None and newest is not None
            and batch > newest else f"the oldest batch this checkpoint can be rewound to is {oldest}" if oldest is not None
            else "no retained batch can be rewound to")
    err = RefusedError(what + detail, hint=hint, param=param)
    err.oldest_batch = oldest
    return err


def plan_rewind(
    ckpt: Checkpoint,
    batch: int | None,
    *,
    sink: FileSink | None = None,
    keep_next_offsets: bool = False,
    keep_source_log: bool = False,
    restoring: bool = False,
    how: str | None = None,
    param: str | None = None,
    created_ms: int = 0,
    sink_named: bool = False,
) -> Plan:
    """The plan that makes ``batch`` the last committed batch; RefusedError when it cannot be done safely
    (``restoring``: removing the batches a repair wrote, which puts back a checkpoint Spark may not restart from;
    ``sink_named``: the caller says what another sink does with the re-run batches, so no warning about it)."""
    view = RewindView(ckpt, sink)
    opts = Options(keep_next_offsets, keep_source_log, restoring)
    how = how or arg("to_batch", batch)
    reasons = problems(view, batch, opts) if batch is not None else []
    if batch is None or reasons:
        raise refuse(view, batch, reasons, opts, how, param)
    warnings: list[str] = []
    steps = _log_steps(view, batch, opts) + state_steps(view, batch, warnings)
    steps += _source_steps(view, batch, opts, warnings)
    steps += _sink_steps(view, batch, warnings)
    last = opts.last_offsets(batch)
    top = ckpt.offset_ids[-1]  # the last batch: there is one, since ``batch`` can be rewound to
    replayed = f"{batch + 1}..{top}" if top > batch + 1 else f"{batch + 1}"
    if sink is None and not sink_named and top > batch:
        warnings.append(
            f"no {arg('file_sink')} given: sinks that remember batch ids (a file sink's _spark_metadata, Delta's "
            f"txnVersion, foreachBatch writers that use batchId) may skip or duplicate the replayed batches {replayed}")
    warnings += _other_source_notes(view, last)
    meta = ckpt.offsets(last).metadata if last != batch else None
    after_watermark = meta.batch_watermark_ms if meta is not None else ckpt.watermark_after(batch)
    return Plan(
        command="rewind",
        checkpoint=ckpt.location,
        file_sink=sink.location if sink else None,
        request=RewindParams(batch, keep_next_offsets, keep_source_log),
        before=Position(ckpt.last_batch, ckpt.last_committed_batch, watermark_ms=_current_watermark(ckpt)),
        after=Position(last, batch, next_batch=batch + 1, watermark_ms=after_watermark, next_state_version=batch + 1),
        steps=tuple(steps),
        warnings=tuple(warnings),
        created_ms=created_ms,
        notes=(f"target: {how}",),
        sources=source_positions(ckpt, last),
    )


def _current_watermark(ckpt: Checkpoint) -> int | None:
    """The watermark before the rewind; None when the files after the target that hold it do not parse."""
    try:
        return ckpt.watermark_ms
    except CheckpointError:
        return None


def _log_steps(view: RewindView, batch: int, opts: Options) -> list[Step]:
    """commits/ and offsets/ after the target, highest batch first (its commit before its offsets)."""
    ckpt, last = view.ckpt, opts.last_offsets(batch)
    commits = {b for b in ckpt.commit_ids if b > batch}
    offsets = {b for b in ckpt.offset_ids if b > last}
    steps: list[Step] = []
    for b in sorted(commits | offsets, reverse=True):
        if b in commits:
            steps += remove_steps("checkpoint", view.commits[COMMIT_LOG.path(b)], view.commits.get, "commits",
                                  f"batch {b} > {batch}")
        if b in offsets:
            steps += remove_steps("checkpoint", view.offsets[OFFSET_LOG.path(b)], view.offsets.get, "offsets",
                                  f"batch {b} > {last}")
    for folder, listing, after in ((COMMITS, view.commits, batch), (OFFSETS, view.offsets, last)):
        for info in sorted(listing.values(), key=lambda i: i.path):
            target = sidecar_target(info.path)
            main = target[1] if target else ""
            name = main.rpartition("/")[2]
            if name.isdigit() and int(name) > after and main not in listing:
                steps.append(Step("remove", "checkpoint", info.path, folder, f"orphaned checksum of {folder}/{name} "
                                  f"(batch {name} > {after}): Spark's rename refuses it when it writes {name} again",
                                  info.size, info.mtime_ms))
    return steps


def state_steps(view: RewindView, batch: int, warnings: list[str]) -> list[Step]:
    """State files of versions > batch + 1 (highest first), then orphaned SSTs, then later metadata and the orphaned
    checksum files of later operator metadata."""
    version = batch + 1
    layout = view.ckpt.state_layout
    doomed = sorted(((f.version, f) for op in layout.operators for p in op.partitions for f in p.files
                     if f.version > version), key=lambda vf: (-vf[0], vf[1].path))
    steps: list[Step] = []
    for v, f in doomed:
        steps += remove_steps("checkpoint", f, view.state_crc.get, "state", f"state version {v} > {version}")
    for op in layout.operators:
        for part in op.partitions:
            for info in _orphaned_ssts(view.ckpt.fs, part, version, warnings):
                steps += remove_steps("checkpoint", info, view.state_crc.get, "state",
                                      f"SST referenced only by removed snapshots (versions > {version})")
    for op in layout.operators:
        for info in sorted(op.metadata_files, key=lambda i: i.path):
            if posixpath.basename(posixpath.dirname(info.path)) == "v2" and is_number(info.name) and int(info.name) > batch:
                steps += remove_steps("checkpoint", info, view.state_crc.get, "metadata",
                                      f"operator metadata written by batch {info.name} > {batch}")
        for info in sorted(op.schema_files, key=lambda i: i.path):
            head = info.name.split("_", 1)[0]
            if "_" in info.name and is_number(head) and int(head) > batch:
                steps += remove_steps("checkpoint", info, view.state_crc.get, "metadata",
                                      f"state schema written by batch {head} > {batch}")
    present = {info.path for op in layout.operators for info in op.metadata_files}
    for info in sorted(layout.crc_files, key=lambda i: i.path):
        folder, name = posixpath.split((sidecar_target(info.path) or ("", ""))[1])
        if (posixpath.basename(folder) == "v2" and is_number(name) and int(name) > batch
                and posixpath.join(folder, name) not in present):
            steps.append(Step("remove", "checkpoint", info.path, "metadata", f"orphaned checksum of operator metadata "
                              f"{folder}/{name} (batch {name} > {batch}): Spark's rename refuses it when it writes {name} "
                              "again", info.size, info.mtime_ms))
    return steps


def zip_sst_files(data: bytes, path: str = "") -> set[str] | None:
    """The ``SSTs/`` file names a RocksDB snapshot zip references (its ``metadata`` entry), None if unreadable."""
    if len(data) > MAX_ZIP:
        return None
    try:
        return {f.dfs_name for f in read_snapshot_zip(data, path)[1].sst_files}
    except CheckpointError:
        return None  # a corrupt or unexpected zip: its SST list is unknown


def _orphaned_ssts(fs: FileSystem, part: StorePartition, version: int, warnings: list[str]) -> list[FileInfo]:
    """SST files only the removed snapshot zips reference; every SST a kept zip references stays."""
    zips = [f for f in part.files if f.format.shared_dir]
    if not part.sst_files or not any(z.version > version for z in zips):
        return []
    data = fs.read_many([z.path for z in zips])
    refs = {z.path: zip_sst_files(data[z.path], z.path) for z in zips}
    unreadable = [p for p, r in refs.items() if r is None]
    if unreadable:
        warnings.append(f"{unreadable[0]}: cannot read its SST file list, so {part.directory}/{SST_DIR}/ is left as it is")
        return []
    kept = {name for z in zips if z.version <= version for name in refs[z.path] or ()}
    dropped = {name for z in zips if z.version > version for name in refs[z.path] or ()} - kept
    return sorted((i for i in part.sst_files if i.name in dropped), key=lambda i: i.path)


def _source_steps(view: RewindView, batch: int, opts: Options, warnings: list[str]) -> list[Step]:
    steps: list[Step] = []
    last = opts.last_offsets(batch)
    for name, target in view.file_sources(last):
        log = view.source_log(name)
        later = [b for b in log.files if b > target]
        if opts.keep_source_log:
            if later:
                warnings.append(
                    f"{arg('keep_source_log')}: {log.directory} keeps log batches {later[0]}..{later[-1]}, so Spark "
                    f"reads all of their files in batch {last + 1} at once (maxFilesPerTrigger does not apply), "
                    "and event-time results can differ from the first run")
            continue
        got: LogRewind = rewind_log(log, "checkpoint", target, "sources", view.read_source, rebuild=True)
        steps += got.steps
    return steps


def _sink_steps(view: RewindView, batch: int, warnings: list[str]) -> list[Step]:
    log, read = view.sink_log, view.read_sink
    if view.sink is None or log is None or read is None:
        return []
    got = rewind_log(log, "sink", batch, "sink", read, rebuild=False)
    steps = list(got.steps)
    files = SinkFiles(view.sink.fs, view.sink.fs.root)
    missing = []
    orphans, unreadable = sink_orphans(got, read)
    if unreadable:
        warnings.append(f"{unreadable[0]} does not parse: the data files it names, if any, stay in the sink, which "
                        "Spark's readers ignore (it reads the sink through its log)")
    for entry in orphans:
        info = files.find(entry)
        if info is None:
            missing.append(entry)
            continue
        steps += remove_steps("sink", info, view.sink.fs.info, "sink-data", "written only by removed sink batches")
    if missing:
        warnings.append(f"{len(missing)} data file(s) of removed sink batches are not in the sink directory "
                        f"(nothing to move), e.g. {missing[0]}")
    return steps


def source_positions(ckpt: Checkpoint, last: int) -> tuple[SourcePosition, ...]:
    """Where each source continues from now (the end offsets of the last batch that parses) and after a rewind
    whose last batch is ``last``, as ``kafka-consumer-groups --reset-offsets --dry-run`` shows them: a file
    source's log batch, each Kafka topic partition's offset, a Delta source's version and index."""
    now = ckpt.last_readable_batch
    before = {s.source_id: s for s in ckpt.offsets(now).sources} if now is not None else {}
    after = {s.source_id: s for s in ckpt.offsets(last).sources}
    out: list[SourcePosition] = []
    for source_id in list(after) + [i for i in before if i not in after]:
        old, new = before.get(source_id), after.get(source_id)
        kind = next((s.source for s in (old, new) if s is not None and s.raw is not None), NONE)
        out += [SourcePosition(source_id, kind.name, what, was, will) for what, was, will in kind.rewind_positions(old, new)]
    return tuple(out)


def _other_source_notes(view: RewindView, last: int) -> list[str]:
    files = {name for name, _ in view.file_sources(last)}
    out = []
    for index, src in enumerate(view.ckpt.offsets(last).sources):
        if src.source_id in files or str(index) in files or not src.source.restarts_from_offsets:
            continue
        out.append(f"source {src.source_id} ({src.kind}) restarts from its offsets of batch {last}: {src.summary()}"
                   + _new_partitions(view, src) + "; data the source no longer retains (e.g. past Kafka retention) "
                   "cannot be replayed")
    return out


def _new_partitions(view: RewindView, src: SourceOffset) -> str:
    """The Kafka partitions the source reads now that batch ``src`` is from did not: Spark reads them anew."""
    now = view.ckpt.last_readable_batch
    if src.kafka_offsets is None or now is None:
        return ""
    was = next((s.kafka_offsets for s in view.ckpt.offsets(now).sources if s.source_id == src.source_id), None) or {}
    new = [f"{t}[{p}]" for t in sorted(was) for p in sorted(was[t], key=int) if p not in src.kafka_offsets.get(t, {})]
    return (f", and {', '.join(new)}, which it had not read by then, from the earliest offset the broker keeps "
            "(Spark reads partitions its offsets do not name from there)") if new else ""
