"""Checks of a stream-stream join's state: its four stores per partition agree as the next batch loads them."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from wmcheck.statestore.formats.content import Decoding

from ..model import PINNED_CONFS
from .context import Context
from .definition import ERROR, Issue, check
from .loaded_state import Reader
from .state_reads import Plan, load_version, plans, rewind_fix
from .text import plural

if TYPE_CHECKING:  # the join rows' reader: imported where the stores are read (wmcheck show reads none)
    from wmcheck.statestore.encodings.join_rows import Missing

JOIN = "symmetricHashJoin"
COUNTS, ROWS = "keyToNumValues", "keyWithIndexToValue"
READ_LIMIT = 32 << 20
"""The most bytes of join state files one check reads (larger states are not judged)."""
VERSIONS_BACK = 20
"""How many versions before the next load are tried for the newest that agrees (the rewind's target)."""


def side_pairs(ctx: Context) -> dict[tuple[int, int, str], dict[str, Plan]]:
    """(operator, partition, side) -> {store kind: its plan} of every join of state format 1 or 2 (a store per side
    and kind) whose two stores of a side the next batch can load."""
    out: dict[tuple[int, int, str], dict[str, Plan]] = {}
    for plan in plans(ctx):
        side, _, kind = plan.part.store.partition("-")
        if plan.op.name == JOIN and kind in (COUNTS, ROWS) and plan.load.loadable:
            out.setdefault((plan.op.operator_id, plan.part.partition, side), {})[kind] = plan
    return {k: v for k, v in out.items() if len(v) == 2}


def disagreement(reader: Reader, pair: dict[str, Plan], version: int, key) -> list[Missing] | None:
    """The keys whose count names rows the indexed store lacks at ``version``; None when it cannot be read."""
    from wmcheck.statestore.encodings.join_rows import missing_rows

    counts = reader.state(pair[COUNTS].part, version, pair[COUNTS].ids)
    rows = reader.state(pair[ROWS].part, version, pair[ROWS].ids) if counts is not None else None
    return None if counts is None or rows is None else missing_rows(counts, rows, key)


@check("WM068", ERROR, "a stream-stream join's value counts name rows its state lacks")
def join_counts_disagree(ctx: Context) -> Iterator[Issue]:
    if (ctx.conf(PINNED_CONFS["encoding_format"]) or "unsaferow").lower() != "unsaferow" or not ctx.content:
        return
    if Decoding.of(ctx.conf).row_checksums:
        return  # rows with checksums: not read here
    reader, version = Reader(ctx, READ_LIMIT), load_version(ctx)
    for (op, partition, side), pair in sorted(side_pairs(ctx).items()):
        schema = ctx.ckpt.store_schema(op, f"{side}-{COUNTS}")
        if schema is None:
            continue
        found = disagreement(reader, pair, version, schema.key_schema)
        if not found:
            continue
        agrees = next((v for v in range(version - 1, max(version - 1 - VERSIONS_BACK, 0), -1)
                       if disagreement(reader, pair, v, schema.key_schema) == []), None)
        first = found[0]
        from wmcheck.statestore.encodings.join_rows import shown_key

        shown = f"state/{op}/{partition}/{side}-{{{COUNTS},{ROWS}}}"
        why, fix = rewind_fix(ctx, agrees) if agrees is not None else rewind_fix(ctx, 0)
        yield Issue(pair[COUNTS].part.directory, (
            f"{shown}: as the next batch loads them (version {version}), {side}-{COUNTS} counts rows that "
            f"{side}-{ROWS} does not hold for {plural(len(found), 'join key')}, e.g. key ({shown_key(first.key, schema.key_schema)}): "
            f"{first.values} rows, none at index {first.gap} (the two stores' files are of different versions: a restore "
            "or copy that mixed them). Spark fails when it reads that key, at the latest when it evicts the side's "
            "rows ('[STREAM_STREAM_JOIN_INCONSISTENT_STATE.NULL_VALUE] Detected inconsistency in stream-stream join "
            "state', tested with Spark 4.3; Spark 3.5: 'NullPointerException: … \"valuePair\" is null', tested); with "
            "spark.sql.streaming.stateStore.skipNullsForStreamStreamJoins.enabled "
            "it skips the missing rows: they are lost to the join"
            + (f"; the newest version whose two stores agree is {agrees}: a rewind to the batch before it (where "
               f"{why}) makes Spark load it and write the later versions again" if agrees is not None else
               f"; no version of the last {VERSIONS_BACK} agrees: {why}")
        ), fix)
    if reader.over:
        ctx.notes.append(f"WM068 reads {READ_LIMIT:,} bytes of join state files per check and left the rest unjudged "
                         "(their value counts are not compared with their rows)")
