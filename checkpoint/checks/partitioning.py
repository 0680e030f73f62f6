"""The checks that each state file holds rows of its store's schema, with the keys of its own partition.

A stateful operator's input is hash-partitioned by its keys (:mod:`..key_partitions`), and partition ``p`` of its
state only ever holds keys that hash to ``p``. A file of another partition's directory (a restore or a copy that
mixed partitions up) is loaded all the same: its keys sit where no batch sends their rows, so they are emitted
again when the watermark passes them, while the partition's own keys are gone (rows lost or emitted twice).
Rows that the store's schema file does not describe (a schema file of another query) are not hashed: Spark
compares that file with the query's schema on restart.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from wmcheck.statestore.formats.registry import SST_DIR

from ..pinned_conf import ROW_CHECKSUM, effective
from .context import Context
from .definition import ERROR, Instruction, Issue, check
from .operator_metadata import rewrite_fix
from .remedies import swap_back
from .state_reads import Plan, content_loads, plans, state_reads

if TYPE_CHECKING:  # the rows' sampler: imported where state files are read (wmcheck show reads none)
    from wmcheck.statestore.keys.partitions import Sample


def samples(ctx: Context) -> dict[str, Sample]:
    """What the sampled rows of each state file the next batch loads show, by path; none when the offsets files
    disagree on whether rows carry checksums (which way the files were written is then unknown: WM015 or WM044)."""
    content_loads(ctx)  # samples the rows of each file it reads
    if len({str(effective(conf, ROW_CHECKSUM)).lower() for conf in ctx.confs.values()}) > 1:
        return {}
    return state_reads(ctx).row_samples


def sampled(found: dict[str, Sample], plan: Plan) -> list[tuple[str, Sample]]:
    """The samples of the files a store partition's load reads: its chain, and its snapshot's table files."""
    tables = f"{plan.part.directory}/{SST_DIR}/"
    return [(f.path, found[f.path]) for f in plan.chain if f.path in found] + sorted(
        (p, s) for p, s in found.items() if p.startswith(tables))


@check("WM058", ERROR, "state files holding another partition's keys")
def foreign_partition_files(ctx: Context) -> Iterator[Issue]:
    found = samples(ctx)
    hits = []
    for plan in plans(ctx):
        op, part = plan.op, plan.part
        if op.written_partitions is not None:
            continue  # WM015 or WM072: keys hashed by a count the state was not written with
        seen = sampled(found, plan)
        foreign = [(path, s.owner) for path, s in seen if s.owner is not None]
        if foreign and not any(s.misfit for _, s in seen):
            hits.append((plan, foreign))
    owners = {(p.op.operator_id, p.part.store, p.part.partition): {o for _, o in f} for p, f in hits}
    for plan, foreign in hits:
        op, part = plan.op, plan.part
        first, owner = foreign[0]
        names = ", ".join(path.split(f"{part.directory}/", 1)[-1] for path, _ in foreign)
        other = f"{part.directory.rsplit('/', 1)[0]}/{owner}"
        swapped = owners[op.operator_id, part.store, part.partition] == {owner} and owners.get(
            (op.operator_id, part.store, owner)) == {part.partition}
        if swapped and owner < part.partition:
            continue  # reported with the pair's first directory
        yield Issue(first, (
            f"{part.directory} holds keys of another partition in {names} (a key of {names.split(', ')[0]} "
            f"hashes to partition {owner} of {op.num_partitions}, as Spark partitions operator {op.operator_id}'s "
            f"input): the file comes from another partition's directory (a restore or copy mixed partitions up); "
            f"Spark loads it without an error, and those keys sit where no batch sends their rows, while this "
            f"partition's own are gone: rows are emitted twice or lost (tested: the restart's output differs from a "
            f"control run); a file without a key of another partition may come from there too (one with no rows), so no "
            f"rewind can tell which versions to keep"
            + (f". {other} holds this partition's keys only: the two directories are swapped" if swapped else "")
        ), swap_back(part.directory, other) if swapped else Instruction(
            f"restore {part.directory} from a backup of this checkpoint (every file of it)"))


def fits(sample: Sample, row: str | None) -> bool:
    """Whether a file's sampled rows fit the schema where another file's ``row`` (key or value) does not."""
    return not sample.misfit and (sample.rows if row == "key" else sample.values) > 0


@check("WM059", ERROR, "state schema file that does not describe the state's rows")
def misfit_schema(ctx: Context) -> Iterator[Issue]:
    found = samples(ctx)
    reported: set[int] = set()
    for plan in plans(ctx):
        op = plan.op
        seen = sampled(found, plan)
        bad = next(((path, s.misfit) for path, s in seen if s.misfit), None)
        if bad is None or op.operator_id in reported or any(fits(s, bad[1]) for _, s in seen):
            continue  # rows of one file that do not fit while others do: that file is damaged, not the schema
        reported.add(op.operator_id)
        path, misfit = bad
        row = misfit or "key"
        schemas = ctx.ckpt.schema_file_paths(op.operator_id, plan.part.store)
        yield Issue(schemas[0] if schemas else path, (
            f"the {row} rows of {path} are not rows of the {row} schema in {', '.join(schemas) or 'the schema file'} "
            f"(another number or kind of columns): the schema file comes from another query, or the state does; on "
            f"restart Spark compares the file with the query's own state schema and fails where they differ "
            f"(STATE_STORE_{row.upper()}_SCHEMA_NOT_COMPATIBLE; tested with a schema file of another aggregation). "
            f"If the query that restarts wrote this state, its schema file is the one to replace"
        ), rewrite_fix(*schemas) if schemas else Instruction("restore the schema file from a backup"))
