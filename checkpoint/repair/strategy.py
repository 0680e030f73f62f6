"""How an executed repair changes the checkpoint once its backup is made: a request's execution strategy.

``run`` does the rest the same way for every repair (the lock, the idle and link checks, the backup, the
manifest); the strategy says what happens in between. The default applies the plan's steps in order;
Spark's repartition (:mod:`.repartition`) has Spark write a batch first.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

from wmcheck.checkpoint.records import dataclass

from ..model import Checkpoint
from .backup import Backup
from .execute import apply
from .plan import Plan
from .results import Verification


@dataclass(frozen=True)
class Run:
    """One execution: the checkpoint, its plan and backup (manifest written), the clock and the test hook."""

    ckpt: Checkpoint
    plan: Plan
    backup: Backup
    fs_options: Mapping[str, str] | None
    now: int
    fail_after: int | None
    guard: Callable[[], None]
    """The idle and lock check, repeated right before the first change (see :func:`.safety.idle_guard`)."""
    resume: bool = False
    """Finishing an interrupted run (each step checked against the files first)."""


class Execution:
    """The default strategy: the plan's steps, applied in order (:func:`.execute.apply`)."""

    def check(self, plan: Plan, force: bool = False) -> None:
        """Raise a CheckpointError when ``plan`` cannot be executed here (a dry run shows it as a warning);
        ``force``: the user overrides what may be overridden."""

    def needed(self, plan: Plan) -> bool:
        """Whether executing ``plan`` changes anything (else no backup is made)."""
        return bool(plan.steps)

    def prepare(self, ckpt: Checkpoint, plan: Plan, fs_options: Mapping[str, str] | None) -> None:
        """Whatever may fail before anything is written (after the checks, before the backup)."""

    def carry_out(self, run: Run) -> Verification | None:
        """Make the plan's changes; the journal and the manifest's status are this method's to keep."""
        apply(run.plan, run.backup, run.now, run.fail_after, resume=run.resume, guard=run.guard)
        return None

    def restarts(self, plan: Plan) -> bool:
        """Whether an interrupted run of ``plan`` is undone and run anew instead of finished step by step."""
        return False


STEPS = Execution()
"""The strategy of every repair whose plan lists all its changes."""
