"""Checks of the state directories' layout: partitions and operators missing or extra, unique ids the commits name,
checksum files, and the schema files operator metadata names."""
from __future__ import annotations

from typing import Iterator

from ..errors import CheckpointError
from ..layout import STATE, hadoop_sidecar, spark_sidecar, state_dir
from ..model import Operator
from ..numbers import is_number
from ..relocation import SchemaReference, foreign_references, reachable, schema_references
from ..repair.requests import RelocateRequest
from .context import Context
from .definition import ERROR, WARNING, Instruction, Issue, check
from .operator_metadata import stray_copies
from .remedies import rewind_before
from .repartition import moves
from .state_reads import content_loads, load_version, plans, state_reads
from .text import listed, plural

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"

def expected_partitions(ctx: Context, op: Operator) -> tuple[int | None, str]:
    """The operator's partition count and where it comes from."""
    if op.metadata_conflict and op.num_partitions:
        return op.num_partitions, f"{SHUFFLE_PARTITIONS}={op.num_partitions} pinned in the offsets, not its operator metadata's"
    if op.metadata is not None and op.num_partitions:
        return op.num_partitions, "numPartitions in its operator metadata"
    pinned = ctx.conf(SHUFFLE_PARTITIONS)
    return (int(pinned), f"{SHUFFLE_PARTITIONS}={pinned}") if pinned and is_number(pinned) else (None, "")


@check("WM018", ERROR, "state partition directory missing")
def missing_partitions(ctx: Context) -> Iterator[Issue]:
    version = load_version(ctx)
    if version == 0:
        return
    for op in ctx.operators:
        num, source = expected_partitions(ctx, op)
        if not num or op.written_partitions is not None:
            continue  # WM015 or WM072: the offsets pin a count the state was not written with
        present = {(p.partition, p.store) for p in op.partitions}
        missing = [state_dir(op.operator_id, pid, store) for pid in range(num) for store in op.stores if (pid, store) not in present]
        if missing:
            yield Issue(missing[0], (
                f"{plural(len(missing), 'state directory', 'state directories')} of operator {op.operator_id} missing ({listed(missing)}); it "
                f"has {num} partitions ({source}): Spark fails to load state version {version} there"
            ), Instruction("restore them from a backup (wmcheck undo if a wmcheck repair removed them), or start the "
                           "query from a new checkpoint"))


def committed_operators(ctx: Context) -> set[int]:
    """The stateful operators the newest commit names (checkpoint format 2 records each one's state unique ids)."""
    newest = ctx.commits.get(ctx.ckpt.commit_ids[-1]) if ctx.ckpt.commit_ids else None
    ids = newest.state_unique_ids if newest is not None else None
    return {int(op) for op in ids or {} if is_number(op)}


@check("WM053", ERROR, "state directory of a stateful operator missing")
def missing_operators(ctx: Context) -> Iterator[Issue]:
    version = load_version(ctx)
    if version == 0:
        return
    fs = ctx.ckpt.fs
    names = fs.names(STATE)
    present = {int(n) for n in names if is_number(n)}
    named = committed_operators(ctx)
    if not names and (named or fs.info(STATE) is not None):
        how = "is empty" if fs.info(STATE) is not None else "is gone"
        why = (f"the newest commit names the state of operator{'s' if len(named) > 1 else ''} "
               f"{', '.join(map(str, sorted(named)))}" if named else f"Spark creates {STATE}/ for stateful operators only")
        yield Issue(STATE, (
            f"{STATE}/ {how} while the next batch, {version}, loads state version {version} ({why}): the query's state "
            f"was deleted, and Spark refuses to restart a query with stateful operators without it "
            f"([STREAMING_STATEFUL_OPERATOR_MISSING_STATE_DIRECTORY], tested with Spark 4.3)"
        ), Instruction(f"restore {STATE}/ from a backup, or start the query from a new checkpoint"))
        return
    present -= stray_copies(ctx)
    missing = [f"{STATE}/{op}" for op in range(max(present | named, default=-1) + 1) if op not in present]
    if missing:
        yield Issue(missing[0], (
            f"{plural(len(missing), 'operator state directory', 'operator state directories')} missing ({listed(missing)}) "
            f"while {listed([f'{STATE}/{op}' for op in sorted(present)])} exist{'s' if len(present) == 1 else ''}"
            f"{' and the newest commit names their state' if named - present else ''}: Spark numbers a query's stateful "
            f"operators from 0, so {'that operator has' if len(missing) == 1 else 'those operators have'} lost all "
            f"state, and the restart fails ([STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA] when another "
            f"operator has operator metadata, else loading state version {version} fails; tested with Spark 4.3)"
        ), Instruction("restore them from a backup (wmcheck undo if a wmcheck repair removed them), or start the query "
                       "from a new checkpoint"))


@check("WM019", WARNING, "more state partitions than the operator has")
def extra_partitions(ctx: Context) -> Iterator[Issue]:
    down = next((r for r in reversed(moves(ctx)) if r.committed and r.to_partitions < r.from_partitions), None)
    for op in ctx.operators:
        num, source = expected_partitions(ctx, op)
        if not num or op.written_partitions is not None:
            continue  # WM015 or WM072
        extra = sorted({p.partition for p in op.partitions if p.partition >= num})
        if not extra:
            continue
        dirs = [f"state/{op.operator_id}/{pid}" for pid in extra]
        newest = max((f.version for p in op.partitions if p.partition >= num for f in p.files), default=None)
        head = (f"operator {op.operator_id} has {num} partitions ({source}) but state also holds partition "
                f"{plural(len(extra), 'directory', 'directories')} beyond it ({listed(dirs)})")
        if newest is None:
            yield Issue(dirs[0], f"{head}, holding no state version (an interrupted write, such as a killed repartition, "
                        f"may have left them): Spark does not read them at {num} partitions",
                        Instruction("remove them once no repartition of this checkpoint is running"))
        elif down is not None and down.to_partitions == num and newest <= down.batch:
            yield Issue(dirs[0], (
                f"{head}, with state up to version {newest}: left by the repartition from {down.from_partitions} to "
                f"{num} partitions at batch {down.batch}, which wrote version {down.batch + 1} in partitions 0..{num - 1} "
                f"only. Spark does not read them while the query runs with {num} partitions; they hold the state a "
                f"rewind to before batch {down.batch} restarts from"
            ), Instruction(f"keep them as long as you may rewind to before batch {down.batch}"))
        else:
            yield Issue(dirs[0], (
                f"{head}: written by a run with more shuffle partitions, copied in, or the metadata was edited; Spark "
                f"does not read them at {num} partitions, but nothing here proves they are unneeded (an older "
                f"layout or a rewind may need them)"
            ), Instruction("find out where they came from before removing anything"))


@check("WM020", WARNING, "unique id in commits/ without its state file")
def unmatched_unique_ids(ctx: Context) -> Iterator[Issue]:
    if not ctx.unique_ids_known:
        return
    version = load_version(ctx)
    for op in ctx.operators:
        lost = []
        for part in op.partitions:
            index = op.stores.index(part.store) if part.store in op.stores else 0
            ids = ctx.ckpt.unique_ids_for(op.operator_id, part.partition, index)
            present = {(f.version, f.unique_id) for f in part.files}
            oldest = min((f.version for f in part.files), default=None)
            lost += [(part, v, uid) for v, uid in sorted(ids.items())
                     if oldest is not None and oldest <= v < version and (v, uid) not in present]
        if lost:
            part, v, uid = lost[0]
            yield Issue(part.directory, (
                f"commits/{v - 1} names unique id {uid} for state version {v}, but {part.directory} has no {v}_{uid} file "
                f"({plural(len(lost), 'version')} in {plural(len({p.directory for p, _, _ in lost}), 'store partition')} "
                f"of operator {op.operator_id}): the commit log and the state files come from different runs or files "
                f"were lost. Spark 4.3 restarts fine (it loads the version the next batch needs along the lineage its state files record, not the ids older commits name; tested), but a "
                f"rewind to those batches is impossible"
            ), Instruction("restore the files from a backup (wmcheck undo if a wmcheck repair removed them) if you "
                           "have them; otherwise do not rewind before the newest such batch"))


@check("WM060", ERROR, "the newest commit names no state unique id for state the next batch loads")
def commit_without_unique_ids(ctx: Context) -> Iterator[Issue]:
    if not ctx.unique_ids_known or not ctx.commits:
        return
    newest = max(ctx.commits)
    named = ctx.commits[newest].state_unique_ids or {}
    for op in ctx.operators:
        per_partition = named.get(str(op.operator_id), ())
        lacking = []
        for part in op.live_partitions:
            if not any(f.unique_id for f in part.files):
                continue  # checkpoint format 1 files
            index = op.stores.index(part.store) if part.store in op.stores else 0
            ids = per_partition[part.partition] if part.partition < len(per_partition) else ()
            if index >= len(ids) or not ids[index]:
                lacking.append(part.directory)
        if not lacking:
            continue
        yield Issue(f"commits/{newest}", (
            f"commits/{newest}, the newest commit, names no state unique id for {listed(lacking)} (operator "
            f"{op.operator_id}): with checkpoint format 2 Spark loads state version {newest + 1} by the ids the newest "
            f"commit names, and fails (CANNOT_LOAD_STATE_STORE; with some partitions named: an "
            f"ArrayIndexOutOfBoundsException; tested); the commit was edited or written by a run without checkpoint "
            f"format 2, and a rewind to before batch {newest} drops it, Spark re-running the batch from the ids the "
            f"commit before names"
        ), rewind_before(ctx, newest))


def mismatches(ctx: Context, kind: str) -> Iterator[tuple[str, str]]:
    """Files Spark reads on restart whose ``hadoop`` or ``spark`` checksum file does not match."""
    content_loads(ctx)
    reads = state_reads(ctx)
    if not reads.sidecars_verified:
        for plan in plans(ctx):
            if plan.missing is None:
                ctx.verify_state_files(plan.chain)
        reads.sidecars_verified = True
    for tree in ctx.trees:
        yield from tree.mismatches[kind]


def skipped_paths(ctx: Context) -> set[str]:
    """The files of full copies Spark cannot load and skips (WM040 reports them, and what each Spark does)."""
    return {bad.path for load in content_loads(ctx) for bad in load.skipped}


@check("WM021", ERROR, "Spark checksum file does not match its file")
def checksums(ctx: Context) -> Iterator[Issue]:
    skipped = skipped_paths(ctx)
    for path, problem in mismatches(ctx, "spark"):
        if path in skipped:
            continue
        yield Issue(path, (
            f"{problem}: Spark 4.1+ verifies the checksum files it writes beside state files (checkpoint format 2) and "
            "fails to load the state ('[CHECKPOINT_FILE_CHECKSUM_VERIFICATION_FAILED]')"
        ), Instruction(f"restore {path} from a backup (wmcheck undo if a wmcheck repair changed it), or delete "
                       f"{spark_sidecar(path)} if the file was changed on purpose"))


@check("WM030", WARNING, "Hadoop checksum sidecar does not match its file")
def hadoop_checksums(ctx: Context) -> Iterator[Issue]:
    # Spark unzips a RocksDB snapshot and copies its SST files through the checksummed file system: it fails on them
    # (WM039) or skips them (WM040)
    skipped = skipped_paths(ctx) | {load.failure.path for load in content_loads(ctx) if load.failure is not None}
    for path, problem in mismatches(ctx, "hadoop"):
        if path in skipped:
            continue
        yield Issue(path, (
            f"{problem}: Spark (3.5 and 4.3 tested, on the local file system) reads checkpoint files through "
            "FileContext without verifying Hadoop's .crc sidecars and restarts fine, but tools reading through Hadoop's "
            "checksummed FileSystem (hadoop fs -cat, FileSystem.open) fail with a ChecksumException; object stores "
            "keep no sidecars"
        ), Instruction(f"delete {hadoop_sidecar(path)} if the file was changed on purpose, else restore the file from "
                       f"a backup (wmcheck undo if a wmcheck repair changed it)"))


def foreign_schemas(ctx: Context) -> list[tuple[SchemaReference, bool | None]]:
    """Schema file names outside this checkpoint, with whether Spark reaches them (none when metadata fails, WM001)."""
    return ctx.once(_foreign_schemas)


def _foreign_schemas(ctx: Context) -> list[tuple[SchemaReference, bool | None]]:
    try:
        refs = foreign_references(ctx.ckpt)
    except CheckpointError:
        refs = []
    return [(r, reachable(ctx.ckpt, r)) for r in refs]


def _moved(refs: list[SchemaReference], what: str) -> Iterator[Issue]:
    by_file: dict[str, list[SchemaReference]] = {}
    for ref in refs:
        by_file.setdefault(ref.metadata_path, []).append(ref)
    for path, mine in by_file.items():
        yield Issue(path, (
            f"names the state schema file {mine[0].uri}" + (f" (and {len(mine) - 1} more)" if len(mine) > 1 else "")
            + f", outside this checkpoint: it was copied or moved, and {what}; relocating names this checkpoint's own "
            "schema files (undoable)"
        ), RelocateRequest())


@check("WM027", ERROR, "operator metadata names schema files Spark cannot reach")
def unreachable_schemas(ctx: Context) -> Iterator[Issue]:
    yield from _moved([r for r, ok in foreign_schemas(ctx) if ok is False],
                      "that file is gone or on another store: restarting the query and Spark's state reader "
                      "fail (FileNotFoundException)")
    for ref in own_schemas_gone(ctx):
        operator = ref.metadata_path.split("/_metadata/", 1)[0]  # state/<op>
        yield Issue(ref.metadata_path, (
            f"names the state schema file {ref.relative}, this checkpoint's own, which is gone: Spark reads the schema "
            f"files the operator's newest metadata names and the restart fails ('File …/{ref.relative} does not "
            "exist', tested with Spark 4.3)"
        ), Instruction(f"restore {ref.relative} from a backup (deleting {operator}/_metadata/v2/ too does not help: "
                       "Spark then fails to read the operator metadata); without one, start the query from a new "
                       "checkpoint"))


def own_schemas_gone(ctx: Context) -> list[SchemaReference]:
    """This checkpoint's own schema files that an operator's newest metadata file (the one Spark reads on restart)
    names and that are gone."""
    try:
        refs = schema_references(ctx.ckpt)
    except CheckpointError:
        return []  # metadata that does not parse: WM001
    newest: dict[str, int] = {}
    for ref in refs:
        folder, name = ref.metadata_path.rsplit("/", 1)
        if is_number(name):
            newest[folder] = max(newest.get(folder, -1), int(name))
    return [r for r in refs if r.here and r.relative is not None and r.metadata_path.rsplit("/", 1)[1] ==
            str(newest.get(r.metadata_path.rsplit("/", 1)[0])) and not ctx.ckpt.fs.exists(r.relative)]


@check("WM028", WARNING, "operator metadata names schema files of another checkpoint")
def borrowed_schemas(ctx: Context) -> Iterator[Issue]:
    yield from _moved([r for r, ok in foreign_schemas(ctx) if ok is not False],
                      "Spark reads the schema from there and names it again in every batch it runs: this checkpoint "
                      "breaks once that location is removed")
