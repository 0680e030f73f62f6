"""``wmcheck check`` on watermarks and pinned confs: watermarks edited, raised or lowered, confs Spark refuses or does not
restore, partition counts, offsets gaps (areas: checkpoint/checks/watermark.py, conf, state_confs, logs, repartition)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from wmcheck.checkpoint import repair
from wmcheck.checkpoint.checks.definition import Instruction
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.validate import check_checkpoint

from check_breaks import (
    b_conf_refused,
    b_conf_refused_everywhere,
    b_conf_value,
    b_future,
    b_partitions_last,
    broken_copy,
    edit_json,
    fixes,
    messages,
    set_watermark,
)
from conftest import fixture_facts, run_cli


def test_future_watermark_message_carries_the_numbers(copy_fixture):
    facts = fixture_facts("agg_window_hdfs")
    root = copy_fixture("agg_window_hdfs")
    b_future(root, facts)
    assert " is 2d 1.642s after the batch's processing time " in messages(root)["WM013"]
    assert fixes(root)["WM013"] == repair.RewindRequest(to_batch=facts["last_batch"] - 2)  # before commits/11


def test_a_refused_conf_value_names_the_value_and_the_fix(copy_fixture, tmp_path):
    """WM057 (not WM044's 'Spark restarts correctly'): the last offsets file's value is refused, an older file's is
    taken, so the rewind to before it; in every file, an instruction."""
    facts = fixture_facts("agg_window_hdfs")
    last = facts["last_batch"]
    root = copy_fixture("agg_window_hdfs")
    everywhere = tmp_path / "everywhere"
    shutil.copytree(root, everywhere)
    b_conf_refused(root, facts)
    assert messages(root) == {"WM057": (
        f"offsets/{last}, the offsets file Spark restarts from, pins spark.sql.streaming.join.stateFormatVersion = '5', "
        "which Spark 4.3 refuses (Spark accepts versions 1, 2, 3 and 4): it sets every pinned conf from that file on "
        "restart and fails at once ([INVALID_CONF_VALUE], whether or not an operator uses the conf); batch "
        f"{last - 1} pinned '2': the offsets files from batch {last} on come from another run or were edited, and a "
        f"rewind to before batch {last} drops them")}
    assert fixes(root)["WM057"] == repair.RewindRequest(to_batch=last - 1)
    b_conf_refused_everywhere(everywhere, facts)
    assert messages(everywhere) == {"WM057": (
        f"offsets/{last}, the offsets file Spark restarts from, pins spark.sql.streaming.stateStore.providerClass = "
        "'com.databricks.sql.streaming.state.RocksDBStateStoreProvider', which Spark 4.3 refuses (the class comes "
        "with another distribution's runtime, not with Apache Spark): it sets every pinned conf from that file on "
        "restart and fails when the first stateful operator opens its state store; every offsets file pins it, so "
        "the checkpoint was written by another Spark or distribution, or edited")}
    assert fixes(everywhere)["WM057"] == Instruction(
        "restart it with the Spark that wrote it, or set spark.sql.streaming.stateStore.providerClass in every offsets "
        "file to the value the query's state was written with, one Spark 4.3 accepts (offsets/12 decides the restart, "
        "an older file a rewind to its batch)")


def test_a_null_conf_value_is_refused_and_a_null_of_a_conf_spark_does_not_restore_is_not(copy_fixture):
    """A JSON null reaches setConfString as a null string: refused for every conf Spark restores (even the codec,
    before any store opens), ignored for any other key."""
    last = fixture_facts("agg_window_hdfs")["last_batch"]
    root = copy_fixture("agg_window_hdfs")
    edit_json(root / "checkpoint" / "offsets" / str(last), 1, lambda o: o["conf"].update(
        {"spark.sql.streaming.stateStore.compression.codec": None, "spark.sql.streaming.unknown": None}))
    assert messages(root) == {"WM057": (
        f"offsets/{last}, the offsets file Spark restarts from, pins spark.sql.streaming.stateStore.compression.codec = "
        "null, which Spark 4.3 refuses (a restored conf needs a value): it sets every pinned conf from that file on "
        "restart and fails at once ('requirement failed: value cannot be null for key', whether or not an operator "
        f"uses the conf); batch {last - 1} pinned 'lz4': the offsets files from batch {last} on come from another run "
        f"or were edited, and a rewind to before batch {last} drops them")}
    assert fixes(root)["WM057"] == repair.RewindRequest(to_batch=last - 1)


def test_a_conf_value_of_another_json_type_than_a_string_fails_the_offsets_file(copy_fixture):
    """json4s reads the conf as Map[String, String]: a number is taken as its text, a boolean fails the file
    (restart probe: 'No usable value for conf ... JBool(true)'), in the fast reading of Spark's key order too."""
    root, _ = broken_copy(copy_fixture, "WM001-conf-boolean")
    assert messages(root)["WM001"].startswith(
        "line 2: expected conf spark.sql.streaming.statefulOperator.useStrictDistribution to be a string, found true: "
        "Spark's reader takes a string or a number only and fails on the whole file ('No usable value for conf')")
    assert fixes(root)["WM001"] == repair.RewindRequest(to_batch=11)
    b_conf_value(root, fixture_facts("agg_window_hdfs"), 1)
    assert "WM001" not in messages(root)


def test_the_last_offsets_watermark_above_its_commit_is_an_error_with_a_rewind(copy_fixture):
    root, facts = broken_copy(copy_fixture, "WM065")
    last = facts["last_batch"]
    assert messages(root) == {"WM065": (
        f"batchWatermarkMs 1704070885000 (2024-01-01T01:01:25.000Z) is 1h above the nextBatchWatermarkMs 1704067285000 "
        f"(2024-01-01T00:01:25.000Z) of commits/{last}, and above every event time the query has seen "
        "(2024-01-01T00:01:35.000Z, that watermark plus the query's delay): Spark computes the next watermark from this "
        f"batch's and never lowers it, and wmcheck set-watermark writes both, so offsets/{last} was edited. The next "
        "batch drops rows older than 2024-01-01T01:01:25.000Z as late, new ones too, and evicts state by it (tested with "
        f"Spark 4.3: raised by an hour, the new rows are dropped); a rewind to before batch {last} makes Spark plan it "
        f"again with the watermark batch {last - 1} passed on")}
    assert fixes(root)["WM065"] == repair.RewindRequest(to_batch=last - 1)


def _last_watermarks(root: Path, last: int, offsets: int = 0, commit: int = 0) -> None:
    """Move the last batch's watermark in its offsets file and its commit by hand."""
    edit_json(root / "checkpoint" / "offsets" / str(last), 1, lambda o: o.update(batchWatermarkMs=o["batchWatermarkMs"] + offsets))
    edit_json(root / "checkpoint" / "commits" / str(last), 1,
              lambda o: o.update(nextBatchWatermarkMs=o["nextBatchWatermarkMs"] + commit))


@pytest.mark.parametrize("name,offsets,commit", [
    ("agg_window_hdfs", 1000, 0),  # raised a second: below every event time seen (the delay is 10 s)
    ("agg_window_hdfs", 0, -3_600_000),  # the commit lowered where the batch read no input: Spark takes the larger
    ("agg_window_hdfs", 0, 1000),  # the commit raised a second in a batch without input
    ("dedup_watermark", 0, 3_600_000),  # raised an hour where no operator emits what it evicts
    ("tws_ttl", 3_600_000, -3_600_000),  # no operator drops rows or evicts by the watermark (processing time)
])
def test_last_watermarks_edited_without_effect_are_not_reported(copy_fixture, name, offsets, commit):
    root = copy_fixture(name)
    _last_watermarks(root, fixture_facts(name)["last_batch"], offsets, commit)
    assert not {"WM065", "WM079"} & set(messages(root))


def test_a_commit_lowered_below_a_batch_that_read_input_is_an_error_to_restore_it(copy_fixture):
    root = copy_fixture("python_source")
    _last_watermarks(root, 2, commit=-3_600_000)
    assert messages(root) == {"WM065": (
        "nextBatchWatermarkMs 1704063685000 (2023-12-31T23:01:25.000Z) is 59m 28s below the watermark batch 2 ran with "
        "(2024-01-01T00:00:53.000Z): Spark computes the next watermark from that one and the event times the batch "
        "read, never lower, so commits/2 was edited. Batch 2 read new input and may have moved the watermark: the next "
        "batch evicts state and emits by 2024-01-01T00:00:53.000Z only, later than Spark would have (tested with Spark "
        "4.3: other output than the control run's)")}
    assert fixes(root)["WM065"] == Instruction(
        "restore commits/2 from a backup before restarting (a rewind makes Spark run batch 2 again, with the input that "
        "has arrived since in other batches than the ones it ran)")


def test_a_commit_raised_in_a_batch_without_input_is_an_error_with_a_rewind(copy_fixture):
    root, facts = broken_copy(copy_fixture, "WM079")
    last = facts["last_batch"]
    assert messages(root) == {"WM079": (
        f"nextBatchWatermarkMs 1704070885000 (2024-01-01T01:01:25.000Z) is 1h above the watermark batch {last} ran with "
        "(2024-01-01T00:01:25.000Z), although the batch read no input: the watermark moves only with the event times of "
        f"new rows, so commits/{last} was edited, beyond every event time the query has seen (2024-01-01T00:01:35.000Z). "
        "The next batch evicts state by it: windows, sessions and timeouts are emitted before the rows that belong to "
        "them arrive, and those rows are then dropped as late (tested with Spark 4.3: raised by an hour, other output "
        f"than the control run's); a rewind to before batch {last} makes Spark run it again and pass on its own "
        "watermark")}
    assert fixes(root)["WM079"] == repair.RewindRequest(to_batch=last - 1)


def test_set_watermark_raising_the_last_batch_is_not_an_edit(copy_fixture):
    """set-watermark writes offsets/L and commits/L alike, so WM065 stays silent after it."""
    root = copy_fixture("agg_window_hdfs")
    run_cli("set-watermark", str(root / "checkpoint"), "--watermark", "1704070885000", "--allow-raise", "--execute",
            "--idle", "0")
    assert "WM065" not in messages(root)


def test_row_checksums_turned_on_in_the_last_offsets_file_are_a_conf_change(copy_fixture):
    """Spark then expects a checksum before every row of state written without (it fails to load it): WM015, and
    the rows are not judged against their schema or partition (which way they were written is unknown)."""
    facts = fixture_facts("agg_window_hdfs")
    root = copy_fixture("agg_window_hdfs")
    edit_json(root / "checkpoint" / "offsets" / str(facts["last_batch"]), 1,
              lambda o: o["conf"].update({"spark.sql.streaming.stateStore.rowChecksum.enabled": "true"}))
    found = check_checkpoint(open_checkpoint(str(root / "checkpoint")))
    assert sorted((f.code, f.path) for f in found if f.code in ("WM015", "WM058", "WM059")) == [
        ("WM015", f"offsets/{facts['last_batch']}")]
    assert fixes(root)["WM015"] == repair.RewindRequest(to_batch=facts["last_batch"] - 1)


def test_confs_spark35_does_not_restore_say_what_each_spark_does(copy_fixture, tmp_path):
    """Spark 3.5 sets only the confs it knows from the last offsets file: row checksums turned on there, or an
    encoding format Spark 4.3 refuses, fail a Spark 4 restart (WM015, WM057; WM039 for each file whose rows have no
    checksums) and not a Spark 3.5 one, and the messages say so for a checkpoint whose state Spark 3.5 wrote
    (tests/test_spark35.py restarts both)."""
    last = fixture_facts("agg_spark35")["last_batch"]
    checksums = copy_fixture("agg_spark35")
    encoding = tmp_path / "encoding"
    shutil.copytree(checksums, encoding)
    edit_json(checksums / "checkpoint" / "offsets" / str(last), 1,
              lambda o: o["conf"].update({"spark.sql.streaming.stateStore.rowChecksum.enabled": "true"}))
    assert messages(checksums)["WM015"] == (
        f"spark.sql.streaming.stateStore.rowChecksum.enabled is 'true' at batch {last} but 'false' from batch 0: Spark "
        f"pins it for the life of a query and restarts with the value of the last offsets file, offsets/{last}, so "
        "state written under one value is read under the other (a failed or wrong restart; Spark 3.5 does not restore "
        "it (Spark 4 does) and restarts correctly, its state written as Spark 3.5 writes it); the logs come from two "
        "runs or were edited (wmcheck undo restores them if a repair did it), and a rewind to before batch "
        f"{last} drops them")
    unverified = [f.message for f in check_checkpoint(open_checkpoint(str(checksums / "checkpoint"))) if f.code == "WM039"]
    assert len(unverified) == 3 and all(m.startswith("row checksum verification failed") and (
        "reading this file (CANNOT_LOAD_STATE_STORE) (Spark 4 verifies row checksums; Spark 3.5 does not restore "
        "spark.sql.streaming.stateStore.rowChecksum.enabled and reads the rows as they were written, without: it "
        "restarts correctly); ") in m for m in unverified), unverified
    edit_json(encoding / "checkpoint" / "offsets" / str(last), 1,
              lambda o: o["conf"].update({"spark.sql.streaming.stateStore.encodingFormat": "json"}))
    assert messages(encoding) == {"WM057": (
        f"offsets/{last}, the offsets file Spark restarts from, pins spark.sql.streaming.stateStore.encodingFormat = "
        "'json', which Spark 4.3 refuses (Spark accepts 'unsaferow' or 'avro'): it sets every pinned conf from that "
        "file on restart and fails at once ([INVALID_CONF_VALUE], whether or not an operator uses the conf); Spark 3.5 "
        "neither restores nor checks this conf (Spark 4 does) and restarts regardless; batch "
        f"{last - 1} pinned no value (Spark's default then): the offsets files from batch {last} on come from another "
        f"run or were edited, and a rewind to before batch {last} drops them")}
    assert fixes(encoding)["WM057"] == repair.RewindRequest(to_batch=last - 1)


def test_a_refused_partition_count_is_not_also_one_spark_overrides(copy_fixture):
    """Spark fails on a refused spark.sql.shuffle.partitions before it runs any operator: WM057, not WM045's
    'Spark runs the operator with that many partitions, so the restart works'."""
    facts = fixture_facts("agg_window_hdfs")
    root = copy_fixture("agg_window_hdfs")
    for batch in range(facts["last_batch"] + 1):
        edit_json(root / "checkpoint" / "offsets" / str(batch), 1,
                  lambda o: o["conf"].update({"spark.sql.shuffle.partitions": "0"}))
    assert set(messages(root)) == {"WM057"}


@pytest.mark.parametrize(("key", "value", "refused"), [
    ("spark.sql.shuffle.partitions", "0", "Spark accepts a positive number"),
    ("spark.sql.shuffle.partitions", "three", "it is not an integer"),
    ("spark.sql.streaming.multipleWatermarkPolicy", "foo", "Spark accepts 'min' or 'max'"),
    ("spark.sql.streaming.multipleWatermarkPolicy", "MAX", None),
    ("spark.sql.streaming.aggregation.stateFormatVersion", "3", "Spark accepts versions 1 and 2"),
    ("spark.sql.streaming.join.stateFormatVersion", "4", None),
    ("spark.sql.streaming.stateStore.rocksdb.formatVersion", "-1", "Spark accepts a number not negative"),
    ("spark.sql.streaming.stateStore.rocksdb.mergeOperatorVersion", "3", "Spark accepts versions 1 and 2"),
    ("spark.sql.streaming.stateStore.encodingFormat", "AVRO", None),
    ("spark.sql.streaming.stateStore.encodingFormat", "json", "Spark accepts 'unsaferow' or 'avro'"),
    ("spark.sql.streaming.stateStore.rowChecksum.enabled", "yes", "it is not true or false"),
    ("spark.sql.streaming.stateStore.rowChecksum.enabled", "TRUE", None),
    ("spark.sql.streaming.stateStore.compression.codec", "foo",
     "no codec has that name; Spark knows lz4, lzf, snappy, zstd or a class name"),
    ("spark.sql.streaming.stateStore.compression.codec", "ZSTD", None),
    ("spark.sql.streaming.stateStore.compression.codec", "com.example.Codec", None),
    ("spark.sql.streaming.stateStore.providerClass", "org.apache.spark.sql.execution.streaming.state.NoSuchProvider",
     "Apache Spark has no such class"),
    ("spark.sql.streaming.stateStore.providerClass", "com.example.MyProvider", None),  # may be on the class path
    ("spark.sql.streaming.unknown", "x", None),  # a conf Spark does not restore
    ("spark.sql.streaming.aggregation.stateFormatVersion", None, "a restored conf needs a value"),
    ("spark.sql.streaming.stateStore.compression.codec", None, "a restored conf needs a value"),
    ("spark.sql.streaming.unknown", None, None),  # setSessionConf reads only the confs it restores
])
def test_which_pinned_values_spark_refuses(key, value, refused):
    """As Spark 4.3's setConfString (and its store, for the provider and the codec) takes each pinned value."""
    from wmcheck.checkpoint.conf_values import refusal

    found = refusal(key, {key: value}, stateful=True)
    assert (found and found.reason) == refused
    assert refusal(key, {}, stateful=True) is None  # not pinned: Spark's default


def test_a_stateless_query_restarts_with_any_codec_or_provider():
    from wmcheck.checkpoint.conf_values import refusal

    codec, agg = "spark.sql.streaming.stateStore.compression.codec", "spark.sql.streaming.aggregation.stateFormatVersion"
    assert refusal(codec, {codec: "foo"}, stateful=False) is None
    assert refusal(agg, {agg: "3"}, stateful=False) is not None
    assert refusal(codec, {codec: None}, stateful=False) is not None  # setConfString refuses a null at once


def test_decreasing_watermark_after_set_watermark_is_only_that_warning(copy_fixture):
    """Lowering the last batch's watermark as wmcheck set-watermark does (offsets/L and commits/L) gives WM011 only."""
    facts = fixture_facts("agg_window_hdfs")
    root = copy_fixture("agg_window_hdfs")
    last = facts["last_batch"]
    set_watermark(root / "checkpoint", last, offsets_ms=1000, commit_ms=1000)
    assert set(messages(root)) == {"WM011"}


def test_a_partition_count_edited_in_the_offsets_is_no_repartition(copy_fixture):
    """A no-data batch that only changed the pinned partition count looks like Spark's repartition in its offsets,
    but its state is an ordinary batch's deltas in the old partitions: WM015 with the rewind to before it, not
    partitions holding another's keys (WM058) or extra (WM019), nor edited operator metadata (WM045). Every
    offsets file edited: WM074, with the count the operator metadata and the partitions holding the loaded version
    agree on."""
    facts = fixture_facts("agg_window_hdfs")
    last = facts["last_batch"]
    root = copy_fixture("agg_window_hdfs")
    b_partitions_last(root, facts)
    assert sorted(messages(root)) == ["WM015"]
    assert messages(root)["WM015"] == (
        "spark.sql.shuffle.partitions is '2' at batch 12 but '3' from batch 0: Spark pins it for the life of a query "
        "and restarts with the value of the last offsets file, offsets/12, so state written under one value is read "
        "under the other (a failed or wrong restart); the logs come from two runs or were edited (wmcheck undo "
        "restores them if a repair did it), and a rewind to before batch 12 drops them")
    assert fixes(root)["WM015"] == repair.RewindRequest(to_batch=last - 1)


@pytest.mark.parametrize("count, outcome", [
    ("2", "Spark loads partitions 0..1 only and hashes each key to another partition than the one holding its state: "
          "rows are lost or emitted twice (tested: the restart's output differs from a control run)"),
    ("5", "partitions 3..4 hold no state, and loading version 13 there fails (tested: "
          "[CANNOT_LOAD_STATE_STORE.CANNOT_READ_DELTA_FILE_NOT_EXISTS])")])
def test_a_partition_count_edited_in_every_offsets_file_is_not_the_states(copy_fixture, count, outcome):
    last = fixture_facts("agg_window_hdfs")["last_batch"]
    root = copy_fixture("agg_window_hdfs")
    for batch in range(last + 1):
        edit_json(root / "checkpoint" / "offsets" / str(batch), 1,
                  lambda o: o["conf"].update({"spark.sql.shuffle.partitions": count}))
    assert messages(root) == {"WM074": (
        f"every offsets file pins spark.sql.shuffle.partitions={count}, which Spark restarts with, but state version "
        f"13 of operator 0 was written in 3 partitions (the operator metadata says 3, and state/0/0..2 hold that "
        f"version): {outcome}; the offsets files were edited or come from another query")}
    assert fixes(root)["WM074"] == Instruction(
        'set spark.sql.shuffle.partitions to "3" in every offsets file (offsets/12 decides the restart, an older '
        'file a rewind to its batch), or restore them from a backup')


HDFS_CLASS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"


ROCKSDB_CLASS = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


@pytest.mark.parametrize("fixture, key, value, evidence, outcome, written", [
    ("agg_window_hdfs", "spark.sql.streaming.stateStore.providerClass", ROCKSDB_CLASS,
     "the state holds HDFS-backed state files (deltas, snapshots) only",
     "Spark opens every store with the pinned provider, which finds none of its own files there, and loading the "
     "state fails (tested: [CANNOT_LOAD_STATE_STORE.CANNOT_READ_STREAMING_STATE_FILE] … 1.changelog does not exist)",
     HDFS_CLASS),
    ("agg_window_rocksdb", "spark.sql.streaming.stateStore.providerClass", HDFS_CLASS,
     "the state holds RocksDB state files (zips, changelogs) only",
     "Spark opens every store with the pinned provider, which finds none of its own files there, and loading the "
     "state fails (tested: [CANNOT_LOAD_STATE_STORE.CANNOT_READ_DELTA_FILE_NOT_EXISTS] … 1.delta)", ROCKSDB_CLASS),
    ("agg_window_hdfs", "spark.sql.streaming.aggregation.stateFormatVersion", "1",
     "the value schema of operator 0's state (count, sum) is format 2's (the aggregation buffer alone)",
     "on restart Spark compares the state's schema with the one the pinned format makes and fails (tested: "
     "[STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE])", "2")])
def test_a_conf_edited_in_every_offsets_file_is_not_the_states(copy_fixture, fixture, key, value, evidence, outcome,
                                                                written):
    """The provider (the kind of state files says which) and the aggregation state format (the aggregation's value
    schema says which) pinned in every offsets file where the state was written with another."""
    last = fixture_facts(fixture)["last_batch"]
    root = copy_fixture(fixture)
    for batch in range(last + 1):
        edit_json(root / "checkpoint" / "offsets" / str(batch), 1, lambda o: o["conf"].update({key: value}))
    assert messages(root) == {"WM074": (
        f"every offsets file pins {key}={value}, which Spark restarts with, but {evidence}: {outcome}; the offsets "
        f"files were edited or come from another query")}
    assert fixes(root)["WM074"] == Instruction(
        f'set {key} to "{written}" in every offsets file (offsets/{last} decides the restart, an older file a rewind '
        f'to its batch), or restore them from a backup')


def test_a_gap_in_the_offsets_spark_does_not_read_is_a_warning(copy_fixture):
    """offsets/1..10 deleted (their commits kept): Spark reads offsets/12 and 11 on restart (the restart oracle:
    the control run's output), so WM075, not WM002's error, and no WM004 for the commits left."""
    root = copy_fixture("agg_window_hdfs")
    for batch in range(1, 11):
        (root / "checkpoint" / "offsets" / str(batch)).unlink()
        (root / "checkpoint" / "offsets" / f".{batch}.crc").unlink()
    assert messages(root) == {"WM075": (
        "offsets/1..10 missing between batches 0 and 11 (commits/1..10 kept): on restart Spark reads only offsets/12 "
        "and offsets/11, so the restart is not affected (tested with Spark 4.3: the control run's output), but no "
        "rewind to batch 1..11 can be made (Spark would read the missing files), and tools reading the whole log "
        "(wmcheck batches, replay) skip those batches")}
    assert fixes(root)["WM075"] == Instruction(
        "nothing to change for a restart; restore the files from a backup before rewinding to those batches")
