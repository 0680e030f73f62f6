"""The check that the state the next batch loads holds no key the last committed batch's eviction removed.

A streaming aggregation in append or update output mode removes, at the end of every batch, each key whose
event-time column (a window's end) is at or before its eviction watermark (:mod:`..stale_keys`); the state
version it writes holds none. Such keys in the version the next batch loads mean that a state file is not the one
Spark wrote (another partition's, an older version's, an older backup): names, sizes and contents of each file alone
cannot show it when the file holds no row at all. In complete mode Spark never removes a key: an operator none of
whose files removes any key is not judged.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Iterator

from wmcheck.statestore.formats.load import StoreLoad
from wmcheck.statestore.formats.registry import ROCKSDB_ZIP, SST_DIR

from ..repair.requests import RewindRequest
from ..timeutil import format_ms
from . import state_reads
from .context import Context
from .definition import ERROR, Issue, check
from .state_reads import Bound, aging, content_loads, judged_for_output, rewind_fix
from .text import plural

if TYPE_CHECKING:  # the keys' readers: imported where a load is judged (wmcheck show judges none)
    from wmcheck.statestore.keys.stale import FileChanges


def judged(ctx: Context, load: StoreLoad) -> tuple[list[FileChanges], list[FileChanges]] | None:
    """(the snapshot's table files, the other files in load order) of a load as read, None when a file was not read
    whole (or the load fails or skips a file: other checks' findings)."""
    if load.failure is not None or load.skipped or not load.chain:
        return None
    found = state_reads.state_reads(ctx).aged_changes
    first = load.chain[0]
    tables_dir = f"{load.part.directory}/{SST_DIR}/"
    tables = [c for p, c in sorted(found.items()) if p.startswith(tables_dir)] \
        if first.format.decoder == ROCKSDB_ZIP else []
    files = [found.get(f.path) for f in load.chain if f.format.decoder != ROCKSDB_ZIP]
    if any(c is None for c in tables + files):
        return None
    return [c for c in tables if c is not None], [c for c in files if c is not None]


@check("WM062", ERROR, "state holding keys the last batch's eviction removed")
def evicted_keys_loaded(ctx: Context) -> Iterator[Issue]:
    bounds = aging(ctx)
    loads = [(load, bounds[load.part.directory]) for load in content_loads(ctx) if load.part.directory in bounds]
    read = [(load, bound, judged(ctx, load)) for load, bound in loads]
    evicting = {load.part.operator_id for load, _, seen in read
                if seen is not None and any(c.removes for c in seen[0] + seen[1])}
    from wmcheck.statestore.keys.stale import latest_removal

    removed = {op: latest_removal([c for load, _, seen in read if seen is not None and load.part.operator_id == op
                                   for c in seen[0] + seen[1]]) for op in evicting}
    for load, bound, seen in read:
        if seen is None or load.part.operator_id not in evicting or not judged_for_output(ctx, load.part.operator_id):
            continue
        held = held_keys(*seen)
        if bound.inferred:
            bound = replace(bound, bound_us=removed[load.part.operator_id] or 0)
            held = {key: at for key, at in held.items() if at <= bound.bound_us}
        if held:
            yield issue(ctx, load, bound, held)
    unjudged = state_reads.state_reads(ctx).aged_unjudged & {load.part.directory for load, _ in loads}
    if unjudged:
        ctx.notes.append(f"WM062 reads {state_reads.AGED_BUDGET:,} bytes of state files whole per check and left "
                         f"{plural(len(unjudged), 'store partition')} past them unjudged (their keys are not compared "
                         "with the last batch's eviction watermark)")


def held_keys(tables: list[FileChanges], files: list[FileChanges]) -> dict[bytes, int]:
    """:func:`..stale_keys.stale_keys` of a load, with NumPy where it can (:data:`.state_reads.COLUMNAR`)."""
    from wmcheck.statestore.keys import stale_columns
    from wmcheck.statestore.keys.stale import stale_keys

    if state_reads.COLUMNAR and any(not isinstance(f.changes, tuple) for f in (*tables, *files)):  # some read as columns
        try:
            return stale_columns.stale_keys(tables, files)
        except stale_columns.Unproven:
            pass
    return stale_keys(tables, files)


def issue(ctx: Context, load: StoreLoad, bound: Bound, held: dict[bytes, int]) -> Issue:
    part, batch = load.part, bound.batch
    oldest = format_ms(min(held.values()) // 1000, ctx.tz)
    names = [f.path.rsplit("/", 1)[-1] for f in load.chain]
    read = ", ".join(names) if len(names) <= 3 else f"{names[0]}, …, {names[-1]}"
    what = f"the eviction watermark of batch {batch}"
    if bound.inferred:
        what = (f"the latest {bound.column} its state files show removed by batch {batch} or before (the operator's "
                f"eviction watermark of batch {batch} is at least that: its watermark never moves back)")
    why, fix = rewind_fix(ctx, first_evicting(ctx, min(held.values()), batch))
    if isinstance(fix, RewindRequest) and fix.to_batch is not None:
        why = (f"rewinding to batch {fix.to_batch} makes Spark load state version {fix.to_batch + 1} and run the "
               f"batches after it again, writing version {load.version} anew")
    return Issue(part.directory, (
        f"state version {load.version} of {part.directory}, which the next batch loads ({read}), holds "
        f"{plural(len(held), 'key')} of operator {part.operator_id} whose {bound.column} is at or before "
        f"{format_ms(bound.bound_us // 1000, ctx.tz)}, {what} (e.g. {bound.column} "
        f"{oldest}); batch {batch} removed every such key before it wrote that version, so a file of it is not the "
        f"one Spark wrote (another partition's, an older version's, or a lost increment over an older snapshot: a "
        f"file with no row of its own shows nothing else). Spark loads it without an error and removes those keys "
        f"again in the next batch: in append mode it emits their rows a second time (duplicate output; tested: the "
        f"restart's output differs from a control run), in update mode it drops them, and the changes the lost file "
        f"held are gone in either; {why}"
    ), fix)


def first_evicting(ctx: Context, event_us: int, batch: int) -> int:
    """The first batch up to ``batch`` whose watermark reaches ``event_us``: no operator's eviction watermark is past
    the batch's, so every state version up to it may hold the key, and a file written after it is the one to run again
    (a file in the middle of the chain, replaced, shows its keys only at the end of it)."""
    return next((b for b in sorted(ctx.offsets) if b <= batch and (seq := ctx.offsets[b]).metadata is not None
                 and seq.metadata.batch_watermark_ms * 1000 >= event_us), batch)
