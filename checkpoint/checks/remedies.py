"""The fixes several checks advise: a rewind to before a batch, restoring a file, a new checkpoint."""
from __future__ import annotations

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
