"""``wmcheck check`` as a library: every inconsistency that makes Spark fail, lose data or misbehave on restart.

``check_checkpoint(ckpt)`` runs every check of the registry (``CHECKS``, codes ``WM001``...) over one
checkpoint, reading each file once, and returns :class:`Finding` objects; files that do not parse
become findings too. ``check_location`` also turns a checkpoint that cannot be opened into a
``WM000`` finding, so that one bad path does not hide the others.
"""
from __future__ import annotations

import os
import posixpath
from dataclasses import replace
from datetime import timezone, tzinfo
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Sequence

from wmcheck.checkpoint.watermarks.plans import BatchPlan
from wmcheck.checkpoint.watermarks.progress import BatchProgress, QueryProgress, query_progress

from .checks.context import STALL_BATCHES, Context, error_text
from .checks.definition import ERROR, WARNING, Check, Finding, Instruction
from .checks.registry import CHECKS, OPEN_FAILED
from .checks.remedies import RESTORE
from .errors import CheckpointError, NotACheckpointError, arg
from .fs import FileSystem, scheme_of
from .locations import open_file_sink
from .model import Checkpoint, open_checkpoint

if TYPE_CHECKING:  # a Delta table's log and a broker: imported where given (wmcheck show reads neither)
    from .sinks.delta import DeltaTableLog
    from .sources.delta_table import DeltaSourceTable
    from .sources.kafka_topics import KafkaTopics

__all__ = ["CHECKS", "ERROR", "WARNING", "OPEN_FAILED", "Check", "Finding", "check_checkpoint", "check_location",
           "open_file_sink", "select_checks", "fails"]


UNPARSEABLE = "WM001"
OPEN_FIX = Instruction("pass the directory given as checkpointLocation (it holds offsets/ and commits/), readable "
                       "with these file system options")


def select_checks(select: Iterable[str] | None = None, ignore: Iterable[str] = ()) -> list[Check]:
    """The checks named by ``select`` (all when None) minus ``ignore``; unknown codes are an error."""
    chosen, dropped = set(select or CHECKS), set(ignore)
    unknown = sorted((chosen | dropped) - set(CHECKS))
    if unknown:
        raise CheckpointError(f"unknown check code(s): {', '.join(unknown)}",
                              hint=f"the codes are {code_ranges(sorted(CHECKS))}, each explained in docs/check.md",
                              param="select" if set(unknown) - dropped else "ignore")
    return [c for code, c in CHECKS.items() if code in chosen - dropped]


def code_ranges(codes: list[str]) -> str:
    """``WM000..WM036, WM038..WM041``: sorted codes as runs of consecutive numbers."""
    runs: list[list[str]] = []
    for code in codes:
        if runs and int(code[2:]) == int(runs[-1][-1][2:]) + 1:
            runs[-1].append(code)
        else:
            runs.append([code])
    return ", ".join(run[0] if len(run) == 1 else f"{run[0]}..{run[-1]}" for run in runs)


def shown_relative(target: str, base: str) -> str:
    """``target`` relative to ``base`` where both are on one file system, else ``target`` as is."""
    ts, bs = scheme_of(target), scheme_of(base)
    if ts is None and bs is None:
        return os.path.relpath(target, base).replace(os.sep, "/")
    if ts == bs and ts is not None:
        (t_host, t_path), (b_host, b_path) = (u.split("://", 1)[1].partition("/")[::2] for u in (target, base))
        if t_host == b_host:
            return posixpath.relpath("/" + t_path, "/" + b_path)
    return target


def check_checkpoint(
    ckpt: Checkpoint,
    file_sink: FileSystem | str | None = None,
    *,
    checks: Iterable[Check] | None = None,
    name: str | None = None,
    tz: tzinfo = timezone.utc,
    stall_batches: int = STALL_BATCHES,
    progress: QueryProgress | None = None,
    content: bool = True,
    state_progress: Callable[[int, int], None] | None = None,
    notes: list[str] | None = None,
    operator_lag_ms: int | None = None,
    kafka: KafkaTopics | None = None,
    delta: DeltaTableLog | None = None,
    delta_sources: tuple[DeltaSourceTable, ...] = (),
    delta_app_id: str | None = None,
) -> list[Finding]:
    """Run ``checks`` (default: all) on ``ckpt`` and, with ``file_sink``, on the sink's log; findings by code and path.

    ``stall_batches`` is how many data batches a stalled watermark may span before WM038 warns; ``progress``
    (Spark's progress reports of the query) adds whether max event time kept advancing, and its plans (an event
    log) each operator's own watermark; ``operator_lag_ms``: how far that may lag the global one before WM042
    warns (default: the query's watermark delay). ``content``: decode the state files the next batch loads as Spark
    reads them (else their names only), calling ``state_progress(done, total)`` per store partition; ``notes``
    receives what could not be checked; ``kafka``: the broker the Kafka sources' offsets are compared with; ``delta``: the
    query's Delta sink table (WM086, WM087), judged by the ``txn`` of ``delta_app_id`` (None: the query id);
    ``delta_sources``: its Delta source tables (WM089, WM090)."""
    sink = open_file_sink(file_sink, lost_log=True) if isinstance(file_sink, str) else file_sink
    label = name or ckpt.location
    if ckpt.state_layout.unreadable:  # every state check would see its partitions missing: what cannot be read, only
        return [open_failure(label, exc) for exc in ckpt.state_layout.unreadable]
    ctx = Context(ckpt, sink, shown_relative(sink.uri(), ckpt.location) if sink else "", tz, stall_batches, progress,
                  content, state_progress, operator_lag_ms, kafka, delta,
                  shown_relative(delta.location, ckpt.location) if delta else "", delta_sources, delta_app_id)
    findings: list[Finding] = []
    unreadable: list[CheckpointError] = []
    for check in CHECKS.values() if checks is None else checks:
        if check.run is None or (sink is None and check.needs_sink):
            continue
        try:
            findings.extend(Finding(check.code, check.severity, label, *issue) for issue in check.run(ctx))
        except CheckpointError as exc:  # a file only this check reads: report it, run the other checks
            unreadable.append(exc)
    shown = {f.path for f in findings if f.code == UNPARSEABLE}
    for error in unreadable:
        if (error.path or "") not in shown:
            shown.add(error.path or "")
            findings.append(Finding(UNPARSEABLE, ERROR, label, error.path or "", error_text(error), RESTORE))
    if notes is not None:
        notes.extend(ctx.notes)
    return sorted(findings, key=lambda f: (f.code, f.path))


def check_location(
    location: str,
    file_sink: FileSystem | str | None = None,
    *,
    fs_options: Mapping[str, str] | None = None,
    checks: Iterable[Check] | None = None,
    tz: tzinfo = timezone.utc,
    stall_batches: int = STALL_BATCHES,
    progress: Sequence[BatchProgress] = (),
    content: bool = True,
    state_progress: Callable[[int, int], None] | None = None,
    notes: list[str] | None = None,
    plans: Sequence[BatchPlan] = (),
    operator_lag_ms: int | None = None,
    kafka: KafkaTopics | None = None,
    delta: DeltaTableLog | None = None,
    delta_sources: Sequence[str] = (),
    delta_app_id: str | None = None,
) -> list[Finding]:
    """Open ``location`` and check it; a checkpoint that cannot be read at all is one ``WM000`` finding.
    ``progress`` and ``plans``: Spark's progress reports and batch plans
    (:func:`~wmcheck.checkpoint.watermarks.progress_files.read_records`), any query's; those of this checkpoint's query are used.
    ``delta_sources``: the query's Delta source tables (WM089, WM090), each matched to its source by the table id;
    a path that is not a Delta table or not one of the query's sources raises (``param`` ``delta_source``)."""
    sink = open_file_sink(file_sink, fs_options, lost_log=True) if isinstance(file_sink, str) else file_sink
    try:
        ckpt = open_checkpoint(location, fs_options)
        reports = query_progress(ckpt.query_metadata.query_id, progress, plans) \
            if (progress or plans) and ckpt.query_metadata else None
        return check_checkpoint(ckpt, sink, checks=checks, name=location, tz=tz, stall_batches=stall_batches,
                                progress=reports if reports and (reports.batches or reports.plans) else None,
                                content=content, state_progress=state_progress, notes=notes, operator_lag_ms=operator_lag_ms,
                                kafka=kafka, delta=delta, delta_sources=_delta_sources(ckpt, delta_sources, fs_options),
                                delta_app_id=delta_app_id)
    except CheckpointError as exc:
        from .sources.delta_table import PARAM as DELTA_SOURCE

        if exc.param == DELTA_SOURCE:  # the option's table is not one the query reads: bad input, not a finding
            raise
        return [open_failure(location, exc)]


def _delta_sources(ckpt: Checkpoint, locations: Sequence[str],
                   fs_options: Mapping[str, str] | None) -> tuple[DeltaSourceTable, ...]:
    """The tables at ``locations`` matched to the Delta sources of the last committed batch's offsets."""
    if not locations:
        return ()
    from .sources.delta import DELTA
    from .sources.delta_table import match_delta_sources

    done = ckpt.last_committed_batch
    sources = [] if done is None or ckpt.offsets_failure(done) is not None else [
        (i, s) for i, s in enumerate(ckpt.offsets(done).sources) if s.source is DELTA]
    return tuple(replace(t, shown=shown_relative(t.log.location, ckpt.location))
                 for t in match_delta_sources(done, sources, locations, fs_options))


def open_failure(location: str, exc: CheckpointError) -> Finding:
    """The ``WM000`` finding of what keeps a checkpoint from being checked; its fix the remedy of the error's cause."""
    meant = exc.suggested if isinstance(exc, NotACheckpointError) else None
    fix = (Instruction(f"pass {meant}, the checkpoint's root (it holds offsets/ and commits/)") if meant
           else Instruction(exc.hint) if exc.hint else OPEN_FIX)
    return Finding(OPEN_FAILED, ERROR, location, exc.path or "", exc.text(arg), fix)  # its placeholders kept


def fails(finding: Finding, strict: bool = False) -> bool:
    """Whether a finding makes ``wmcheck check`` exit 1 (warnings only with ``strict``)."""
    return finding.severity == ERROR or strict
