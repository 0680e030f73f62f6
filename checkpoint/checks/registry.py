"""The registry of checks: every check ``wmcheck check`` runs, listed here by code (importing a check module
adds nothing anywhere; a check missing from this list does not run)."""
from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from . import (
    access,
    async_progress,
    conf,
    delta_sink,
    delta_source,
    deltas,
    ended_state,
    evicted,
    full_copies,
    join_state,
    kafka_live,
    log_entries,
    logs,
    misplaced,
    operator_metadata,
    operators,
    partitioning,
    repartition,
    seen_files,
    sink_files,
    sink_log,
    sources,
    stall,
    state,
    state_confs,
    state_layout,
    stray_files,
    watermark,
)
from .definition import ERROR, WARNING, Check, Finding

__all__ = ["CHECKS", "ERROR", "OPEN_FAILED", "WARNING", "Check", "Finding"]

OPEN_FAILED = "WM000"

LISTED: tuple[Check, ...] = (
    Check(OPEN_FAILED, ERROR, "checkpoint cannot be opened", None),
    logs.unparseable, logs.offsets_gap, logs.commits_gap, logs.commit_without_offsets, logs.uncommitted_batches,
    logs.log_versions, logs.metadata_missing, logs.metadata_invalid, stray_files.temp_files, stray_files.orphan_crc,
    watermark.decreasing, watermark.commit_vs_next, watermark.future_watermark, watermark.stuck_watermark,
    conf.conf_changed,
    state.unloadable, state.leftovers, state_layout.missing_partitions, state_layout.extra_partitions, state_layout.unmatched_unique_ids,
    state_layout.checksums,
    sources.source_log_behind, sink_log.compaction, sink_log.sink_ahead, sink_log.sink_behind,
    logs.interrupted_repair,
    state_layout.unreachable_schemas, state_layout.borrowed_schemas,
    stray_files.upcoming_orphan_crc,
    state_layout.hadoop_checksums,
    sink_log.sink_log_gap,
    sink_files.sink_files_gone, sink_files.sink_files_elsewhere, sink_files.unlisted_sink_files,
    repartition.unfinished_repartition, repartition.sink_lacks_repartition,
    access.unwritable,
    stall.held_watermark,
    state.damaged, state.skipped, state.future_snapshots, state.skipped_rows,
    logs.source_count, conf.conf_changed_harmlessly,
    operator_metadata.ignored_metadata, operator_metadata.foreign_metadata,
    sink_files.sink_files_changed, sources.pending_input_lost, sources.last_input_moved,
    operator_metadata.schema_without_metadata, sources.offset_goes_back,
    operators.operator_watermark,
    state_layout.missing_operators, sources.offset_of_another_kind, logs.unparseable_unread, sink_files.sink_files_twice,
    conf.conf_refused, partitioning.foreign_partition_files, partitioning.misfit_schema,
    state_layout.commit_without_unique_ids, sink_files.sink_files_deleted, evicted.evicted_keys_loaded,
    log_entries.unreadable_log_entries, sources.source_log_misses_files, watermark.raised_last_watermark,
    sink_log.rerun_already_in_sink, seen_files.hidden_new_files, seen_files.too_old_to_read,
    join_state.join_counts_disagree, ended_state.ended_state_loaded, state.unnumbered_snapshots,
    full_copies.full_copy_disagrees, misplaced.misplaced_entries,
    state_confs.confs_not_the_states, logs.unread_offsets_gap, sink_files.sink_compaction_lost_files,
    watermark.copied_last_offsets,
    deltas.deletes_of_absent_keys, watermark.raised_last_commit_watermark, operator_metadata.misplaced_operator_state,
    kafka_live.offsets_aged_out, kafka_live.topic_gone, kafka_live.offsets_beyond_end, kafka_live.partitions_gone,
    async_progress.async_progress_gaps,
    delta_sink.table_recreated, delta_sink.table_restored_below,
    kafka_live.partitions_added,
    delta_source.source_table_replaced, delta_source.source_commits_gone, delta_source.source_files_gone,
)


def by_code(checks: tuple[Check, ...]) -> Mapping[str, Check]:
    """``checks`` by code in code order, read-only; a code listed twice is a ValueError."""
    codes = [c.code for c in checks]
    twice = sorted({code for code in codes if codes.count(code) > 1})
    if twice:
        raise ValueError(f"check code(s) listed twice: {', '.join(twice)}")
    return MappingProxyType({c.code: c for c in sorted(checks, key=lambda c: c.code)})


CHECKS = by_code(LISTED)
