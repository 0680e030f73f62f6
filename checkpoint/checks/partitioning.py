"""The check that each state file holds the keys of its own partition.

A stateful operator's input is hash-partitioned by its keys (:mod:`..key_partitions`), and partition ``p`` of its
state only ever holds keys that hash to ``p``. A file of another partition's directory (a restore or a copy that
mixed partitions up) is loaded all the same: its keys sit where no batch sends their rows, so they are emitted
again when the watermark passes them, while the partition's own keys are gone (rows lost or emitted twice).
"""
from __future__ import annotations

from typing import Iterator

from .context import Context
from .definition import ERROR, Instruction, Issue, check
from .state import content_loads, plans


@check("WM058", ERROR, "state files holding another partition's keys")
def foreign_partition_files(ctx: Context) -> Iterator[Issue]:
    content_loads(ctx)  # samples the keys of each file it reads
    owners = ctx.memo.get("foreign-keys", {})
    for plan in plans(ctx):
        op, part = plan.op, plan.part
        foreign = [(f, owners[f.path]) for f in plan.chain if f.path in owners]
        if not foreign:
            continue
        first, owner = foreign[0]
        names = ", ".join(f.path.rsplit("/", 1)[-1] for f, _ in foreign)
        yield Issue(first.path, (
            f"{part.directory} holds keys of another partition in {names} (a key of {first.path.rsplit('/', 1)[-1]} "
            f"hashes to partition {owner} of {op.num_partitions}, as Spark partitions operator {op.operator_id}'s "
            f"input): the file comes from another partition's directory (a restore or copy mixed partitions up); "
            f"Spark loads it without an error, and those keys sit where no batch sends their rows, while this "
            f"partition's own are gone: rows are emitted twice or lost (tested: the restart's output differs from a "
            f"control run); a file without a key of another partition may come from there too (one with no rows), so no "
            f"rewind can tell which versions to keep"
        ), Instruction(f"restore {part.directory} from a backup of this checkpoint (every file of it)"))
