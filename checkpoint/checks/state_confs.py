"""The confs every offsets file pins, against what the state shows it was written with.

Spark restarts with the confs of the last offsets file and compares few of them with the state: where every
offsets file pins another value than the one the state was written with (the files were edited, or come from
another query), no change between batches shows it (WM015), but the state does. The partition count: the operator
metadata and the partitions holding the version the next batch loads (each commit writes that version in every
partition it runs). The provider: the kind of state files (HDFS deltas and snapshots, RocksDB zips and
changelogs). The aggregation state format: the value schema of the aggregation's schema file (format 1 keeps the
grouping key in the value, format 2 only the aggregation buffer). The join state format: four stores per partition
(formats 1 and 2, told apart by the matched flag of the values) or one store of column families (3 and 4, by the
families the schema file names). The (flat)MapGroupsWithState format: the group state in one struct (2) or flat (1).
The Avro encoding: RocksDB state of an operator Spark encodes as UnsafeRows whatever the conf. Source evolution: a
version 1 offsets file, whose sources have no names.
"""
from __future__ import annotations

from typing import Callable, Iterator

from wmcheck.checkpoint.logs.metadata_log import OFFSET_LOG
from wmcheck.checkpoint.records import dataclass
from wmcheck.statestore.encodings.value_encoding import AVRO, UNSAFE_ROW
from wmcheck.statestore.formats.registry import file_name, formats_of
from wmcheck.statestore.formats.schema import ColumnFamilySchema, StructType

from ..conf_values import SPARK_STATE_PACKAGE
from ..layout import DEFAULT_STORE
from ..model import PINNED_CONFS, Operator
from ..operator_kinds import GROUP_STATE, is_join, is_transform_with_state
from ..pinned_conf import effective
from ..repartitions import SHUFFLE_PARTITIONS
from .conf import drifts, last_conf, rejected
from .context import Context
from .definition import ERROR, Instruction, Issue, check
from .state_reads import content_loads, state_reads
from .text import listed

PROVIDER = PINNED_CONFS["state_provider"]
AGG_FORMAT = PINNED_CONFS["aggregation_state_format"]
JOIN_FORMAT = PINNED_CONFS["join_state_format"]
GROUP_STATE_FORMAT = PINNED_CONFS["flatmapgroups_state_format"]
ENCODING = PINNED_CONFS["encoding_format"]
SOURCE_EVOLUTION = "spark.sql.streaming.queryEvolution.enableSourceEvolution"
JOIN_VALUES = "left-keyWithIndexToValue"
AGGREGATIONS = frozenset({"stateStoreSave"})
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
    first = file_name(1, formats_of("rocksdb" if mine == "rocksdb" else "hdfs")[1].kind)  # the first increment
    missing = f"{first} does not exist" if mine == "rocksdb" else f"CANNOT_READ_DELTA_FILE_NOT_EXISTS] … {first}"
    return Written(PROVIDER, pinned, PROVIDER_CLASSES[written], f"the state holds {PROVIDER_FILES[written]} only", (
        f"Spark opens every store with the pinned provider, which finds none of its own files there, and loading the "
        f"state fails (tested: [CANNOT_LOAD_STATE_STORE.{'CANNOT_READ_STREAMING_STATE_FILE] … ' if mine == 'rocksdb' else ''}"
        f"{missing})"))


def value_schema_format(ctx: Context, key: str, pinned: str, operators: frozenset[str],
                        tell: Callable[[ColumnFamilySchema], tuple[str, str]]) -> Written | None:
    """The first of ``operators`` whose state's value schema (``tell``: its format and how it shows it) is another
    format's than the pinned one: Spark compares the two schemas on restart."""
    for op in ctx.operators:
        schema = ctx.ckpt.store_schema(op.operator_id, DEFAULT_STORE) if op.name in operators else None
        if schema is None or not schema.value_schema.fields:
            continue
        written, shape = tell(schema)
        if written != pinned:
            return Written(key, pinned, written, f"the value schema of operator {op.operator_id}'s state {shape}",
                           "on restart Spark compares the state's schema with the one the pinned format makes and fails "
                           "(tested: [STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE])")
    return None


def aggregation_written(schema: ColumnFamilySchema) -> tuple[str, str]:
    keys = [f.name for f in schema.key_schema.fields]
    values = [f.name for f in schema.value_schema.fields]
    written = "1" if keys and values[:len(keys)] == keys else "2"
    return written, (f"({', '.join(values)}) is format {written}'s "
                     f"({'the grouping key, then the aggregation buffer' if written == '1' else 'the aggregation buffer alone'})")


def group_state_written(schema: ColumnFamilySchema) -> tuple[str, str]:
    first = schema.value_schema.fields[0]
    written = "2" if first.name == "groupState" and isinstance(first.data_type, StructType) else "1"
    return written, (f"is format {written}'s "
                     f"({'the group state in one struct, then its timeout' if written == '2' else 'the group state fields, then its timeout'})")


def join_written(ctx: Context, op: Operator) -> tuple[str, str] | None:
    """The state format a join's state was written with, and what shows it: formats 1 and 2 keep four stores per
    partition (format 2's values end with a matched flag), 3 and 4 one store of column families (format 4 keys its
    values by event time: ``keyWithTsToValues``)."""
    if op.stores != (DEFAULT_STORE,):
        schema = ctx.ckpt.store_schema(op.operator_id, JOIN_VALUES)
        if schema is None:
            return None
        matched = [f.name for f in schema.value_schema.fields][-1:] == ["matched"]
        return ("2" if matched else "1"), (
            f"operator {op.operator_id}'s join state is four stores per partition (formats 1 and 2), and the values of "
            f"{JOIN_VALUES} {'end with' if matched else 'lack'} format 2's matched flag")
    for written, family in (("3", JOIN_VALUES), ("4", "left-keyWithTsToValues")):
        if ctx.ckpt.store_schema(op.operator_id, DEFAULT_STORE, family) is not None:
            return written, (f"operator {op.operator_id}'s join state is one store of column families (formats 3 and 4), "
                             f"and its schema file names the column family {family} (format {written}'s)")
    return None


def join_format(ctx: Context, pinned: str) -> Written | None:
    for op in ctx.operators:
        found = join_written(ctx, op) if is_join(op.name, op.stores) else None
        if found is None:
            continue
        written, evidence = found
        if pinned in ("1", "2") and written in ("3", "4"):
            outcome = ("Spark opens the four stores formats 1 and 2 keep, finds none of their files, and fails (tested: "
                       "[CANNOT_LOAD_STATE_STORE.CANNOT_READ_STREAMING_STATE_FILE])")
        elif pinned in ("3", "4") and written in ("1", "2"):
            outcome = ("Spark reads the operator metadata and schema files formats 3 and 4 keep, finds none, and fails "
                       "(tested: [STDS_FAILED_TO_READ_OPERATOR_METADATA])")
        elif (pinned, written) == ("1", "2"):  # formats 3 and 4 read each other's state (tested)
            outcome = ("Spark compares the state's schema with the one the pinned format makes and fails (tested: "
                       "[STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE])")
        else:
            continue
        return Written(JOIN_FORMAT, pinned, written, evidence, outcome)
    return None


def encoding(ctx: Context, pinned: str) -> Written | None:
    pinned = pinned.lower()
    content_loads(ctx)  # samples the values of transformWithState's table files
    found = state_reads(ctx).value_encodings
    for op in ctx.operators:
        if not any(p.provider == "rocksdb" for p in op.partitions if p.files):
            continue
        if not is_transform_with_state(op.name):
            if pinned == AVRO:
                return Written(ENCODING, pinned, UNSAFE_ROW, (
                    f"operator {op.operator_id} ({op.name or 'a stateful operator'}) keeps RocksDB state, which only "
                    "transformWithState operators encode with Avro (its schema files give the Avro encoder the schema; "
                    "the other operators write UnsafeRows)"),
                    "the first task that opens its store fails (tested with an aggregation and a deduplication: "
                    "'assertion failed: StateSchemaProvider should always be defined for the Avro encoder')")
            continue
        seen = found.get(op.operator_id, set())
        written = next(iter(seen)) if len(seen) == 1 else None
        if written is None or written == pinned:
            continue
        rows = written == UNSAFE_ROW
        return Written(ENCODING, pinned, written, (
            f"the values of operator {op.operator_id}'s RocksDB state {'all fit' if rows else 'none fits'} the UnsafeRow "
            f"layout (a version byte, then a row of whole 8-byte words, or a list of them after their sizes)"
            f"{'' if rows else ': they are Avro'}"),
            "Spark restarts and reads the UnsafeRows with the Avro encoder: its output differs from a control run's "
            "(tested)" if rows else
            "Spark reads the Avro bytes as UnsafeRows: the query fails as its Python worker reads the state "
            "('EOFError'), or the driver's JVM dies (a SIGSEGV while the operator reads its state; tested, one or the "
            "other in repeated restarts)")
    return None


def source_evolution(ctx: Context, pinned: str) -> Written | None:
    last = ctx.ckpt.offset_ids[-1] if ctx.ckpt.offset_ids else None
    seq = ctx.offsets.get(last) if last is not None else None
    if pinned.lower() != "true" or seq is None or seq.version != 1:
        return None
    return Written(SOURCE_EVOLUTION, pinned, "false", (
        f"offsets/{last} is a version 1 file, listing its sources by position: the query that wrote it named none "
        "of its sources, and source evolution needs every one named"),
        "on restart Spark asks each source of the query for its name and fails (tested: 'assertion failed: All sources "
        "should be named at this point')")


def written_confs(ctx: Context) -> list[Written]:
    found = last_conf(ctx)
    if found is None or not ctx.operators:
        return []
    _, conf = found
    out = [partition_count(ctx)]
    judges: tuple[tuple[str, Callable[[Context, str], Written | None]], ...] = (
        (PROVIDER, provider),
        (AGG_FORMAT, lambda c, v: value_schema_format(c, AGG_FORMAT, v, AGGREGATIONS, aggregation_written)),
        (JOIN_FORMAT, join_format),
        (GROUP_STATE_FORMAT, lambda c, v: value_schema_format(c, GROUP_STATE_FORMAT, v, GROUP_STATE,
                                                              group_state_written)),
        (ENCODING, encoding), (SOURCE_EVOLUTION, source_evolution))
    for key, judge in judges:
        value = conf.get(key) if key == SOURCE_EVOLUTION else effective(conf, key)  # no default Spark pins for it
        out.append(judge(ctx, str(value)) if value is not None else None)
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
