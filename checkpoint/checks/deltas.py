"""The check that every state file the next batch loads is the one Spark wrote for its version.

Spark writes each version's delta (HDFS) or changelog (RocksDB) from the changes its batch made, so a file holding
changes byte for byte those of an earlier version's file of the partition is a copy of it (a restore that took the
wrong file), unless a batch updated the same keys to the same values again. And the HDFS-backed store writes a delete record only for a key it removed (``HDFSBackedStateStore.remove``: when the
map held a value for it), so replaying the files of a load in order, each delete finds its key. One that does not
shows a delta that is not the one Spark wrote for its version (an older delta of the partition copied over it,
another partition's): Spark loads it without an error, and the changes the real delta held are lost, which the
output may or may not need (a warning: the rewind runs the batch again). Judged for the
operator that writes to the sink: the lost changes of one feeding another come out, or not, as the other's watermark
lets them (a chained aggregation's older delta over the next one: the control run's output, tested).
"""
from __future__ import annotations

from typing import Iterator

from ..errors import CheckpointError
from ..row_checksums import CHECKSUM_BYTES
from ..state_codecs import decompress
from ..state_content import Decoding
from ..state_files import StateFile
from ..state_load import StoreLoad
from ..state_records import DELETE, changelog_records, sized_records
from .context import Context
from .definition import WARNING, Issue, check
from .loaded_state import Reader
from .state import CHANGELOG_DECODER, content_loads, judged_for_output, rewind_fix

HDFS_RECORDS = "records"
"""The decoder of HDFS deltas and snapshots (one sized record stream)."""
RECORDS = {HDFS_RECORDS: sized_records, CHANGELOG_DECODER: changelog_records}
CHANGED_ONCE = frozenset({"stateStoreSave", "StatefulStreamlineAggregate", "dedupe", "dedupeWithinWatermark"})
"""Operators two of whose batches do not write the same changes: an aggregation's windows are evicted once, its buffers
change with every row, a deduplication puts a key once (a join, a group's state, may put a key's value again)."""
COPY_WINDOW = 10
"""How many versions back a file of a load is compared with (Spark's ``minDeltasForSnapshot``: the files of one load)."""


def absent_delete(reader: Reader, load: StoreLoad, checksums: bool) -> StateFile | None:
    """The first delta of an HDFS load's chain that deletes a key the state before it does not hold; None when every
    delete finds its key, or the load is not read here (RocksDB, a failing or skipping load, over the budget).
    ``checksums``: deleted keys carry their row checksum first (rowChecksum.enabled)."""
    chain = load.chain
    if (not chain or load.failure is not None or load.skipped or not load.loadable
            or any(f.format.decoder != HDFS_RECORDS for f in chain)):
        return None
    data = reader.take([f.path for f in chain], sum(f.size for f in chain))
    if data is None:
        return None
    held: set[bytes] = set()
    skip = CHECKSUM_BYTES if checksums else 0
    try:
        for f in chain:
            for kind, key, _ in sized_records(decompress(data[f.path], reader.codec, f.path), f.path):
                if kind != DELETE:
                    held.add(key)
                elif key[skip:] in held:
                    held.discard(key[skip:])
                else:
                    return f
    except (CheckpointError, KeyError):
        return None  # damaged (WM039) or unreadable
    return None


def copied(reader: Reader, load: StoreLoad) -> tuple[StateFile, StateFile] | None:
    """The first delta or changelog of a load's chain that holds changes and has the bytes of an earlier one of its
    partition (up to :data:`COPY_WINDOW` versions before it), with that one; None when there is none, or the load is not
    read here (a failing or skipping load, over the budget)."""
    if not load.chain or load.failure is not None or load.skipped or not load.loadable:
        return None
    files = [f for f in load.part.files if f.format.decoder in RECORDS]
    for f in load.chain:
        twins = [g for g in files if f.version - COPY_WINDOW <= g.version < f.version and g.size == f.size
                 and g.format.decoder == f.format.decoder] if f.format.decoder in RECORDS else []
        if not twins:
            continue
        data = reader.take([f.path, *(g.path for g in twins)], f.size * (1 + len(twins)))
        if data is None:
            return None
        try:
            same = next((g for g in twins if data[g.path] == data[f.path]), None)
            if same is not None and next(RECORDS[f.format.decoder](decompress(data[f.path], reader.codec, f.path),
                                                                   f.path), None) is not None:
                return f, same
        except (CheckpointError, KeyError):
            return None  # damaged (WM039) or unreadable
    return None


@check("WM078", WARNING, "a state file the next batch loads is not the one Spark wrote for its version")
def not_written_for_its_version(ctx: Context) -> Iterator[Issue]:
    reader, checksums = Reader(ctx), Decoding.of(ctx.conf).row_checksums
    names = {op.operator_id: op.name for op in ctx.operators}
    for load in content_loads(ctx):
        if not judged_for_output(ctx, load.part.operator_id):
            continue
        found = absent_delete(reader, load, checksums)
        if found is not None:
            bad, what = found, (
                f"deletes a key that version {found.version - 1} does not hold: Spark's HDFS-backed store writes a "
                f"delete only for a key it removed, so this is not the file Spark wrote for version {found.version} (an "
                "older delta of the partition copied over it, or another partition's)")
        elif names.get(load.part.operator_id) in CHANGED_ONCE:
            twin = copied(reader, load)
            if twin is None:
                continue
            bad, what = twin[0], (
                f"holds the very bytes of {twin[1].path}, version {twin[1].version}'s, and changes: Spark writes each "
                f"version's file from the changes its batch made, and a {names[load.part.operator_id]} operator (windows "
                "evicted once, buffers that change with every row, keys put once) writes the same ones twice only when "
                "two batches update the same keys to the same values, so this is most likely a copy of it, not the file "
                f"Spark wrote for version {twin[0].version}")
        else:
            continue
        version, path = bad.version, bad.path
        why, fix = rewind_fix(ctx, version - 1)
        yield Issue(path, (
            f"{path}, a file of state version {version} that the next batch loads (version {load.version}), {what}. "
            f"Spark loads it without an error, and whatever the lost file held is gone: nothing here tells whether the "
            f"output needed it (state_types's state/0/1/10.delta replaced by its 9.delta, and union_stall_min's "
            f"state/0/0/11.delta by its 10.delta, restart with the control run's output, tested); {why}"
        ), fix)
