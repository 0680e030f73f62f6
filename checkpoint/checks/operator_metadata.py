"""Checks of the operator metadata (``state/<op>/_metadata/``) against the checkpoint it sits in.

On the first batch of a run Spark reads the operator names in the metadata and compares them with the query's
stateful operators (``IncrementalExecution.checkOperatorValidWithMetadata``): a difference fails the query
(``STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA``), v1 metadata it cannot read skips the check with a
warning in its log, and a missing one is written again. The number of state partitions is the pinned
``spark.sql.shuffle.partitions``, whatever the metadata says."""
from __future__ import annotations

from typing import Iterator

from wmcheck.checkpoint.logs.operator_metadata import OperatorMetadata

from ..layout import DEFAULT_STORE
from ..model import Operator
from ..operator_kinds import SPARK_OPERATOR_NAMES, infer_operator_name, is_transform_with_state
from ..repartitions import SHUFFLE_PARTITIONS
from .conf import rejected
from .context import Context, error_text
from .definition import ERROR, WARNING, Instruction, Issue, check
from .remedies import swap_back
from .text import listed

TOLD_BY_SHAPE = frozenset({"symmetricHashJoin", "flatMapGroupsWithState", "dedupe", "dedupeWithinWatermark"})
"""Operators whose state shape (store names, the default store's schema) names them: a schema inferred as one of
these is that operator's."""
SAME_STATE = {"applyInPandasWithState": "flatMapGroupsWithState"}
"""Operators that keep their state like another one."""
SHAPED = frozenset({"symmetricHashJoin", "dedupe", "dedupeWithinWatermark"})
"""Operators whose state always has their shape (a flatMapGroupsWithState of state format 1 has no ``groupState``
column, so a schema inferred as an aggregation does not rule it out)."""


def v1_metadata(operator_id: int) -> str:
    return f"state/{operator_id}/_metadata/metadata"


def rewrite_fix(*paths: str) -> Instruction:
    """Delete files Spark writes again from the query when it starts (v1 operator metadata, state schemas)."""
    files, them = (f"{' and '.join(paths)} with their checksum files", "them") if len(paths) > 1 else (
        f"{paths[0]} with its checksum file", "it")
    return Instruction(f"while the query is stopped, delete {files}: Spark writes {them} again from the query when it "
                       "starts")


@check("WM045", WARNING, "operator metadata Spark skips or overrides")
def ignored_metadata(ctx: Context) -> Iterator[Issue]:
    for path, exc in sorted(ctx.unread_metadata.items()):
        yield Issue(path, (
            f"{error_text(exc)}: Spark reads v1 operator metadata only to compare the operator names with the query's "
            "when it starts, and skips that check when it cannot read the file, so the restart works; readers of the "
            "state (the state-metadata source, wmcheck) lose the operator's name and partition count"
        ), rewrite_fix(path))
    if rejected(ctx, SHUFFLE_PARTITIONS) is not None:
        return  # the restart fails on the pinned count itself (WM057)
    for op in ctx.operators:
        if op.metadata_conflict:
            path = metadata_path(op)
            yield Issue(path, (
                f"{op.metadata_conflict}: Spark ignores the count and runs operator {op.operator_id} with "
                f"{op.num_partitions} state partitions, so the restart works; readers of the state that go by the "
                "metadata (the state-metadata source) report the wrong count"
            ), rewrite_fix(path) if path == v1_metadata(op.operator_id) else Instruction(
                f"restore {path} from a backup"))


def metadata_path(op: Operator) -> str:
    """The operator's metadata: its v1 file, or its v2 directory (a file per batch that wrote one)."""
    if isinstance(op.metadata, OperatorMetadata) and op.metadata.version >= 2:
        return f"state/{op.operator_id}/_metadata/v2"
    return v1_metadata(op.operator_id)


def newest_schema(ctx: Context, operator_id: int) -> tuple[str, tuple[str, ...]] | None:
    """The newest state schema file of a transformWithState operator's store (``_stateSchema/default/<batch>_<uuid>``)
    and the column families it names."""
    folder = f"state/{operator_id}/_stateSchema/{DEFAULT_STORE}/"
    mine = [(int(p[len(folder):].split("_", 1)[0]), p) for p in ctx.schemas
            if p.startswith(folder) and p[len(folder):].split("_", 1)[0].isdigit()]
    if not mine:
        return None
    path = max(mine)[1]
    return path, tuple(cf.name for cf in ctx.schemas[path].column_families)


def missing_variables(metadata: OperatorMetadata, families: tuple[str, ...]) -> list[str]:
    """The column families a transformWithState operator's metadata implies (each state variable, and its TTL family
    when TTL is on) that its schema file does not name."""
    props = metadata.properties if isinstance(metadata.properties, dict) else {}
    wanted = []
    for var in props.get("stateVariables") or ():
        if isinstance(var, dict) and isinstance(var.get("stateName"), str):
            wanted += [var["stateName"]] + ([f"$ttl_{var['stateName']}"] if var.get("ttlEnabled") is True else [])
    return [name for name in wanted if name not in families]


def foreign_schema(ctx: Context, op: Operator) -> Issue | None:
    """A transformWithState operator whose newest schema file lacks column families its metadata's state variables
    imply: one of them comes from another query."""
    newest = newest_schema(ctx, op.operator_id)
    if newest is None or not isinstance(op.metadata, OperatorMetadata):
        return None
    missing = missing_variables(op.metadata, newest[1])
    if not missing:
        return None
    return Issue(newest[0], (
        f"the operator metadata of operator {op.operator_id} {op.name} names state variables (with their TTL) that "
        f"{newest[0]} has no column family for ({listed(missing)}): the schema file or the metadata comes from another "
        "query. Spark checks the query's state against the schema file when it starts and fails (tested with Spark "
        "4.3: '[STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE]' for tws_pandas's schema file in tws_ttl)"
    ), Instruction(f"restore {newest[0]} from a backup"))


@check("WM046", ERROR, "operator metadata and state schema describe different operators")
def foreign_metadata(ctx: Context) -> Iterator[Issue]:
    layout = {o.operator_id: o for o in ctx.ckpt.state_layout.operators}
    for op in ctx.operators:
        if op.metadata is not None and op.name is not None and op.name not in SPARK_OPERATOR_NAMES:
            path = metadata_path(op)
            yield Issue(path, (
                f"the operator metadata names operator {op.operator_id} {op.name!r}, a name Spark gives no operator "
                f"(it writes {', '.join(sorted(SPARK_OPERATOR_NAMES))}): the file was edited. Spark compares the "
                "metadata's operator names with the query's exactly when it starts and fails (tested with Spark 4.3: "
                "'[STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA]' for StateStoreSave)"
            ), rewrite_fix(path) if path.endswith("/metadata") else Instruction(f"restore {path}/ from a backup"))
            continue
        if op.metadata is not None and op.name is not None and is_transform_with_state(op.name):
            issue = foreign_schema(ctx, op)
            if issue is not None:
                yield issue
            continue
        if op.metadata is None or op.name is None or op.operator_id not in layout:
            continue
        stores = tuple(layout[op.operator_id].stores)
        inferred = infer_operator_name(stores, ctx.ckpt.store_schema(op.operator_id, DEFAULT_STORE))
        if inferred is None or SAME_STATE.get(op.name, op.name) == SAME_STATE.get(inferred, inferred):
            continue
        if inferred not in TOLD_BY_SHAPE and op.name not in SHAPED:
            continue
        schemas = [p for store in stores for p in ctx.ckpt.schema_file_paths(op.operator_id, store)]
        path = metadata_path(op)
        yield Issue(path, (
            f"the operator metadata names operator {op.operator_id} {op.name}, but its state is a {inferred}'s (its "
            f"store names{' and ' + listed(schemas) if schemas else ''}): one of them comes from another query. Spark "
            f"compares the "
            f"metadata with the query's operators and its state schema with the query's state when it starts, and "
            f"fails on either ('[STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA]', "
            f"'[STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE]')"
        ), rewrite_fix(path, *schemas))


@check("WM051", ERROR, "operator metadata of an operator with schema files is gone")
def schema_without_metadata(ctx: Context) -> Iterator[Issue]:
    if ctx.ckpt.last_committed_batch is None:
        return
    for op in ctx.ckpt.state_layout.operators:
        if not op.schema_files or any("/_metadata/v2/" in f.path for f in op.metadata_files):
            continue
        folder = f"state/{op.operator_id}"
        yield Issue(f"{folder}/_metadata/v2", (
            f"{folder}/_stateSchema/ holds the operator's state schema files, which Spark writes beside operator "
            f"metadata v2 (transformWithState, stream-stream join state formats 3 and 4), but {folder}/_metadata/v2/ "
            "holds no metadata file: on restart Spark reads the operator's newest metadata up to the batch it runs "
            "and fails ('[STDS_FAILED_TO_READ_OPERATOR_METADATA] Failed to read the operator metadata', tested with "
            "Spark 4.3)"
        ), Instruction(f"restore {folder}/_metadata/v2/ from a backup (one of its files is enough: Spark reads the "
                       "newest it finds and writes another with the batch it runs); without one, start the query from "
                       "a new checkpoint"))


def named_operators(ctx: Context) -> dict[int, tuple[Operator, OperatorMetadata]]:
    """Each ``state/<id>`` directory with operator metadata, with the operator and its metadata."""
    return {op.operator_id: (op, op.metadata) for op in ctx.operators if isinstance(op.metadata, OperatorMetadata)}


def stray_copies(ctx: Context) -> set[int]:
    """``state/<id>`` directories past a missing id whose metadata names another operator whose own directory
    names itself: copies of it beside the query's operators (numbered from 0 without gaps), which Spark never reads
    (tested: ``state/0`` copied to ``state/7``, the control run's output)."""
    metadata = named_operators(ctx)
    first_gap = next(i for i in range(len(metadata) + 1) if i not in metadata)
    return {d for d, (_, meta) in metadata.items() if d > first_gap and meta.operator_id != d
            and meta.operator_id in metadata and metadata[meta.operator_id][1].operator_id == meta.operator_id}


@check("WM080", ERROR, "a stateful operator's directory holding another operator's state")
def misplaced_operator_state(ctx: Context) -> Iterator[Issue]:
    metadata = named_operators(ctx)
    named = {directory: meta.operator_id for directory, (_, meta) in metadata.items()}
    strays = stray_copies(ctx)
    for directory, operator_id in sorted(named.items()):
        if operator_id == directory or directory in strays:
            continue
        op, meta = metadata[directory]
        swapped = named.get(operator_id) == directory
        if swapped and operator_id < directory:
            continue  # reported with the pair's first directory
        what = (f"state/{directory} and state/{operator_id} are swapped (each one's metadata names the other)"
                if swapped else "the directory holds another operator's state (one copied over it, or moved)")
        yield Issue(metadata_path(op), (
            f"the operator metadata of state/{directory} names operator {operator_id} ({meta.operator_name}), "
            f"which Spark writes into state/{operator_id} only: {what}. Spark runs each stateful operator from the "
            "directory of its own id and fails when it starts: on the metadata, when the operators it names differ "
            "from the query's ('[STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA]'), else on the other "
            "operator's state schema ('[STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE]') or stores (a join's: "
            "'CANNOT_READ_DELTA_FILE_NOT_EXISTS'), tested with Spark 4.3; operators that keep the same state load each "
            "other's"
        ), swap_back(f"state/{operator_id}", f"state/{directory}") if swapped else Instruction(
            f"restore state/{directory} from a backup of this checkpoint (every file of it)"))
