"""The fixes several checks advise: a rewind to before a batch, restoring a file, a new checkpoint."""
from __future__ import annotations

from .context import Context
from .definition import Fix, Instruction

RESTORE = Instruction("restore the file from a backup (wmcheck undo if a wmcheck repair changed it)")
NEW_CHECKPOINT = Instruction("start the query from a new checkpoint")


def rewind_before(ctx: Context, batch: int) -> Fix:
    """The rewind to the newest batch before ``batch`` that Spark planned and committed (both its offsets and its
    commit file exist) and can restart from (Spark reads the offsets of the batch before it too: 'batch N doesn't
    exist' when purged); a new checkpoint when there is none."""
    ckpt = ctx.ckpt
    commits, offsets = set(ckpt.commit_ids), set(ckpt.offset_ids)
    target = next((b for b in reversed(ckpt.offset_ids) if b < batch and b in commits and (b == 0 or b - 1 in offsets)),
                  None)
    return NEW_CHECKPOINT if target is None else ctx.rewind(target)
