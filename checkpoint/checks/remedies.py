"""The fixes several checks advise: a rewind to before a batch, restoring a file, a new checkpoint."""
from __future__ import annotations

from dataclasses import replace

from ..repair.requests import RewindRequest
from ..repair.targets import restartable_batches
from .context import Context
from .definition import Fix, Instruction

RESTORE = Instruction("restore the file from a backup (wmcheck undo if a wmcheck repair changed it)")
NEW_CHECKPOINT = Instruction("start the query from a new checkpoint")


def rewind_before(ctx: Context, batch: int) -> Fix:
    """The rewind to the newest batch before ``batch`` that Spark planned and committed and can restart from (the
    rewind planner's rule: :func:`restartable_batches`); a new checkpoint when there is none."""
    target = next((b for b in reversed(restartable_batches(ctx.ckpt)) if b < batch), None)
    return NEW_CHECKPOINT if target is None else ctx.rewind(target)


def state_rewind(ctx: Context, batch: int) -> tuple[str, RewindRequest]:
    """The rewind to ``batch`` that makes Spark write the state of the batches after it again, and what it adds to a
    finding's text: where Spark cannot restart with offsets/``batch`` as the last offsets file (the one before it is
    gone), offsets/``batch + 1`` is kept, so batch ``batch + 1`` runs again as it was planned."""
    fix = ctx.rewind(batch)
    gone = ctx.ckpt.start_offsets_missing(batch)
    if gone is None or batch + 1 not in ctx.ckpt.offset_id_set:
        return "", fix
    return (f"; offsets/{gone} is gone, so the rewind keeps offsets/{batch + 1} (Spark restarts from it and reads "
            f"offsets/{batch}) and batch {batch + 1} runs again as it was planned"), replace(fix, keep_next_offsets=True)


def swap_back(a: str, b: str) -> Instruction:
    """Put two directories that were swapped back where they belong (an instruction: the moves are the user's)."""
    return Instruction(f"while the query is stopped, swap the directories back: mv {a} {a}.tmp; mv {b} {a}; "
                       f"mv {a}.tmp {b}")
