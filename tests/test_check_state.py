"""``wmcheck check`` on the state the next batch loads: state files of other versions, partitions and queries, join and
group state, keys the eviction removed, schema files (areas: checkpoint/checks/state*.py, deltas, evicted, ended_state,
join_state, partitioning)."""
from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
from test_row_checksums import _lz4_raw

from wmcheck.checkpoint import repair
from wmcheck.checkpoint.checks.definition import Instruction
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.validate import check_checkpoint
from wmcheck.checkpoint.watermarks.plans import PASSES, BatchPlan, PlanNode, PlanOperator
from wmcheck.checkpoint.watermarks.progress import QueryProgress
from wmcheck.statestore.formats import content
from wmcheck.statestore.formats.codecs import decompress
from wmcheck.statestore.formats.records import DELETE, sized_records

from check_breaks import (
    TTL_SCHEMA,
    b_commit_without_unique_ids,
    b_evicted_keys_loaded,
    b_foreign_partition,
    b_join_store_of_the_version_before,
    b_schema_of_another_aggregation,
    b_unloadable,
    broken_copy,
    edit_json,
    fixes,
    hand_edit,
    messages,
    set_watermark,
)
from conftest import fixture_facts, run_cli
from oracle_cases import (
    newest_state_back,
    partition_files_of,
    state_file_of,
)
from restart_oracle import FIXTURES


def test_extra_partition_without_state_versions_is_named_not_a_crash(copy_fixture):
    """A repartition killed as Spark wrote a new partition: its SST file is there, the snapshot it belongs to not yet."""
    root = copy_fixture("dedup_rocksdb_p3")
    extra = root / "checkpoint" / "state" / "0" / "3" / "SSTs"
    extra.mkdir(parents=True)
    (extra / "000008-de427f84-a8be-44fd-8e37-996af9df11b2.sst").write_bytes(b"partial")
    [finding] = check_checkpoint(open_checkpoint(str(root / "checkpoint")))
    assert (finding.code, finding.path) == ("WM019", "state/0/3")
    assert finding.message.endswith("beyond it (state/0/3), holding no state version (an interrupted write, such as a "
                                    "killed repartition, may have left them): Spark does not read them at 3 partitions")


def test_unloadable_state_names_the_file_and_the_batch_to_rewind_to(copy_fixture):
    root = copy_fixture("agg_window_hdfs")
    facts = fixture_facts("agg_window_hdfs")
    last = facts["last_committed_batch"]
    b_unloadable(root, facts)
    text = messages(root)["WM016"]
    assert f"state version {last + 1}, which the next batch loads" in text
    assert f"state/0/1 has neither {last + 1}.delta nor {last + 1}.snapshot" in text
    assert f"batch {last - 1} is the newest batch whose state every partition can rebuild" in text
    assert fixes(root)["WM016"] == repair.RewindRequest(to_batch=last - 1)


def test_a_rocksdb_zip_that_does_not_match_its_sidecar_fails_the_load_it_cannot_skip(copy_fixture):
    """session_window_p3 keeps no changelogs: 3.zip copied over 4.zip, its sidecar left, fails Spark's unzip
    (ChecksumException; restart oracle) and no older zip rebuilds version 4. WM039, not WM030's 'restarts fine'."""
    root = copy_fixture("session_window_p3")
    shutil.copy2(root / "checkpoint/state/0/0/3.zip", root / "checkpoint/state/0/0/4.zip")
    found = messages(root)
    assert set(found) == {"WM039"}
    assert found["WM039"].startswith("does not match its checksum file .4.zip.crc (chunk 0 (bytes 0-511) has CRC32 "
                                     "5c8c0fc2, the sidecar says 2d75f08f) (Spark unzips the snapshot through Hadoop's checksummed file system: "
                                     "ChecksumException): Spark fails to load state version 4 of state/0/0")


def test_join_counts_of_another_version_than_the_rows_fail_with_a_rewind(copy_fixture):
    """WM068: left-keyToNumValues at version 7 (its 8.delta replaced by 7.delta), its rows at version 8: key 'a'
    counts 2 rows, the second is gone (Spark 4.3: 'Value at index 1 is null while numValues is 2'); version 7 of both
    agrees, so the rewind to batch 6."""
    root, _ = broken_copy(copy_fixture, "WM068")
    assert messages(root) == {"WM068": (
        "state/0/0/left-{keyToNumValues,keyWithIndexToValue}: as the next batch loads them (version 8), "
        "left-keyToNumValues counts rows that left-keyWithIndexToValue does not hold for 2 join keys, e.g. key ('a'): "
        "2 rows, none at index 1 (the two stores' files are of different versions: a restore or copy that mixed them). "
        "Spark fails when it reads that key, at the latest when it evicts the side's rows "
        "('[STREAM_STREAM_JOIN_INCONSISTENT_STATE.NULL_VALUE] Detected inconsistency in stream-stream join state', "
        "tested with Spark 4.3; Spark 3.5: 'NullPointerException: … \"valuePair\" is null', tested); with "
        "spark.sql.streaming.stateStore.skipNullsForStreamStreamJoins.enabled it skips "
        "the missing rows: they are lost to the join; the newest version whose two stores agree is 7: a rewind to the "
        "batch before it (where batch 6 is the newest batch whose state every partition can rebuild) makes Spark load "
        "it and write the later versions again")}
    assert fixes(root)["WM068"] == repair.RewindRequest(to_batch=6)


def test_rocksdb_join_counts_of_another_version_than_the_rows_are_found_in_the_snapshots(copy_fixture):
    """WM068 on RocksDB (join_v2_p3, snapshots only): every partition's left-keyToNumValues/4.zip replaced by its 3.zip;
    partition 2's counts name rows of keys 'a' and 'b' that its rows of version 4 lack (batch 3 evicted them)."""
    root = copy_fixture("join_v2_p3")
    for p in range(3):
        folder = root / f"checkpoint/state/0/{p}/left-keyToNumValues"
        for name in ("3.zip", ".3.zip.crc"):
            shutil.copy2(folder / name, folder / name.replace("3", "4"))
    found = check_checkpoint(open_checkpoint(str(root / "checkpoint")), None)
    assert [(f.code, f.path) for f in found] == [("WM068", "state/0/2/left-keyToNumValues")]
    assert "for 2 join keys, e.g. key ('a'): 2 rows, none at index 1" in found[0].message
    assert found[0].fix == repair.RewindRequest(to_batch=2)


def test_join_state_is_judged_within_a_budget_of_bytes_read(copy_fixture, monkeypatch):
    """WM068 reads join state files up to READ_LIMIT bytes: past it a load is not judged and a note says so."""
    from wmcheck.checkpoint.checks import join_state

    root, _ = broken_copy(copy_fixture, "WM068")
    monkeypatch.setattr(join_state, "READ_LIMIT", 100)
    done = run_cli("check", str(root / "checkpoint"), "--format", "json")
    assert json.loads(done.stdout) == [] and ("note: WM068 reads 100 bytes of join state files per check and left the "
                                              "rest unjudged (their value counts are not compared with their rows)\n"
                                              ) in done.stderr
    monkeypatch.setattr(join_state, "READ_LIMIT", 32 << 20)
    done = run_cli("check", str(root / "checkpoint"), "--format", "json", exit_code=1)
    assert [f["code"] for f in json.loads(done.stdout)] == ["WM068"] and "note: WM068" not in done.stderr


def test_a_group_the_last_batch_timed_out_back_in_the_next_load_is_an_error_with_a_rewind(copy_fixture):
    """WM069: pandas_state_p3 (applyInPandasWithState, event-time timeout, append) with every partition's 4.zip
    replaced by its 3.zip: partition 2 holds a group whose timeout (00:00:19) is below batch 3's watermark
    (00:00:20), which Spark had timed out (the function emitted and removed it)."""
    root, _ = broken_copy(copy_fixture, "WM069")
    assert messages(root) == {"WM069": (
        "state version 4 of state/0/2, which the next batch loads, holds 1 group of operator 0 (applyInPandasWithState) "
        "that batch 3 had already ended before it wrote that version (timeouts before 2024-01-01T00:00:20.000Z, below "
        "both the eviction watermark and the processing time of batch 3; e.g. 2024-01-01T00:00:19.000Z): a file of it "
        "is not the one Spark wrote (an older version's, another partition's). Spark loads it without an error and ends "
        "those groups again in the next batch: their rows are emitted a second time, or their state continues from an "
        "old value (tested with Spark 4.3: the restart's output differs from a control run); rewinding to batch 2, "
        "keeping offsets/3, makes Spark load state version 3 and run batch 3 again as it was planned (its offsets and "
        "watermark: a batch planned anew with new input would end other groups), writing version 4 anew")}
    assert fixes(root)["WM069"] == repair.RewindRequest(to_batch=2, keep_next_offsets=True)


def test_groups_timed_out_in_the_state_of_an_operator_feeding_another_are_not_judged(copy_fixture):
    """fmgws_then_agg (applyInPandasWithState is operator 1, an aggregation operator 0): each partition's 9.delta
    replaced by its 8.delta brings back a group batch 8 had timed out; what it emits again reaches the output only as
    the aggregation's watermark lets it (the oracle's upstream-group-state case: the control run's output). The same
    copy in the operator writing to the sink is judged (pandas_state_timeout: HDFS deltas)."""
    root = copy_fixture("fmgws_then_agg")
    for p in (0, 1):
        folder = root / f"checkpoint/state/1/{p}"
        for name in ("8.delta", ".8.delta.crc"):
            shutil.copy2(folder / name, folder / name.replace("8", "9"))
    assert "WM069" not in messages(root)
    root = copy_fixture("pandas_state_timeout")
    folder = root / "checkpoint/state/0/0"
    for name in ("8.delta", ".8.delta.crc"):
        shutil.copy2(folder / name, folder / name.replace("8", "9"))
    found = [f for f in check_checkpoint(open_checkpoint(str(root / "checkpoint")), None) if f.code == "WM069"]
    assert [f.path for f in found] == ["state/0/0"]
    assert "of operator 0 (applyInPandasWithState) that batch 8 had already ended" in found[0].message


def test_timers_the_last_batch_fired_back_in_the_next_load_are_found(copy_fixture):
    """WM069 for transformWithState (tws_pandas, event-time timers in the column family $eventTimers_timestampToKey
    of its RocksDB snapshots): each partition's 9.zip replaced by its 8.zip holds a timer at or before batch 8's
    eviction watermark (00:01:10), which Spark had fired and deleted."""
    root = copy_fixture("tws_pandas")
    newest_state_back(root)
    found = [f for f in check_checkpoint(open_checkpoint(str(root / "checkpoint")), None) if f.code == "WM069"]
    assert [f.path for f in found] == ["state/0/0", "state/0/1"]
    assert ("holds 1 timer of operator 0 (transformWithStateInPandasExec) that batch 8 had already ended before it "
            "wrote that version (timers at or before 2024-01-01T00:01:10.000Z, the eviction watermark of batch 8; e.g. "
            "2024-01-01T00:01:00.000Z)") in found[0].message
    assert found[0].fix == repair.RewindRequest(to_batch=7, keep_next_offsets=True)


def test_sessions_the_last_batch_closed_are_judged_in_append_mode_only(copy_fixture):
    """WM069 for session windows (session_window_p3, every partition's newest zip replaced by the one before): sessions
    ending at or before batch 3's eviction watermark. Complete mode keeps such sessions, so without a file sink (append
    only), an event log printing append mode, or a removal in the operator's files, they are not judged."""
    root, _ = broken_copy(copy_fixture, "WM069-sessions")
    found = messages(root, sink=True)
    assert "holds 2 sessions of operator 0 (sessionWindowStateStoreSaveExec) that batch 3 had already ended" in found["WM069"]
    assert "WM069" not in messages(root)


def test_join_rows_of_the_version_before_beyond_the_counts_are_no_finding(copy_fixture):
    """left-keyWithIndexToValue at version 7, its counts at version 8: batch 7 removed rows there, so the rows left
    lie beyond the counts, where Spark never reads (a restart probe with Spark 4.3 gave the control run's output)."""
    root = copy_fixture("join_stream_stream")
    b_join_store_of_the_version_before(root, "left-keyWithIndexToValue")
    assert messages(root) == {}


def test_join_state_is_not_judged_without_content(copy_fixture):
    root, _ = broken_copy(copy_fixture, "WM068")
    found = check_checkpoint(open_checkpoint(str(root / "checkpoint")), None, content=False)
    assert "WM068" not in {f.code for f in found}


def test_an_hdfs_delta_deleting_a_key_the_version_before_lacks_is_not_the_one_spark_wrote(copy_fixture):
    """compaction's state/0/1/12.delta replaced by its 11.delta: the delete of the window batch 10 evicted comes again
    (whether the output needed the lost delta nothing tells: a warning, and the rewind runs batch 11 again)."""
    root = copy_fixture("compaction")
    state = root / "checkpoint/state/0/1"
    shutil.copy2(state / "11.delta", state / "12.delta")
    assert messages(root)["WM078"] == (
        "state/0/1/12.delta, a delta of state version 12 that the next batch loads (version 13), deletes a key that "
        "version 11 does not hold: Spark's HDFS-backed store writes a delete only for a key it removed, so this is not "
        "the file Spark wrote for version 12 (an older delta of the partition copied over it, or another partition's). "
        "Spark loads it without an error, and whatever the lost delta held is gone: nothing here tells whether the "
        "output needed it (state_types's state/0/1/10.delta replaced by its 9.delta restarts with the control run's "
        "output, tested); batch 10 is the newest "
        "batch whose state every partition can rebuild; offsets/9 is gone, so the rewind keeps offsets/11 (Spark "
        "restarts from it and reads offsets/10) and batch 11 runs again as it was planned")
    assert fixes(root)["WM078"] == repair.RewindRequest(to_batch=10, keep_next_offsets=True)
    shutil.copy2(state / "10.delta", state / "12.delta")  # an empty delta: deletes nothing, nothing to see
    assert "WM078" not in messages(root)


@pytest.mark.parametrize("name", ["compaction", "state_types", "union_stall_max"])
def test_deletes_of_absent_keys_are_found_column_wise_as_record_by_record(copy_fixture, monkeypatch, name):
    """WM078 reading an HDFS load's records at once (sized_columns: fingerprints grouped in chain order) finds what
    reading them record by record finds, on the fixture and with each partition's newest delta replaced by the ones
    one and two versions before (deletes of keys already gone among them)."""
    from wmcheck.checkpoint.checks import deltas
    from wmcheck.checkpoint.checks import state_reads as state_checks

    decided: list = []
    real = deltas._absent_delete_columns
    monkeypatch.setattr(deltas, "_absent_delete_columns", lambda *a: decided.append(real(*a)) or decided[-1])
    root = copy_fixture(name)
    newest = {}
    for delta in (root / "checkpoint/state/0").glob("*/*.delta"):
        newest[delta.parent] = max(newest.get(delta.parent, 0), int(delta.name.split(".")[0]))
    reports = []
    for back in (0, 1, 2):
        for folder, version in newest.items():
            if back and (folder / f"{version - back}.delta").exists():
                shutil.copy2(folder / f"{version - back}.delta", folder / f"{version}.delta")
        found = {}
        for columnar in (True, False):
            monkeypatch.setattr(state_checks, "COLUMNAR", columnar)
            monkeypatch.setattr(content, "COLUMNAR_BYTES", 0)  # the copies' small files too
            found[columnar] = [f.message for f in check_checkpoint(open_checkpoint(str(root / "checkpoint"))) if f.code == "WM078"]
        assert found[True] == found[False], back
        reports.append(len(found[True]))
    assert any(d is not None for d in decided)  # the columns decided, not the reference alone
    if name in ("compaction", "state_types"):
        assert any(reports)  # a copy deleting a key already gone was among them


def test_a_transformwithstate_schema_of_another_query_is_named_with_the_families_it_lacks(copy_fixture):
    root, _ = broken_copy(copy_fixture, "WM046-tws")
    assert messages(root, sink=True)["WM046"] == (
        "the operator metadata of operator 0 transformWithStateInPandasExec names state variables (with their TTL) that "
        f"{TTL_SCHEMA} has no column family for ($ttl_count, $procTimers_keyToTimestamp, $ttl_events, $ttl_last_by_v): "
        "the schema file or the metadata comes from another query. Spark checks the query's state against the schema "
        "file when it starts and fails (tested with Spark 4.3: '[STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE]' for "
        "tws_pandas's schema file in tws_ttl)")
    assert fixes(root, sink=True)["WM046"] == Instruction(f"restore {TTL_SCHEMA} from a backup")


def test_state_files_of_another_partition_are_named_with_the_partition_their_keys_go_to(copy_fixture):
    root = copy_fixture("agg_window_hdfs")
    b_foreign_partition(root, fixture_facts("agg_window_hdfs"))
    assert messages(root) == {"WM058": (
        "state/0/0 holds keys of another partition in 2.delta, 3.delta, 4.delta, 5.delta, 6.delta, 7.delta, 9.delta (a "
        "key of 2.delta hashes to partition 1 of 3, as Spark partitions operator 0's input): the file comes from "
        "another partition's directory (a restore or copy mixed partitions up); Spark loads it without an error, and "
        "those keys sit where no batch sends their rows, while this partition's own are gone: rows are emitted twice "
        "or lost (tested: the restart's output differs from a control run); a file without a key of another partition "
        "may come from there too (one with no rows), so no rewind can tell which versions to keep")}
    assert fixes(root)["WM058"] == Instruction("restore state/0/0 from a backup of this checkpoint (every file of it)")


def evicted_message(directory: str, files: str) -> str:
    return (
        f"state version 13 of {directory}, which the next batch loads ({files}), holds 1 key of operator 0 whose "
        "window.end is at or before 2024-01-01T00:01:25.000Z, the eviction watermark of batch 12 (e.g. window.end "
        "2024-01-01T00:01:20.000Z); batch 12 removed every such key before it wrote that version, so a file of it is "
        "not the one Spark wrote (another partition's, an older version's, or a lost increment over an older snapshot: "
        "a file with no row of its own shows nothing else). Spark loads it without an error and removes those keys "
        "again in the next batch: in append mode it emits their rows a second time (duplicate output; tested: the "
        "restart's output differs from a control run), in update mode it drops them, and the changes the lost file "
        "held are gone in either; rewinding to batch 11 makes Spark load state version 12 and run the batches after "
        "it again, writing version 13 anew")


def test_a_changelog_without_rows_of_another_partition_is_seen_by_the_keys_the_last_eviction_removed(copy_fixture):
    """WM058 cannot see a changelog that holds no row; the window its own changelog removed is back in the load."""
    root = copy_fixture("agg_window_rocksdb")
    b_evicted_keys_loaded(root, fixture_facts("agg_window_rocksdb"))
    assert messages(root) == {"WM062": evicted_message("state/0/0", "12.zip, 13.changelog")}
    assert fixes(root, sink=True)["WM062"] == repair.RewindRequest(to_batch=11, file_sink=str(root / "output"))


def test_a_delta_replaced_by_the_version_before_is_seen_by_the_keys_the_last_eviction_removed(copy_fixture):
    root = copy_fixture("agg_window_hdfs")
    state_file_of("2/12.delta", "2/13.delta")(root)
    found = messages(root)
    assert found["WM062"] == evicted_message("state/0/2", "1.delta, …, 13.delta")
    assert sorted(found) == ["WM062", "WM078"]  # 12.delta's delete of a window 13.delta deleted already: WM078's too
    assert fixes(root)["WM062"] == fixes(root)["WM078"] == repair.RewindRequest(to_batch=11)


def test_keys_the_eviction_removed_are_judged_within_a_budget_of_bytes_read_whole(copy_fixture, monkeypatch):
    """WM062 reads the files of a partition whole only while AGED_BUDGET has room: past it a partition is not
    judged and a note says how many were left (a large state keeps check fast)."""
    from wmcheck.checkpoint.checks import state_reads as state

    root = copy_fixture("agg_window_hdfs")
    state_file_of("2/12.delta", "2/13.delta")(root)
    sizes = {p.parent.name: sum(f.stat().st_size for f in p.parent.glob("*.delta"))
             for p in (root / "checkpoint/state/0").glob("*/13.delta")}
    monkeypatch.setattr(state, "AGED_BUDGET", sizes["0"] + sizes["1"])  # partitions 0 and 1 fit, not 2
    done = run_cli("check", str(root / "checkpoint"), "--format", "json", "--ignore", "WM078")  # sees the delta too
    assert "WM062" not in {f["code"] for f in json.loads(done.stdout)}
    assert (f"note: WM062 reads {sizes['0'] + sizes['1']:,} bytes of state files whole per check and left 1 store "
            "partition past them unjudged (their keys are not compared with the last batch's eviction watermark)\n"
            ) in done.stderr
    monkeypatch.setattr(state, "AGED_BUDGET", sum(sizes.values()))
    done = run_cli("check", str(root / "checkpoint"), "--format", "json", "--ignore", "WM078", exit_code=1)
    assert "WM062" in {f["code"] for f in json.loads(done.stdout)} and "note: WM062" not in done.stderr


@pytest.mark.parametrize("fixture, name", [("agg_window_hdfs", "14.snapshot"), ("agg_window_rocksdb", "14.zip")])
def test_a_later_full_copy_spark_cannot_read_is_skipped_not_read(copy_fixture, fixture, name):
    """A snapshot of a version the query has not reached that does not decode is skipped by the load that lists it
    (automatic snapshot repair; restart oracle: SILENT *-ahead-unreadable): a leftover (WM017), not stale state
    Spark reads (WM041), which the same file decoding is."""
    root = copy_fixture(fixture)
    target = root / "checkpoint/state/0/0" / name
    target.write_bytes(b"")
    assert "WM041" not in messages(root) and "WM017" in messages(root)
    shutil.copy2(root / "checkpoint/state/0/0" / ("1.delta" if name.endswith(".snapshot") else "12.zip"), target)
    assert "WM041" in messages(root)


@pytest.mark.parametrize("fixture, path, tail, drop, code", [
    ("agg_window_hdfs", "state/0/0/13.delta", bytes(21), 21, "WM039"),  # lz4: the end block zeroed
    ("state_types", "state/0/0/13.snapshot", b"\x00garbage", 0, "WM040"),  # zstd: bytes after the frame
    ("state_types_rocksdb", "state/0/0/13.changelog", b"\x00garbage", 0, "WM039"),  # snappy: after the last chunk
])
def test_bytes_past_a_state_files_end_marker_are_never_read(copy_fixture, fixture, path, tail, drop, code):
    """Spark's readers decompress as the record loop asks for bytes: the block, frame or chunk after the one holding
    the end marker is never read, damaged or not (restart oracle: SILENT state-*-after-its-end); the same bytes
    before the file's first one fail its load (a snapshot: skipped, WM040)."""
    root = copy_fixture(fixture)
    target = root / "checkpoint" / path
    data = target.read_bytes()
    hand_edit(target, data[:len(data) - drop] + tail)
    assert not {"WM039", "WM040"} & set(messages(root))
    hand_edit(target, tail + data)
    assert code in messages(root)


def test_keys_the_eviction_removed_are_not_judged_without_a_removal_in_the_operators_files(copy_fixture):
    """Complete output mode never removes a key: state older than the watermark is its normal state. Without a
    delete anywhere in the files the operator's next load reads, WM062 says nothing."""
    root = copy_fixture("agg_window_hdfs")
    state_file_of("2/12.delta", "2/13.delta")(root)
    for delta in (root / "checkpoint/state/0").glob("*/*.delta"):
        original = delta.read_bytes()
        rows = b"".join(struct.pack(">i", len(key)) + key + struct.pack(">i", len(value)) + value
                        for kind, key, value in sized_records(decompress(original, "lz4", delta.name), delta.name)
                        if kind != DELETE and value is not None)
        hand_edit(delta, _lz4_raw(rows + struct.pack(">i", -1), original))
    assert "WM062" not in messages(root)
    delta = "checkpoint/state/0/2/12.delta"
    shutil.copy2(FIXTURES / "agg_window_hdfs" / delta, root / delta)  # its removals again
    assert "WM062" in messages(root)


def test_keys_the_eviction_removed_are_not_judged_against_a_watermark_the_last_batch_did_not_run_with(copy_fixture):
    """The last batch's watermark raised as set-watermark raises it (offsets/12 and commits/12): every window is at
    or before it, but batch 12 evicted with the one commits/11 passed on; WM062 then says nothing."""
    root = copy_fixture("agg_window_rocksdb")
    set_watermark(root / "checkpoint", 12, offsets_ms=1_704_067_400_000, commit_ms=1_704_067_400_000)
    assert "WM062" not in messages(root)
    set_watermark(root / "checkpoint", 11, commit_ms=1_704_067_400_000)  # as if batch 12 had run with it
    assert "WM062" in messages(root)


def printed_plan(mode: str) -> QueryProgress:
    """An event log's plan of agg_window_rocksdb's batch 12 printing its aggregation in output mode ``mode``."""
    aggregation = PlanOperator(0, "StateStoreSave", 1_704_067_274_000, 1_704_067_285_000, PASSES, (), mode)
    root = PlanNode("operator", (PlanNode("watermark"),), aggregation)
    return QueryProgress("q", (), {}, {12: BatchPlan("q", "r", 12, None, None, root)})


def test_keys_the_eviction_removed_are_judged_in_append_mode_only_when_the_plan_prints_the_mode(copy_fixture):
    """Update mode removes such a key without output (harmless alone: not reported); complete mode keeps them all."""
    root = copy_fixture("agg_window_rocksdb")
    b_evicted_keys_loaded(root, fixture_facts("agg_window_rocksdb"))
    ckpt = open_checkpoint(str(root / "checkpoint"))
    found = {mode: {f.code for f in check_checkpoint(ckpt, progress=printed_plan(mode))}
             for mode in ("Append", "Update", "Complete")}
    assert found == {"Append": {"WM062"}, "Update": set(), "Complete": set()}


def test_a_schema_file_of_another_aggregation_is_named_with_the_rows_it_does_not_describe(copy_fixture):
    """WM059, and no WM058: keys hashed by another schema's columns would seem to be another partition's."""
    root = copy_fixture("agg_window_hdfs")
    b_schema_of_another_aggregation(root, fixture_facts("agg_window_hdfs"))
    assert messages(root) == {"WM059": (
        "the key rows of state/0/0/2.delta are not rows of the key schema in state/0/0/_metadata/schema (another "
        "number or kind of columns): the schema file comes from another query, or the state does; on restart Spark "
        "compares the file with the query's own state schema and fails where they differ "
        "(STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE; tested with a schema file of another aggregation). If the query "
        "that restarts wrote this state, its schema file is the one to replace")}
    assert fixes(root)["WM059"] == Instruction("while the query is stopped, delete state/0/0/_metadata/schema with its "
                                                "checksum file: Spark writes it again from the query when it starts")


def test_a_format_2_commit_without_unique_ids_names_the_partitions_and_the_rewind(copy_fixture):
    facts = fixture_facts("checkpoint_v2")
    last = facts["last_committed_batch"]
    root = copy_fixture("checkpoint_v2")
    b_commit_without_unique_ids(root, facts)
    assert messages(root) == {"WM060": (
        f"commits/{last}, the newest commit, names no state unique id for state/0/0, state/0/1 (operator 0): with "
        f"checkpoint format 2 Spark loads state version {last + 1} by the ids the newest commit names, and fails "
        "(CANNOT_LOAD_STATE_STORE; with some partitions named: an ArrayIndexOutOfBoundsException; tested); the "
        "commit was edited or written by a run without checkpoint format 2, and a rewind to before batch "
        f"{last} drops it, Spark re-running the batch from the ids the commit before names")}
    assert fixes(root)["WM060"] == repair.RewindRequest(to_batch=last - 1)


def test_a_schema_file_with_another_value_schema_is_named_by_its_value_rows(copy_fixture):
    """The sliding_window fixture's aggregation counts only: agg_window_hdfs's value rows (count, sum) do not fit it,
    though its deletes (no value) and keys do."""
    root = copy_fixture("agg_window_hdfs")
    path = "state/0/0/_metadata/schema"
    hand_edit(root / "checkpoint" / path, (FIXTURES / "sliding_window" / "checkpoint" / path).read_bytes())
    [(code, text)] = messages(root).items()
    assert code == "WM059" and text.startswith("the value rows of state/0/0/2.delta are not rows of the value schema in "
                                               "state/0/0/_metadata/schema"), text


def test_avro_encoded_state_rows_are_not_read_as_unsafe_rows(copy_fixture):
    """With spark.sql.streaming.stateStore.encodingFormat=avro the rows are Avro records: WM058 and WM059 do not
    judge them (every row would seem not to fit)."""
    facts = fixture_facts("agg_window_rocksdb")
    root = copy_fixture("agg_window_rocksdb")
    for batch in range(facts["last_batch"] + 1):
        edit_json(root / "checkpoint" / "offsets" / str(batch), 1,
                  lambda o: o["conf"].update({"spark.sql.streaming.stateStore.encodingFormat": "avro"}))
    assert not set(messages(root)) & {"WM058", "WM059"}
    edit_json(root / "checkpoint" / "offsets" / str(facts["last_batch"]), 1,
              lambda o: o["conf"].update({"spark.sql.streaming.stateStore.encodingFormat": "unsaferow"}))
    partition_files_of(1, 0)(root)
    assert "WM058" in messages(root)  # read again once the restart's encoding is unsaferow


def test_rows_of_one_file_that_do_not_fit_while_others_do_are_not_the_schema_files_fault():
    """WM059 needs every file with rows to misfit (a schema file of another query); one file alone is damage."""
    from wmcheck.checkpoint.checks.context import Context
    from wmcheck.checkpoint.checks.partitioning import misfit_schema
    from wmcheck.checkpoint.checks.state_reads import content_loads, state_reads
    from wmcheck.statestore.keys.partitions import Sample

    ctx = Context(open_checkpoint(str(Path(__file__).resolve().parents[1] / "fixtures/agg_window_hdfs/checkpoint")))
    content_loads(ctx)
    found = state_reads(ctx).row_samples
    with_rows = sorted(p for p, sample in found.items() if sample.rows)
    found[with_rows[0]] = Sample(misfit="key", rows=1)
    assert list(misfit_schema.run(ctx)) == []
    found.update({p: Sample(misfit="key", rows=1) for p in with_rows})
    assert [issue.path for issue in misfit_schema.run(ctx)] == ["state/0/0/_metadata/schema"]


def test_every_key_of_every_fixture_is_in_the_partition_spark_sends_it_to():
    """Spark's hash partitioning, as key_partitions computes it, on every state key of the fixtures' load chains:
    aggregations, deduplications, (flat)MapGroupsWithState and applyInPandasWithState, HDFS and RocksDB (changelogs
    and snapshots' table files), and every row fits its schema."""
    from wmcheck.checkpoint.checks.context import Context
    from wmcheck.checkpoint.checks.partitioning import foreign_partition_files, misfit_schema, samples

    checked = set()
    for path in sorted((Path(__file__).resolve().parents[1] / "fixtures").glob("*/checkpoint")):
        ctx = Context(open_checkpoint(str(path)))
        assert list(foreign_partition_files.run(ctx)) == list(misfit_schema.run(ctx)) == [], path
        names = {op.operator_id: op.name for op in ctx.operators}
        checked |= {(names[int(p.split("/")[1])], p.rsplit(".", 1)[-1]) for p in samples(ctx)}
    assert checked >= {("stateStoreSave", "delta"), ("stateStoreSave", "changelog"), ("stateStoreSave", "sst"),
                       ("dedupe", "delta"), ("dedupe", "sst"), ("flatMapGroupsWithState", "delta"),
                       ("applyInPandasWithState", "delta")}, checked


def test_an_extra_partition_directory_without_operator_metadata_keeps_the_pinned_count(copy_fixture):
    """Spark 3.5 writes no operator metadata: the operator has the pinned partition count (3), so a copy of
    state/0/2 as state/0/3 is WM019's extra directory, and no key is judged against 4 partitions (WM058)."""
    root = copy_fixture("agg_spark35")
    shutil.copytree(root / "checkpoint" / "state" / "0" / "2", root / "checkpoint" / "state" / "0" / "3")
    assert [op.num_partitions for op in open_checkpoint(str(root / "checkpoint")).operators] == [3]
    assert messages(root) == {"WM019": (
        "operator 0 has 3 partitions (spark.sql.shuffle.partitions=3) but state also holds partition 1 directory "
        "beyond it (state/0/3): written by a run with more shuffle partitions, copied in, or the metadata was edited; "
        "Spark does not read them at 3 partitions, but nothing here proves they are unneeded (an older layout or a "
        "rewind may need them)")}


@pytest.mark.parametrize("fixture,partition,names", [
    ("agg_window_rocksdb", "state/0/0", ["backup.changelog", "013.changelog", ".12.zip.crc", "12.zip.bak", "013.zip", "011.zip"]),
    ("agg_window_hdfs", "state/0/1", ["old.delta", "1.2.delta", "old.zip", "13.snapshot.bak", "015.snapshot", "00.snapshot"])])
def test_state_files_named_by_hand_that_spark_does_not_list_as_snapshots_are_no_wm070(copy_fixture, fixture, partition, names):
    """Spark lists as snapshots only names ending in its provider's snapshot suffix (WM070), and reads a version's file
    by the name it gives it: RocksDB's loader falls back from a snapshot listed under another name (013.zip), and one
    after the version loaded is not listed for it (015.snapshot)."""
    root = copy_fixture(fixture)
    source = next(p for p in (root / "checkpoint" / partition).iterdir() if p.is_file())
    for name in names:
        shutil.copyfile(source, root / "checkpoint" / partition / name)
    assert run_cli("check", root / "checkpoint", "--select", "WM070").output.endswith(": ok: 0 error(s), 0 warning(s) from 1 checks\n")
    # nor a state file of the version its name reads as: Spark reads a version's file by the name it gives it
    # (tests/oracle_cases.py: RocksDB's 013.zip restarts as the control run does; a WM040 warning, Spark 3.5 fails)
    assert all(f["severity"] != "error" for f in json.loads(run_cli("check", root / "checkpoint", "--format", "json").stdout))


def test_a_repartition_spark_wrote_is_still_one(copy_fixture):
    """Spark's own repartition (3 to 5 partitions at batch 9: fresh snapshots of version 10 in the five) stays a
    repartition: no conf change, no partition finding."""
    assert messages(copy_fixture("repartition_rocksdb")) == {}
