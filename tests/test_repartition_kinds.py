"""Spark's offline repartition of every operator kind it accepts, through ``wmcheck repartition``, proven with real
Spark on RocksDB checkpoints written by real queries (fixtures ``*_p3``: 3 partitions, run 1 of the input held back).

Per kind: the repartition 3 -> 5 (Spark's batch, the sink log entry, the verification), its undo (every byte as
before), the repartition again, then the query restarted on the held-back input past the sink log's next compaction:
its output equals the control the generator ran at 5 partitions over all the input from a new checkpoint, and that
control equals the one at 3 partitions (Spark's promise: the partition count changes where state lives, not what the
query outputs). One Spark session (the tests') runs every kind.
"""
from __future__ import annotations

import json
import shutil
from collections import Counter

import pytest
from test_repair_spark import QUERIES, fixture_conf, sink_rows
from test_repartition_spark import assert_planned_spark_writes, files, restart, restartable

from wmcheck.checkpoint import repair
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.repair.repartition import JOIN_V4_MISPLACED, SPARK_FAILS_SOONER, spark_confs
from wmcheck.checkpoint.validate import check_location
from wmcheck.statestore.spark.repartition import SparkRepartitioner, session_confs

from conftest import FIXTURES, fixture_facts, run_cli

pytestmark = pytest.mark.spark
NOW = repair.RunOptions(execute=True, idle_ms=0)
KINDS = {
    "dedup_within_wm_p3": "dedupeWithinWatermark",
    "session_window_p3": "sessionWindowStateStoreSaveExec",
    "pandas_state_p3": "applyInPandasWithState",
    "tws_timers_ttl_p3": "transformWithStateInPandasExec",
    **{f"join_v{v}_p3": "symmetricHashJoin" for v in (2, 3)},
}


def control(spark, name: str, partitions: int) -> Counter:
    """The generator's control run of the fixture's query at ``partitions``: its part files, read by Spark."""
    fmt = QUERIES.FIXTURES[name]["sink_format"]
    folder = FIXTURES / name / f"control-{partitions}"
    return Counter(tuple(r) for r in spark.read.format(fmt).load(str(folder / "part-*")).collect())


def cli_json(*args: object) -> dict:
    return json.loads(run_cli(*args, "--format", "json").stdout)


@pytest.mark.parametrize("name", KINDS)
def test_spark_repartitions_every_operator_kind_and_the_restart_matches_the_control(spark, tmp_path, name):
    facts = fixture_facts(name)
    assert [op["operator_name"] for op in facts["operators"]] == [KINDS[name]]
    root = restartable(name, tmp_path)
    ckpt, sink = root / "checkpoint", root / "output"
    last = facts["last_batch"]
    before = files(root)
    with fixture_conf(spark, name):
        done = repair.run(str(ckpt), repair.RepartitionRequest(partitions=5, file_sink=str(sink),
                                                               runner=SparkRepartitioner()), NOW)
        assert done.verification is not None and done.verification.ok, done.verification
        assert done.verification.partitions == 5 and done.verification.errors == () == done.verification.warnings
        assert {c.store for c in done.verification.counts} and all(c.before == c.after for c in done.verification.counts)
        assert (sink / "_spark_metadata" / str(last + 1)).read_bytes() == b"v1"
        undone = repair.undo_repair(str(ckpt), idle_ms=0)
        assert undone.command == "repartition" and files(root) == before

        doc = cli_json("repartition", ckpt, "--partitions", "5", "--file-sink", sink, "--execute", "--idle", "0")
        assert (doc["executed"], doc["request"]["batch"], doc["verification"]["partitions"]) == (True, last + 1, 5)
        assert_planned_spark_writes(doc, before, files(root))
        assert doc["verification"]["errors"] == [] and [s["path"] for s in doc["steps"]] == [
            f"_spark_metadata/{last + 1}"]
        progress = restart(spark, name, root)
        assert progress[0]["batchId"] == last + 2
        assert open_checkpoint(str(ckpt)).offsets(last + 2).metadata.conf["spark.sql.shuffle.partitions"] == "5"
        assert any((sink / "_spark_metadata" / f"{b}.compact").exists() for b in range(last + 2, last + 8))
        restarted = sink_rows(spark, name, root)
        assert restarted == control(spark, name, 5) == control(spark, name, 3)
        assert sum(restarted.values()) == facts["controls"]["5"]["rows"] > 0
    assert check_location(str(ckpt), str(sink)) == []



def test_an_operator_spark_does_not_repartition_is_refused_with_sparks_words(spark, tmp_path):
    """wmcheck refuses what Spark refuses, in Spark's words: a streamline aggregation (StatefulStreamlineAggregate,
    for which Spark 4.3's repartition has no partition key) is refused before anything is written; Spark's own
    repartition of the same checkpoint fails with the text wmcheck quotes, after writing the repartition batch's
    offsets (an unfinished repartition: WM035)."""
    name = "streamline_agg_p3"
    root = tmp_path / name
    shutil.copytree(FIXTURES / name, root)
    before = files(root)
    out = run_cli("repartition", root / "checkpoint", "--partitions", "5", "--execute", "--idle", "0", exit_code=2).output
    quoted = SPARK_FAILS_SOONER["StatefulStreamlineAggregate"]
    assert out.startswith("Error: cannot repartition to 5: operator 0 is StatefulStreamlineAggregate: Spark's "
                          "repartition does not move its state (Spark 4.3 writes the repartition batch's offsets, then "
                          f"fails: {quoted})")
    assert files(root) == before
    with fixture_conf(spark, name), pytest.raises(Exception) as failed:
        spark._streamingCheckpointManager.repartition(str(root / "checkpoint"), 5)
    assert str(failed.value).startswith(quoted)
    assert [(f.code, f.path) for f in check_location(str(root / "checkpoint"))] == [("WM035", "offsets/4")]


def test_a_join_in_state_format_4_is_refused_because_sparks_repartition_loses_matches(spark, tmp_path):
    """Spark 4.3 repartitions a format-4 join without an error, but places its timestamp-indexed stores' rows by
    their whole state key: Spark's state reader then fails on the state, and the query restarted on new input
    (with the sink log entry wmcheck writes) misses one match of the control. wmcheck refuses it, dry run included."""
    name = "join_v4_p3"
    root = restartable(name, tmp_path)
    ckpt, sink = root / "checkpoint", root / "output"
    out = run_cli("repartition", ckpt, "--partitions", "5", "--file-sink", sink, exit_code=2).output
    assert out.startswith("Error: cannot repartition to 5: operator 0 is a stream-stream join in state format 4: ")
    assert JOIN_V4_MISPLACED in out and not (ckpt / "_wmcheck").exists()
    with fixture_conf(spark, name), session_confs(spark, spark_confs(open_checkpoint(str(ckpt)))):
        spark._streamingCheckpointManager.repartition(str(ckpt), 5)
    repair.run(str(ckpt), repair.RepartitionRequest(file_sink=str(sink)), NOW)  # the sink log entry Spark leaves out
    with fixture_conf(spark, name):
        with pytest.raises(Exception, match="Invalid byte array backed UnsafeRow"):
            spark.read.format("statestore").option("joinSide", "left").load(str(ckpt)).count()
        restart(spark, name, root)
        restarted, expected = sink_rows(spark, name, root), control(spark, name, 5)
    assert expected == control(spark, name, 3) and sum(expected.values()) == 12
    assert not restarted - expected and sum((expected - restarted).values()) == 1
