"""Spark's offline state repartition, proven with real Spark: what wmcheck says about a repartitioned checkpoint,
and ``wmcheck repartition`` end to end (the restarted query's output equals that of a run that never
repartitioned: the fixture of the same query over the same input).

Each test copies a fixture (relocated to where the copy is), restarts the fixture's own query in the
session's one Spark session with the held-back input run, past the file sink log's next compaction.
"""
from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest
from test_repair_spark import QUERIES, fixture_conf, run_query, sink_rows

from wmcheck.checkpoint import repair
from wmcheck.checkpoint.checks.definition import Instruction
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.repartitions import UNFINISHED_RESTART_ERROR
from wmcheck.checkpoint.validate import check_location
from wmcheck.cli.fixes import fix_text
from wmcheck.statestore.spark.repartition import SparkRepartitioner

from conftest import FIXTURES, fixture_facts, run_cli

pytestmark = pytest.mark.spark
NOW = repair.RunOptions(execute=True, idle_ms=0)


def restartable(name: str, tmp_path: Path) -> Path:
    """A copy of the fixture whose logs name the copy's own input and output files."""
    root = tmp_path / name
    shutil.copytree(FIXTURES / name, root)
    repair.run(str(root / "checkpoint"), repair.RelocateRequest(path_map={fixture_facts(name)["root"]: str(root)},
                                                                 file_sink=str(root / "output")), NOW)
    shutil.rmtree(root / "checkpoint" / "_wmcheck")
    QUERIES.set_input_mtimes(name, str(root))
    return root


def baseline(spark, name: str) -> Counter:
    """The output of the fixture ``name`` (the same query over all the input, never repartitioned): its part files."""
    fmt = QUERIES.FIXTURES[name]["sink_format"]
    return Counter(tuple(r) for r in spark.read.format(fmt).load(str(FIXTURES / name / "output" / "part-*")).collect())


def restart(spark, name: str, root: Path) -> list[dict]:
    """The held-back input run, then the query until it is processed."""
    QUERIES.write_inputs(name, str(root), runs=[len(fixture_facts(name)["runs"])])
    return run_query(spark, name, root)


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "_wmcheck" not in p.parts}


def test_spark_repartitioned_checkpoint_sink_gap_and_its_fix(spark, tmp_path):
    """Without the sink: clean. With it: WM036 names the compaction that fails, and it does fail; the fix
    (wmcheck repartition --file-sink) makes the restart pass it, with the output of a run never repartitioned."""
    name, facts = "repartition_rocksdb", fixture_facts("repartition_rocksdb")
    control, fixed = restartable(name, tmp_path / "a"), restartable(name, tmp_path / "b")
    assert check_location(str(fixed / "checkpoint")) == []
    [gap] = check_location(str(fixed / "checkpoint"), str(fixed / "output"))
    assert (gap.code, gap.path) == ("WM036", "../output/_spark_metadata/9")
    assert "compaction at batch 11 (compact interval 3" in gap.message
    assert gap.fix == repair.RepartitionRequest(file_sink=str(fixed / "output"))
    assert fix_text(gap.fix, "CKPT", "SINK") == "wmcheck repartition CKPT --file-sink SINK"  # docs/check.md's
    with fixture_conf(spark, name):
        with pytest.raises(Exception, match=r"(?s)BATCH_METADATA_NOT_FOUND.*_spark_metadata/9"):
            restart(spark, name, control)
        done = repair.run(str(fixed / "checkpoint"), gap.fix, NOW)  # the fix check gives, as it gives it
        assert [(s.action, s.path) for s in done.plan.steps] == [("write", "_spark_metadata/9")]
        assert (fixed / "output" / "_spark_metadata" / "9").read_bytes() == b"v1"
        assert check_location(str(fixed / "checkpoint"), str(fixed / "output")) == []
        progress = restart(spark, name, fixed)
        assert [p["batchId"] for p in progress] == [10, 11, 12, 13]
        assert (fixed / "output" / "_spark_metadata" / "11.compact").exists()
        assert sink_rows(spark, name, fixed) == baseline(spark, "agg_window_rocksdb")
    assert facts["repartition"]["files_written"][:4] == ["commits/.9.crc", "commits/9", "offsets/.9.crc", "offsets/9"]


def test_failed_attempt_is_named_and_rewind_makes_the_restart_work(spark, tmp_path):
    name, facts = "repartition_failed_hdfs", fixture_facts("repartition_failed_hdfs")
    root = restartable(name, tmp_path)
    [stuck] = check_location(str(root / "checkpoint"), str(root / "output"))
    assert (stuck.code, stuck.path) == ("WM035", "offsets/9")
    quoted = UNFINISHED_RESTART_ERROR.format(batch=9, done=8)
    assert quoted in stuck.message and quoted in facts["repartition"]["restart_error"]  # what Spark said
    assert stuck.fix == repair.RewindRequest(to_batch=8, file_sink=str(root / "output"))
    assert fix_text(stuck.fix, "CKPT", "SINK") == "wmcheck rewind CKPT --to-batch 8 --file-sink SINK"  # docs/check.md's
    with fixture_conf(spark, name):
        with pytest.raises(Exception, match="STREAMING_UNFINISHED_REPARTITION_DETECTED"):
            run_query(spark, name, root)
        doc = repair.run(str(root / "checkpoint"), stuck.fix, NOW)  # the fix check gives, as it gives it
        assert [s.path for s in doc.plan.steps] == ["offsets/9", "offsets/.9.crc"]
        progress = restart(spark, name, root)
        assert [p["batchId"] for p in progress] == [9, 10, 11, 12]
        assert sink_rows(spark, name, root) == baseline(spark, "agg_window_hdfs")
    assert check_location(str(root / "checkpoint"), str(root / "output")) == []


def execute(root: Path, partitions: int) -> repair.RepairResult:
    done = repair.run(str(root / "checkpoint"), repair.RepartitionRequest(
        partitions=partitions, file_sink=str(root / "output"), runner=SparkRepartitioner()), NOW)
    assert done.verification is not None and done.verification.ok, done.verification
    assert done.verification.partitions == partitions
    return done


@pytest.mark.parametrize("name, reference", [("agg_rocksdb_v2_p3", "agg_window_rocksdb"),
                                             ("dedup_rocksdb_p3", "dedup_watermark")])
def test_repartition_3_to_5_then_restart_past_compaction(spark, tmp_path, name, reference):
    """Checkpoint format v2 (aggregation) and v1 (deduplication); the dedup one is also undone byte for byte first."""
    root = restartable(name, tmp_path)
    last = fixture_facts(name)["last_batch"]
    with fixture_conf(spark, name):
        if name.startswith("dedup"):
            before = files(root)
            execute(root, 5)
            assert files(root) != before
            undone = repair.undo_repair(str(root / "checkpoint"), idle_ms=0)
            assert files(root) == before and undone.command == "repartition"
        before = files(root)
        doc = run_cli_json("repartition", root / "checkpoint", "--partitions", "5", "--file-sink", root / "output",
                           "--execute", "--idle", "0")
        assert (doc["executed"], doc["request"]["batch"], doc["verification"]["partitions"]) == (True, last + 1, 5)
        assert_planned_spark_writes(doc, before, files(root))
        [count] = doc["verification"]["counts"]
        assert count["operator_id"] == 0 and count["store"] == "default" and count["before"] == count["after"] > 0
        assert doc["verification"]["errors"] == [] == doc["verification"]["warnings"]
        rows = {r["batch"]: r["kind"] for r in run_cli_json("batches", root / "checkpoint")}
        assert rows[last + 1] == "repartition"
        progress = restart(spark, name, root)
        assert progress[0]["batchId"] == last + 2 and any(
            (root / "output" / "_spark_metadata" / f"{b}.compact").exists() for b in range(last + 2, last + 6))
        assert sink_rows(spark, name, root) == baseline(spark, reference)
    assert check_location(str(root / "checkpoint"), str(root / "output")) == []


def assert_planned_spark_writes(doc: dict, before: dict[str, bytes], after: dict[str, bytes]) -> None:
    """Every file Spark's repartition wrote in the checkpoint is one the plan's Spark steps name, and each step that
    is not optional wrote one."""
    from test_repartition import spark_wrote

    from wmcheck.checkpoint.repair.plan import SparkWrite

    writes = [SparkWrite.from_json(w) for w in doc["spark_writes"]]
    new = sorted(p.removeprefix("checkpoint/") for p in set(after) - set(before) if p.startswith("checkpoint/"))
    named = spark_wrote(writes, new)
    assert new and [w.path for w in writes if not w.optional and not named[w.path]] == []


def run_cli_json(*args) -> list[dict]:
    import json

    return json.loads(run_cli(*args, "--format", "json").stdout)


def test_rewind_before_a_repartition_restores_the_old_layout_then_5_to_2(spark, tmp_path):
    """Rewinding a Spark-repartitioned checkpoint to before the repartition batch: 3 partitions again, and the
    restart runs with them. Then 3 -> 5 and 5 -> 2 with wmcheck, and the restart past compaction."""
    name = "repartition_rocksdb"
    old, new = restartable(name, tmp_path / "old"), restartable(name, tmp_path / "new")
    with fixture_conf(spark, name):
        repair.run(str(old / "checkpoint"), repair.RewindRequest(to_batch=8, file_sink=str(old / "output")), NOW)
        assert run_cli_json("show", old / "checkpoint")["next_batch_partitions"] == 3
        assert not [p for p in (old / "checkpoint" / "state" / "0").rglob("*") if p.is_file() and p.parts[-2] in "34"]
        restart(spark, name, old)
        assert open_checkpoint(str(old / "checkpoint")).offsets(9).metadata.conf["spark.sql.shuffle.partitions"] == "3"
        assert sink_rows(spark, name, old) == baseline(spark, "agg_window_rocksdb")

        table = run_cli("repartition", new / "checkpoint", "--partitions", "2", "--file-sink", new / "output",
                        "--execute", "--idle", "0").stdout  # also the sink entry Spark's own repartition to 5 left out
        assert "verified:       yes: check finds no error and every store has as many rows as before\n" in table
        assert "check warning:  WM019 state/0/2\n" in table and "partitions now: 2\n" in table
        assert [line.split()[3] for line in table.splitlines() if " write " in line and not line.startswith("Spark")] == [
            "_spark_metadata/9", "_spark_metadata/10"]  # wmcheck's own steps (Spark's marked Spark: its offline repartition)
        stale = [f for f in check_location(str(new / "checkpoint"), str(new / "output"))]
        assert [(f.code, f.path) for f in stale] == [("WM019", "state/0/2")]
        assert "left by the repartition from 5 to 2 partitions at batch 10" in stale[0].message
        assert stale[0].fix == Instruction("keep them as long as you may rewind to before batch 10")
        show = run_cli_json("show", new / "checkpoint")
        assert show["repartitions"] == [{"batch": 9, "from": 3, "to": 5}, {"batch": 10, "from": 5, "to": 2}]
        restart(spark, name, new)
        assert sink_rows(spark, name, new) == baseline(spark, "agg_window_rocksdb")


def running_tasks(spark) -> int:
    """Tasks Spark's status store sees running in the session, once every event Spark posted reached it."""
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
    return sum(e.numRunningTasks for e in spark.sparkContext.statusTracker().getExecutorInfos())


def test_spark_failure_leaves_the_checkpoint_as_it_was(spark, tmp_path):
    """A file where Spark wants partition directory 3 of the new layout: Spark fails after writing offsets/L+1 while
    other tasks of its job still write state files; wmcheck cancels and waits for them (none runs when it returns),
    moves what they wrote into the backup and says so in one line. Nothing is written into the checkpoint later."""
    name = "dedup_rocksdb_p3"
    root = tmp_path / name
    shutil.copytree(FIXTURES / name, root)
    (root / "checkpoint" / "state" / "0" / "3").write_text("in the way")
    before = files(root)
    with fixture_conf(spark, name):
        out = run_cli("repartition", root / "checkpoint", "--partitions", "5", "--file-sink", root / "output",
                      "--execute", "--idle", "0", exit_code=2).output
        assert running_tasks(spark) == 0
    assert out.startswith("Error: Spark's repartition failed: ") and len(out.strip().splitlines()) == 1
    assert "file(s) it wrote were moved into backup " in out and "so the checkpoint is as it was" in out
    assert files(root) == before
    [row] = repair.list_backups(str(root / "checkpoint"))
    assert (row.command, row.status) == ("repartition", "undone")
    assert (root / "checkpoint" / "_wmcheck" / "backups" / row.backup_id / "files" / "checkpoint" / "offsets" / "4").exists()
