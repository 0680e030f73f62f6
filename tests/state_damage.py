"""Damage every state file Spark reads to load the next version, in every state format the python engine reads,
and ask real Spark what it does: the restart oracle runs these cases with the check codes' own (one child
process), and ``check``'s verdict must be what Spark did: WM039 exactly when the restart fails; no error
otherwise (Spark skips a damaged snapshot it can rebuild without, WM040, or never reads the file).

By default one file per fixture and kind of damage (cut, zeroed, garbled, one byte flipped), chosen by seed; ``WMCHECK_FULL_STATE_SWEEP=1`` takes every
file of every store partition's load chain (the SST files a snapshot names included).
"""
from __future__ import annotations

import os
import random

from wmcheck.checkpoint.model import open_checkpoint, store_unique_ids
from wmcheck.statestore.formats.load import resolve
from wmcheck.statestore.rocksdb.zips import read_snapshot_zip

from conftest import FIXTURES
from oracle_cases import FAILS, OK, WRONG, Case, cut, flipped, garbled, zeroed

FORMAT_FIXTURES = {
    "agg_window_hdfs": "HDFS deltas, lz4",
    "state_types": "HDFS deltas and a snapshot, zstd",
    "row_checksum_hdfs": "HDFS deltas with row checksums",
    "agg_window_rocksdb": "RocksDB zips, SSTs and changelogs, lz4",
    "state_types_rocksdb": "RocksDB zips, SSTs and changelogs, snappy",
    "dedup_rocksdb_p3": "RocksDB zips and SSTs without changelogs",
    "checkpoint_v2": "RocksDB, checkpoint format 2 (unique ids, Spark checksum files)",
}
DAMAGES = {"cut": lambda p: cut(p, 20), "zeroed": zeroed, "garbled": garbled, "flipped": flipped}
"""Each kind of damage: a write cut short, a block lost (zeros), random bytes, one byte flipped inside the file's
first block (an SST file's first data block, which RocksDB reads only when a batch reads its rows)."""
PREFERRED = {"flipped": "shared"}
"""The kind of file a damage takes in the default sampled sweep where the fixture has it."""
FULL = os.environ.get("WMCHECK_FULL_STATE_SWEEP") == "1"


def chain_files(name: str) -> list[tuple[str, str]]:
    """(role, checkpoint-relative path) of every file Spark reads to load the next version of the fixture's state:
    ``base``, ``increment``, or ``shared`` (an SST file a snapshot names)."""
    ckpt = open_checkpoint(str(FIXTURES / name / "checkpoint"))
    out: list[tuple[str, str]] = []
    for op in ckpt.operators:
        for part in op.live_partitions:
            load = resolve(part, ckpt.next_batch, store_unique_ids(ckpt, op, part))
            for f in load.chain:
                out.append((f.format.role, f.path))
                if f.format.shared_dir:
                    meta = read_snapshot_zip(ckpt.fs.read(f.path), f.path)[1]
                    out += [("shared", f"{part.directory}/{f.format.shared_dir}/{s.dfs_name}") for s in meta.sst_files]
    return out


def sweep() -> list[Case]:
    """The damage cases: ``code`` WM039 and ``spark`` FAILS are placeholders, the verdict is check's."""
    cases = []
    for name in FORMAT_FIXTURES:
        files = chain_files(name)
        roles = sorted({role for role, _ in files})
        for index, (kind, damage) in enumerate(DAMAGES.items()):
            # each kind of damage on another kind of file where there are several
            role = PREFERRED.get(kind) if PREFERRED.get(kind) in roles else roles[index % len(roles)]
            mine = [p for r, p in files if r == role]
            chosen = [p for _, p in files] if FULL else [random.Random(f"{name}:{kind}").choice(mine)]
            cases += [Case(f"damage-{name}-{kind}-{p.split('/', 2)[2].replace('/', '-')}", "WM039", name, damage(p), FAILS)
                      for p in chosen]
    return cases


def verdict(findings: list) -> str:
    """What check says Spark does with the damaged copy: fails (WM039), restarts with wrong output (WM048: rows a
    scan misses) or restarts as the control run does (anything else)."""
    codes = {f.code for f in findings}
    return FAILS if "WM039" in codes else WRONG if "WM048" in codes else OK
