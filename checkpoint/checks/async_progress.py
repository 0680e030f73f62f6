"""The gaps async progress tracking (``asyncProgressTrackingEnabled``) leaves in ``offsets/`` and ``commits/`` by
design: Spark writes a batch's offsets, and then its commit, only once per ``asyncProgressTrackingCheckpointIntervalMs``
(and for the first batch of each run); on restart it reads the latest offsets file and the one before it *on storage*
(``AsyncOffsetSeqLog.getPrevBatchFromStorage``), so the gaps do not matter to it. The option is a query option that
the checkpoint does not record: the pattern tells it."""
from __future__ import annotations

from typing import Iterator

from wmcheck.checkpoint.logs.metadata_log import OFFSET_LOG

from .context import Context
from .definition import WARNING, Instruction, Issue, check
from .text import span

OPTION = "asyncProgressTrackingEnabled"


def async_gaps(ctx: Context) -> list[tuple[int, int]]:
    """The gaps in ``offsets/`` ids when they are async progress tracking's, else none: the query is stateless (the
    mode refuses stateful queries) and has no file sink (it refuses one), and ``commits/`` holds exactly the batches
    ``offsets/`` holds, so every batch logged was committed and every gap is the same in both logs."""
    return list(ctx.once(_async_gaps))


def _async_gaps(ctx: Context) -> list[tuple[int, int]]:
    ckpt = ctx.ckpt
    gaps = ckpt.gaps(ckpt.offset_ids)
    alike = bool(gaps) and ckpt.commit_ids == ckpt.offset_ids and ctx.sink is None
    return gaps if alike and not ckpt.state_layout.operators else []


@check("WM085", WARNING, "offsets/ and commits/ skip the same batches, as async progress tracking writes them")
def async_progress_gaps(ctx: Context) -> Iterator[Issue]:
    gaps = async_gaps(ctx)
    if not gaps:
        return
    last = ctx.ckpt.offset_ids[-1]
    before = ctx.ckpt.offset_ids[-2]
    skipped = ", ".join(span(lo, hi) for lo, hi in gaps)
    offsets = ", ".join(s.summary() for s in ctx.offsets[last].sources) if last in ctx.offsets else ""
    resumes = f"Spark resumes at batch {last + 1} from offsets/{last}" + (f" ({offsets})" if offsets else "")
    if before == last - 1:
        restart = f"with {OPTION} or without it, {resumes} (it reads offsets/{before} and offsets/{last} only)"
    else:
        restart = (f"with {OPTION}, {resumes}, reading offsets/{before} as the batch before it (tested with Spark "
                   f"4.2); without it, Spark fails ('batch {last - 1} doesn't exist')")
    yield Issue(OFFSET_LOG.path(gaps[0][0]), (
        f"offsets/ and commits/ both skip batch(es) {skipped}, every batch logged is committed and the query is "
        f"stateless: the pattern {OPTION} writes (offsets and commits logged once per "
        f"asyncProgressTrackingCheckpointIntervalMs; the option is not recorded in the checkpoint, so this is judged "
        f"from the pattern). Restarted {restart}; the batches not logged cannot be rewound to or replayed alone"
    ), Instruction(f"nothing to change: restart the query with {OPTION}, as it ran"))
