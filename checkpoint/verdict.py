"""``wmcheck show`` as ``wmcheck check`` sees the checkpoint: its summary with check's restart verdict and findings,
from check's own checks (those that read no state file contents, a few milliseconds), so that the two commands never
give two answers about one checkpoint."""
from __future__ import annotations

from datetime import timezone, tzinfo

from wmcheck.checkpoint.watermarks.progress import QueryProgress

from .model import Checkpoint
from .summary import CheckpointSummary, describe
from .validate import check_checkpoint


def show_checkpoint(ckpt: Checkpoint, tz: tzinfo = timezone.utc, progress: QueryProgress | None = None) -> CheckpointSummary:
    """Everything ``wmcheck show`` reports: :func:`~.summary.describe` over the findings of check's checks that read
    no state file contents (``wmcheck check --no-content``: a file sink is checked only by check itself)."""
    return describe(ckpt, tz, progress, findings=check_checkpoint(ckpt, tz=tz, progress=progress, content=False))
