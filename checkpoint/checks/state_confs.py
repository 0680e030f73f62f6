"""The confs every offsets file pins, against what the state shows it was written with.

Spark restarts with the confs of the last offsets file and compares few of them with the state: where every
offsets file pins another value than the one the state was written with (the files were edited, or come from
another query), no change between batches shows it (WM015), but the state does. The partition count: the operator
metadata and the partitions holding the version the next batch loads (each commit writes that version in every
partition it runs). The provider: the kind of state files (HDFS deltas and snapshots, RocksDB zips and
changelogs). The aggregation state format: the value schema of the aggregation's schema file (format 1 keeps the
grouping key in the value, format 2 only the aggregation buffer).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from ..conf_values import SPARK_STATE_PACKAGE
from ..layout import DEFAULT_STORE
from ..metadata_log import OFFSET_LOG
from ..model import PINNED_CONFS
from ..pinned_conf import effective
from ..repartitions import SHUFFLE_PARTITIONS
from .conf import drifts, last_conf, rejected
from .context import Context
from .definition import ERROR, Instruction, Issue, check
from .text import listed

PROVIDER = PINNED_CONFS["state_provider"]
AGG_FORMAT = PINNED_CONFS["aggregation_state_format"]
PROVIDER_CLASSES = {"hdfs": f"{SPARK_STATE_PACKAGE}HDFSBackedStateStoreProvider",
                    "rocksdb": f"{SPARK_STATE_PACKAGE}RocksDBStateStoreProvider"}
PROVIDER_FILES = {"hdfs": "HDFS-backed state files (deltas, snapshots)", "rocksdb": "RocksDB state files (zips, changelogs)"}


@dataclass(frozen=True)
class Written:
    """A pinned conf's value in the last offsets file and the one the state was written with, shown by ``evidence``;
    ``outcome``: what Spark does on restart."""

    key: str
    pinned: str
    written: str
    evidence: str
    outcome: str


def partition_count(ctx: Context) -> Written | None:
    ops = [op for op in ctx.operators if op.written_partitions is not None and op.num_partitions is not None]
    if not ops:
        return None
    op = ops[0]
    pinned, written = op.num_partitions or 0, op.written_partitions or 0
    version = ctx.ckpt.next_state_version
    return Written(SHUFFLE_PARTITIONS, str(pinned), str(written), (
        f"state version {version} of operator{'s' if len(ops) > 1 else ''} {listed([str(o.operator_id) for o in ops])} "
        f"was written in {written} partitions (the operator metadata says {written}, and "
        f"state/{op.operator_id}/0..{written - 1} hold that version)"),
        f"Spark loads partitions 0..{pinned - 1} only and hashes each key to another partition than the one holding "
        f"its state: rows are lost or emitted twice (tested: the restart's output differs from a control run)"
        if pinned < written else
        f"partitions {written}..{pinned - 1} hold no state, and loading version {version} there fails (tested: "
        f"[CANNOT_LOAD_STATE_STORE.CANNOT_READ_DELTA_FILE_NOT_EXISTS])")


def provider(ctx: Context, pinned: str) -> Written | None:
    kinds = {p.provider for op in ctx.operators for p in op.partitions if p.files}
    mine = next((k for k, name in PROVIDER_CLASSES.items() if name == pinned), None)
    if mine is None or len(kinds) != 1 or mine in kinds:
        return None
    [written] = kinds
    missing = "1.changelog does not exist" if mine == "rocksdb" else "CANNOT_READ_DELTA_FILE_NOT_EXISTS] … 1.delta"
    return Written(PROVIDER, pinned, PROVIDER_CLASSES[written], f"the state holds {PROVIDER_FILES[written]} only", (
        f"Spark opens every store with the pinned provider, which finds none of its own files there, and loading the "
        f"state fails (tested: [CANNOT_LOAD_STATE_STORE.{'CANNOT_READ_STREAMING_STATE_FILE] … ' if mine == 'rocksdb' else ''}"
        f"{missing})"))


def aggregation_format(ctx: Context, pinned: str) -> Written | None:
    for op in ctx.operators:
        if op.name != "stateStoreSave":
            continue
        schema = ctx.ckpt.store_schema(op.operator_id, DEFAULT_STORE)
        if schema is None:
            continue
        keys = [f.name for f in schema.key_schema.fields]
        values = [f.name for f in schema.value_schema.fields]
        written = "1" if keys and values[:len(keys)] == keys else "2"
        if written != pinned:
            return Written(AGG_FORMAT, pinned, written, (
                f"the value schema of operator {op.operator_id}'s state ({', '.join(values)}) is format {written}'s "
                f"({'the grouping key, then the aggregation buffer' if written == '1' else 'the aggregation buffer alone'})"),
                "on restart Spark compares the state's schema with the one the pinned format makes and fails (tested: "
                "[STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE])")
    return None


def written_confs(ctx: Context) -> list[Written]:
    found = last_conf(ctx)
    if found is None or not ctx.operators:
        return []
    _, conf = found
    out = [partition_count(ctx)]
    value = effective(conf, PROVIDER)
    out.append(provider(ctx, value) if value is not None else None)
    value = effective(conf, AGG_FORMAT)
    out.append(aggregation_format(ctx, value) if value is not None else None)
    changed = {d.key for d in drifts(ctx)}
    return [w for w in out if w is not None and w.key not in changed and rejected(ctx, w.key) is None]


@check("WM074", ERROR, "a pinned conf the state was not written with")
def confs_not_the_states(ctx: Context) -> Iterator[Issue]:
    last = ctx.ckpt.offset_ids[-1] if ctx.ckpt.offset_ids else None
    for found in written_confs(ctx):  # a change between offsets files is WM015's, a value Spark refuses WM057's
        yield Issue(OFFSET_LOG.path(last or 0), (
            f"every offsets file pins {found.key}={found.pinned}, which Spark restarts with, but {found.evidence}: "
            f"{found.outcome}; the offsets files were edited or come from another query"
        ), Instruction(
            f"set {found.key} to \"{found.written}\" in every offsets file (offsets/{last} decides the restart, an "
            f"older file a rewind to its batch), or restore them from a backup"))
