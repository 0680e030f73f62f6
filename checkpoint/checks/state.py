"""Checks of the state the next batch loads: files Spark fails to read or skips, rows it never reads, state that
cannot be rebuilt, and files of versions beyond the last batch."""
from __future__ import annotations

import posixpath
from typing import Iterator

from wmcheck.statestore.formats.content import LOAD_ERROR, Decoding, damage
from wmcheck.statestore.formats.files import BASE_KINDS, StateFile, StorePartition
from wmcheck.statestore.formats.load import StoreLoad, resolve, verify_loads
from wmcheck.statestore.formats.registry import formats_of, unloadable_base_name
from wmcheck.statestore.formats.row_checksums import VERIFICATION_FAILED, RowPlace

from ..errors import CheckpointError
from ..model import Operator
from ..numbers import java_long
from ..pinned_conf import ROW_CHECKSUM, effective
from .context import Context
from .definition import ERROR, WARNING, Fix, Instruction, Issue, check
from .logs import checkpoint_format
from .remedies import state_rewind
from .state_reads import content_loads, file_kinds, lineages, load_version, plans, rewind_fix
from .text import listed, plural, span


def content_rewind_fix(ctx: Context, load: StoreLoad) -> tuple[str, Fix]:
    """The rewind to the newest batch whose state every partition loads, avoiding the damaged file, and what it
    does."""
    failed = load.failure
    target = (failed.version if failed and failed.version is not None else load.version) - 1
    decoding = Decoding.of(ctx.conf)
    while target > 0:
        ok = True
        for p in plans(ctx):
            newest = p.part.newest_loadable(target, p.ids)
            if newest != target:
                target, ok = newest, False
                break
            checked = verify_loads(ctx.ckpt.fs, [resolve(p.part, target, p.ids, lineages(ctx))], decoding,
                                   lineages=lineages(ctx), sidecars=ctx.tree.entries)[0]
            if not checked.loadable:
                bad = checked.failure.version if checked.failure and checked.failure.version is not None else target
                target, ok = min(target, bad) - 1, False
                break
        if ok:
            break
    if target > 0:
        kept, fix = state_rewind(ctx, target - 1)
        return (f"batch {target - 1} is the newest batch whose state every partition loads{kept} (restoring the file "
                f"from a backup works too)", fix)
    return "no committed batch loads without it", Instruction(
        "restore the file from a backup (wmcheck undo if a wmcheck repair changed it), or start the query from a new "
        "checkpoint")


@check("WM039", ERROR, "state file Spark fails to read")
def damaged(ctx: Context) -> Iterator[Issue]:
    for load in content_loads(ctx):
        failed = load.failure
        if failed is None or failed.on_read:
            continue
        base, step = file_kinds(load.part)
        fallback = (f" (its newest {base} could not be loaded either, and {'the empty state' if not load.fallback else f'version {load.fallback}'}"
                    f" was tried instead)") if load.skipped else ""
        why, fix = content_rewind_fix(ctx, load)
        spark35 = ""
        if failed.problem.startswith(VERIFICATION_FAILED) and written_without_row_checksums(ctx):
            spark35 = (" (Spark 4 verifies row checksums; Spark 3.5 does not restore "
                       f"{ROW_CHECKSUM} and reads the rows as they were written, without: it restarts correctly)")
        yield Issue(failed.path, (
            f"{failed.describe()}: Spark fails to load state version {load.version} of {load.part.directory}, which the "
            f"next batch loads, reading this file ({LOAD_ERROR}){spark35}{fallback}; {why}"
        ), fix)


def written_without_row_checksums(ctx: Context) -> bool:
    """Whether the query started without row checksums (its first offsets file: as Spark 3.5 writes state)."""
    first = min(ctx.confs, default=None)
    return first is not None and str(effective(ctx.confs[first], ROW_CHECKSUM)).lower() == "false"


@check("WM048", ERROR, "state rows Spark loads without an error but never reads")
def skipped_rows(ctx: Context) -> Iterator[Issue]:
    for load in content_loads(ctx):
        failed = load.failure
        if failed is None or not failed.on_read:
            continue
        why, fix = content_rewind_fix(ctx, load)
        yield Issue(failed.path, (
            f"{failed.describe()}: Spark loads state version {load.version} of {load.part.directory}, which the next "
            f"batch loads, without an error, but its scans of the state stop at this block, silently: the rows in it "
            f"and after it are never evicted or emitted (tested: windows lost against a control run; where the file "
            f"has its Hadoop checksum sidecar, Spark's copy of it fails instead and the snapshot is skipped, WM040); "
            f"{why}"
        ), fix)


@check("WM040", WARNING, "state snapshot Spark cannot read and skips")
def skipped(ctx: Context) -> Iterator[Issue]:
    for load in content_loads(ctx):
        if load.failure is not None:
            continue
        base, step = file_kinds(load.part)
        for bad in load.skipped:
            start = f"the {base} of version {load.fallback}" if load.fallback else "the empty state"
            full = next((f.path for f in load.part.files if f.format.role == "base" and f.version == bad.version),
                        bad.path)
            yield Issue(bad.path, (
                f"{bad.describe()}: Spark 4.3 cannot load this {base} and skips it (automatic snapshot repair, on by "
                f"default since Spark 4.1): it rebuilds state version {load.version} from {start} and every {step} "
                f"after it, which are all readable. Spark before 4.1 fails on it instead: Spark 3.5 stops the restart "
                f"with the file's own error (tested: ChecksumException, FileNotFoundException, RocksDBException)"
            ), Instruction(f"restore {bad.path} from a backup, or remove {full} and its checksum sidecar: Spark then "
                           f"rebuilds the state from {start} and the {step}s without a failed attempt (Spark 3.5 too)"))
    yield from snapshots_listed_under_another_name(ctx)


def snapshots_listed_under_another_name(ctx: Context) -> Iterator[Issue]:
    """A RocksDB zip named by hand with a number (``013.zip``) that is the newest snapshot at or below the version the
    next batch loads: Spark takes it for that version's snapshot and reads ``13.zip``, which is not there. Spark 4.3
    falls back to an older snapshot; Spark 3.5 (``RocksDBFileManager.getLatestSnapshotVersion``, where the version it
    loads has no zip of its own) fails."""
    version = load_version(ctx)
    if version == 0 or checkpoint_format(ctx)[0] == 2:
        return
    for op in ctx.operators:
        for part in op.partitions:
            if part.provider != "rocksdb":
                continue
            zipped = formats_of("rocksdb")[0].kind
            bases = [f.version for f in part.files if f.kind == zipped]
            for info in part.other_files:
                name = posixpath.basename(info.path)
                listed = java_long(name[: -len(zipped) - 1]) if name.endswith(f".{zipped}") else None
                if listed is None or not 0 < listed <= version or any(listed <= b <= version for b in bases):
                    continue
                yield Issue(info.path, (
                    f"Spark takes {name} for the snapshot of version {listed} (it lists every '*.zip' in "
                    f"{part.directory} and reads the rest of the name with Long.parseLong), the newest at or below "
                    f"version {version} that the next batch loads, and reads {listed}.zip, which is not there: Spark "
                    f"4.3 falls back to an older snapshot and the changelogs (tested: the control run's output); "
                    f"Spark before 4.1 fails instead: Spark 3.5 stops the restart with 'FileNotFoundException: File "
                    f"…/{listed}.zip does not exist' (tested)"
                ), Instruction(f"move {info.path} out of the checkpoint (or delete it) while the query is stopped"))


@check("WM070", ERROR, "a file in a state store directory Spark lists as a snapshot but cannot read a version from")
def unnumbered_snapshots(ctx: Context) -> Iterator[Issue]:
    version = load_version(ctx)
    if version == 0 or checkpoint_format(ctx)[0] == 2:
        return
    for op in ctx.operators:
        for part in op.partitions:
            base = formats_of(part.provider)[0].kind
            bases = [f.version for f in part.files if f.kind == base]
            for info in part.other_files:
                name = posixpath.basename(info.path)
                if not unloadable_base_name(name, part.provider, version, bases):
                    continue
                stem, listed = name[: -len(base) - 1], java_long(name[: -len(base) - 1])
                why = (f"'{stem}' is none, so loading state version {version} of this partition fails" if listed is None
                       else f"it is version {listed}, the newest at or below version {version} that the next batch "
                       f"loads, and Spark reads {listed}.{base}, which is not there: the load fails")
                yield Issue(info.path, (
                    f"Spark 4.3's {'RocksDB' if part.provider == 'rocksdb' else 'HDFS-backed'} state store lists every "
                    f"file named '*.{base}' in {part.directory} as a snapshot and reads the rest of its name as a "
                    f"version (Long.parseLong): {why} ('[CANNOT_LOAD_STATE_STORE.UNCATEGORIZED] An error occurred "
                    f"during loading state'); {spark35_listing(part.provider, listed is None)}"),
                    Instruction(f"move {info.path} out of the checkpoint (or delete it) while the query is stopped"))


def spark35_listing(provider: str, no_number: bool) -> str:
    """What Spark 3.5 does with a snapshot name WM070 reports: its RocksDB store lists the directory where the version
    it loads has no snapshot of its own (``RocksDBFileManager.getLatestSnapshotVersion``); its HDFS-backed store reads
    ``<version>.snapshot`` by name and lists only in its maintenance (``doSnapshot`` and ``cleanup``, each catching
    its error)."""
    if provider == "rocksdb":  # WM070 reports a RocksDB name only when it is no number
        return ("Spark 3.5 lists them too where the version it loads has no snapshot of its own, and fails with "
                "'NumberFormatException: For input string' (tested)")
    return ("Spark 3.5 reads a snapshot only by the name it gives it and restarts correctly (tested)" + (
        "; its background maintenance lists the directory and fails on this name every time for this partition (a "
        "warning in its log: no new snapshot, no old file removed, each load reads more deltas)" if no_number else ""))


@check("WM016", ERROR, "state the next batch loads cannot be rebuilt")
def unloadable(ctx: Context) -> Iterator[Issue]:
    version = load_version(ctx)
    broken = [p for p in plans(ctx) if p.missing is not None]
    for op in ctx.operators:
        mine = [p for p in broken if p.op is op]
        if not mine:
            continue
        first = mine[0]
        base, step = file_kinds(first.part)
        uid = (f"_{first.load.missing_id}" if first.load.missing_id else
               f"_{first.ids[first.missing]}" if first.ids and first.missing in first.ids else "")
        missing = first.missing if first.missing is not None else version  # set: ``first`` is broken
        earlier = any(f.kind in BASE_KINDS and f.version < missing for f in first.part.files)
        why, fix = rewind_fix(ctx)
        yield Issue(first.part.directory, (
            f"state version {version}, which the next batch loads, cannot be rebuilt in "
            f"{plural(len(mine), 'store partition')} of operator {op.operator_id} "
            f"({listed([p.part.directory for p in mine])}): {first.part.directory} has neither "
            f"{first.missing}{uid}.{step} nor {first.missing}{uid}.{base}"
            + ("" if earlier else f" and no {base} before it")
            + f"; Spark fails to load the state; {why}"
        ), fix)


def version_ceiling(ctx: Context) -> int:
    """The newest state version this checkpoint's batches may have written (a pending batch writes one more)."""
    ckpt = ctx.ckpt
    return max(ckpt.next_state_version, -1 if ckpt.last_batch is None else ckpt.last_batch + 1)


def read_later(part: StorePartition, f: StateFile) -> bool:
    """A file of a version the query has not reached that a later load reads instead of what Spark writes then:
    a full copy named by version alone (checkpoint format 2 loads only the unique ids its lineage names), unless its
    store writes one at every commit (RocksDB without changelog checkpointing)."""
    alone = f.format.each_commit_alone and not any(g.format.role == "increment" for g in part.files)
    return f.format.read_later and f.unique_id is None and not alone


def skipped_later(ctx: Context, part: StorePartition, f: StateFile) -> bool:
    """A full copy of a version the query has not reached that Spark fails to read: the load that lists it skips it
    (automatic snapshot repair, on by default since Spark 4.1) and rebuilds the state without it. Its content decoded
    as Spark reads it (not the SST files a zip names); False without content checks."""
    return ctx.once(_skipped_later, part, f)


def _skipped_later(ctx: Context, part: StorePartition, f: StateFile) -> bool:
    decoding = Decoding.of(ctx.conf)
    if not ctx.content or decoding.missing_module():
        return False
    try:
        place = RowPlace(part.operator_id, part.store, part.partition, f.version, f.path)
        return damage(ctx.ckpt.fs.read(f.path), f.format, decoding, f.path, place) is not None
    except CheckpointError:
        return False  # not read here: judged as Spark would read it


def beyond(ctx: Context, later: bool) -> Iterator[tuple[Operator, list[tuple[StorePartition, list[StateFile]]], list[StateFile]]]:
    """Per operator with any: per store partition its files of versions newer than any this checkpoint's batches
    wrote, that a later load reads (``later``) or not, and all of them."""
    ceiling = version_ceiling(ctx)
    for op in ctx.operators:
        extra = [(p, [f for f in p.files if f.version > ceiling
                      and (read_later(p, f) and not skipped_later(ctx, p, f)) == later]) for p in op.partitions]
        extra = [(p, files) for p, files in extra if files]
        if extra:
            yield op, extra, [f for _, fs in extra for f in fs]


def leftover_fix(ctx: Context) -> Fix:
    """The rewind to the last committed batch, which removes every state file of a later version."""
    done = ctx.ckpt.last_committed_batch
    return ctx.rewind(done) if done is not None else Instruction("delete state/ (no batch was committed)")


@check("WM041", ERROR, "state snapshots of later versions that Spark will read")
def future_snapshots(ctx: Context) -> Iterator[Issue]:
    ceiling = version_ceiling(ctx)
    for op, extra, files in beyond(ctx, later=True):
        base, step = file_kinds(extra[0][0])
        yield Issue(files[0].path, (
            f"{plural(len(files), base)} of version {span(min(f.version for f in files), max(f.version for f in files))} "
            f"in {plural(len(extra), 'store partition')} of operator {op.operator_id} "
            f"({listed([p.directory for p, _ in extra])}), newer than version {ceiling}, the last one this checkpoint's "
            f"batches wrote: leftovers of a later run or a hand rewind. When the query gets there, Spark writes "
            f"its own {step} for that version but keeps the {base}, and every later load of the state (a restart, a "
            f"lost executor) reads the newest {base} at or below the version it needs: the stale state comes back, and "
            f"output is wrong (tested: a window emitted twice); a rewind to the last committed batch removes them"
        ), leftover_fix(ctx))


@check("WM017", WARNING, "state files beyond the last batch")
def leftovers(ctx: Context) -> Iterator[Issue]:
    ceiling = version_ceiling(ctx)
    for op, extra, files in beyond(ctx, later=False):
        versions = sorted({f.version for f in files})
        yield Issue(extra[0][0].directory, (
            f"{plural(len(files), 'state file')} for version {span(versions[0], versions[-1])} in "
            f"{plural(len(extra), 'store partition')} of operator {op.operator_id} ({listed([p.directory for p, _ in extra])}): "
            f"newer than version {ceiling}, the last one this checkpoint's batches wrote: leftovers of a later run "
            f"or a hand rewind. Spark writes these versions again as it gets there and never reads these files "
            f"(increments are written over, and so are RocksDB snapshots in a store without changelogs: each commit "
            f"uploads its own, tested; checkpoint format 2 reads only the unique ids its lineage names; a full copy "
            f"Spark fails to read is skipped by automatic snapshot repair, tested), but they "
            f"confuse rewinds and state readers asked for those versions; a rewind to the last committed batch "
            f"removes them"
        ), leftover_fix(ctx))
