"""Checks of the query's Delta source tables against the checkpoint (``check --delta-source PATH``): the table at the
source's path is another table than the one the offsets name (re-created there), and the commits the next batch reads
are gone from its log (log retention, or removed by hand). What the restart does after each is proven by delta-spark
restarts (tests/test_delta_source_check.py); the rules are in :mod:`..sources.delta_table`."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from ..logs.delta_log import LOG_DIR
from ..sources.delta import DELTA_LIVE, DeltaSource
from .context import Context
from .definition import ERROR, Instruction, Issue, check

if TYPE_CHECKING:  # check --delta-source alone reads the tables
    from ..sources.delta_table import DeltaSourceTable

TESTED = "tested with delta-spark 4.4"
_FILES_FIX = Instruction("restore the files from a backup; to go on without their rows, restart the query with "
                         "spark.sql.files.ignoreMissingFiles=true")


OFFLINE_NOTE = DELTA_LIVE.note()


def _reads_delta(ctx: Context) -> bool:
    """Whether the offsets the next batch starts from name a Delta source."""
    done = ctx.ckpt.last_committed_batch
    seq = ctx.offsets.get(done) if done is not None else None
    return seq is not None and any(isinstance(s.source, DeltaSource) for s in seq.sources)


def _span(first: int, last: int) -> str:
    return f"version {first}" if first == last else f"versions {first}..{last}"


@check("WM089", ERROR, "a Delta source's table at its path is another table (re-created)")
def source_table_replaced(ctx: Context) -> Iterator[Issue]:
    if not ctx.delta_sources and _reads_delta(ctx):
        ctx.notes.append(OFFLINE_NOTE)
    for table in ctx.delta_sources:
        if not table.replaced:
            continue
        yield Issue(f"{table.shown}/{LOG_DIR}", (
            f"the Delta table at source {table.source}'s path has id {table.log.table_id}, the query read table "
            f"{table.reservoir_id} (the reservoirId of batch {table.batch}'s offsets): it was re-created at its path, or "
            "is another table. The restart fails with DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE, also with the "
            f"source option failOnDataLoss=false ({TESTED})"), Instruction(
                "to read the table now at the path, start the query from a new checkpoint (it reads the table from its "
                "first version, or from the startingVersion option's); to go on reading the old table, point the query "
                "at it again"))


def _in_snapshot(table: DeltaSourceTable) -> str:
    return (f"the snapshot of version {table.start_version} that Delta source {table.source}'s next batch goes on "
            f"reading (batch {table.batch}'s end offset: index {table.start_index} of its files, isStartingVersion)")


@check("WM090", ERROR, "the commits a Delta source's next batch reads are gone from its table's log")
def source_commits_gone(ctx: Context) -> Iterator[Issue]:
    for table in ctx.delta_sources:
        if table.snapshot_lost and not table.replaced:
            earliest = table.earliest_commit if table.earliest_commit is not None else table.log.version
            yield Issue(f"{table.shown}/{LOG_DIR}", (
                f"the table's log can no longer rebuild {_in_snapshot(table)}: its JSON "
                f"commits start at version {earliest} and no checkpoint at or before version {table.start_version} is "
                "there. The restart fails with DELTA_LOG_FILE_NOT_FOUND_FOR_STREAMING_SOURCE, also with the source "
                f"option failOnDataLoss=false ({TESTED})"), Instruction(
                    f"restore the table's log files up to version {table.start_version} (its JSON commits, or a "
                    "checkpoint at or before it) from a backup; else start the query from a new checkpoint"))
        missing = None if table.replaced else table.missing_versions
        if missing is None:
            continue
        first, last = missing
        earliest = table.earliest_commit if table.earliest_commit is not None else table.log.version
        yield Issue(f"{table.shown}/{LOG_DIR}", (
            f"the log of Delta source {table.source}'s table no longer holds the commits of {_span(first, last)} (its "
            f"JSON commits start at version {earliest}), and the next batch reads the table from version "
            f"{table.start_version} on (batch {table.batch}'s end offset): the restart fails with "
            f"DELTA_MISSING_FILES_UNEXPECTED_VERSION (Delta stream cannot resume from version {table.start_version}; "
            f"transaction log starts at {earliest}). With the source option failOnDataLoss=false it reads from version "
            f"{earliest} on and never reads {_span(first, last)} ({TESTED})"), Instruction(
                f"to go on from version {earliest} without the rows of {_span(first, last)}, restart the query with "
                ".option(\"failOnDataLoss\", \"false\") on the Delta source; to read the whole table again, start the "
                "query from a new checkpoint"))


@check("WM091", ERROR, "data files a Delta source's next batch reads are gone from its table")
def source_files_gone(ctx: Context) -> Iterator[Issue]:
    for table in ctx.delta_sources:
        if table.replaced or table.missing_versions is not None or table.snapshot_lost:
            continue
        if table.gone_in_snapshot:
            yield Issue(f"{table.shown}/{table.gone_in_snapshot[0]}", (
                f"{len(table.gone_in_snapshot)} data file(s) of {_in_snapshot(table)}, after that index (not read yet), "
                "are gone from the table's directory (vacuumed or deleted): the batch that reads them fails with "
                "FAILED_READ_FILE.FILE_NOT_EXIST, also with the source option failOnDataLoss=false; with "
                f"spark.sql.files.ignoreMissingFiles=true it reads on without their rows ({TESTED})"), _FILES_FIX)
        if not table.gone_files:
            continue
        versions = sorted({v for v, _ in table.gone_files})
        first, path = table.gone_files[0]
        yield Issue(f"{table.shown}/{path}", (
            f"{len(table.gone_files)} data file(s) that the commits of Delta source {table.source}'s table add at "
            f"version(s) {', '.join(map(str, versions))} are gone from its directory (vacuumed or deleted), and the "
            f"next batch reads the table from version {table.start_version} on: the batch that reads version {first} "
            "fails with FAILED_READ_FILE.FILE_NOT_EXIST, also with the source option failOnDataLoss=false; with "
            f"spark.sql.files.ignoreMissingFiles=true it reads on without their rows ({TESTED})"), _FILES_FIX)
