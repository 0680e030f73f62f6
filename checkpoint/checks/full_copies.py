"""The check that the full copy of state the next batch starts from agrees with the increments that reach its
version.

To load a version Spark reads the newest full copy at or below it (HDFS ``V.snapshot``, RocksDB ``V.zip``) and
replays only the increments after it (:mod:`..state_load`): the increments up to the copy's own version are never
read. A copy that holds other rows than they rebuild (a delta copied over a snapshot, the snapshot of another
version or partition, an older zip restored over a newer one) is trusted as it is, without an error.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Iterator

from wmcheck.statestore.formats.load import StoreLoad, replays

from ..layout import hadoop_sidecar
from .context import Context
from .definition import ERROR, Instruction, Issue, check
from .loaded_state import Reader
from .state_reads import content_loads, file_kinds
from .text import plural

READ_LIMIT = 32 << 20
"""The most bytes of state files one check reads (larger states are not judged)."""


def differing(copy: dict[bytes, bytes], rebuilt: dict[bytes, bytes]) -> tuple[int, int, int]:
    """(keys only the copy holds, keys only the increments rebuild, keys whose values differ)."""
    both = copy.keys() & rebuilt.keys()
    return len(copy.keys() - both), len(rebuilt.keys() - both), sum(copy[k] != rebuilt[k] for k in both)


def compared(reader: Reader, load: StoreLoad) -> tuple[StoreLoad, tuple[int, int, int]] | None:
    """The newest replay of a load's full copy (:func:`..state_load.replays`) and how the copy differs from it, when
    it differs from every replay read; None when one agrees (an older full copy that disagrees is never read) or none
    can be read here. A replay through a file its checksum sidecar shows changed since Spark wrote it (an older
    increment copied over it) rebuilds nothing Spark wrote: it neither condemns nor clears the copy."""
    routes = replays(load)
    if not routes:
        return None  # nothing to compare the copy with: it is not read (a RocksDB store without changelogs)
    copy = reader.rows(replace(load, version=load.chain[0].version, chain=load.chain[:1]))
    if copy is None:
        return None  # not read here: column families (transformWithState: merges, TTL), damage, over the budget
    first: tuple[StoreLoad, tuple[int, int, int]] | None = None
    for replay in routes:
        rebuilt = reader.rows(replay)
        if rebuilt is None or any(changed_since_written(reader.ctx, f.path) for f in replay.chain):
            continue
        found = differing(copy, rebuilt)
        if not any(found):
            return None
        first = first or (replay, found)
    return first


def changed_since_written(ctx: Context, path: str) -> bool:
    """Whether a state file read here does not match its Hadoop or Spark checksum sidecar."""
    return ctx.hadoop_checksum_problem(path) is not None or ctx.spark_checksum_problem(path) is not None


@check("WM072", ERROR, "a state snapshot the next batch loads disagrees with the increments to its version")
def full_copy_disagrees(ctx: Context) -> Iterator[Issue]:
    reader = Reader(ctx, READ_LIMIT)
    for load in content_loads(ctx):
        if load.failure is not None or load.skipped or load.lineage is not None or not load.chain \
                or load.chain[0].format.role != "base":
            continue
        found = compared(reader, load)
        if found is None:
            continue
        replay, (extra, lacking, changed) = found
        copy = load.chain[0]
        base, step = file_kinds(load.part)
        start = replay.chain[0]
        origin = (f"the {base} of version {start.version} and the {step}s {start.version + 1}..{copy.version}"
                  if start.format.role == "base" else f"the empty state and the {step}s 1..{copy.version}")
        diff = ", ".join(part for part in (
            f"{plural(extra, 'key')} the increments do not hold" if extra else "",
            f"{plural(lacking, 'key')} missing" if lacking else "",
            f"{plural(changed, 'key')} with another value" if changed else "") if part)
        yield Issue(copy.path, (
            f"{copy.path.rsplit('/', 1)[-1]}, the {base} state version {load.version} of {load.part.directory} (which "
            f"the next batch loads) starts from, holds other rows than {origin} rebuild ({diff}): it is not the {base} "
            f"Spark wrote for version {copy.version} (another version's or partition's file copied over it, a delta "
            f"copied to a {base}). Spark loads the newest {base} at or below the version it needs and never replays "
            f"the {step}s before it: it restarts without an error from the wrong state, and output is wrong (tested: "
            f"windows lost or emitted twice against a control run). Without it Spark rebuilds the version from "
            f"{origin} (tested: the control run's output)"
        ), Instruction(f"move {copy.path} and its checksum sidecar {hadoop_sidecar(copy.path).rsplit('/', 1)[-1]} out "
                       f"of the checkpoint (or delete them) while the query is stopped"))
    if reader.over:
        ctx.notes.append(f"WM072 reads {READ_LIMIT:,} bytes of state files per check and left the rest unjudged (their "
                         "snapshots are not compared with their increments)")
