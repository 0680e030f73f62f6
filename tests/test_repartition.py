"""``wmcheck repartition`` without Spark: the plan, every refusal, each output format; show and check on the
repartition fixtures (what Spark wrote is in their fixture.json)."""
from __future__ import annotations

import csv
import io
import json
import shutil
import time

import pytest

from wmcheck.checkpoint import repair
from wmcheck.checkpoint.errors import RefusedError
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.repair.plan import Plan
from wmcheck.checkpoint.repair.plan_params import Position, RepartitionParams
from wmcheck.checkpoint.repair.repartition import (
    HDFS_INSTEAD,
    batch_steps,
    spark_confs,
    spark_version_problem,
)
from wmcheck.checkpoint.repartitions import repartitions, unfinished

from conftest import FIXTURES, fixture_checkpoint, fixture_facts, run_cli

V2 = "agg_rocksdb_v2_p3"


def plan_json(name: str, *args: str, exit_code: int = 0):
    return run_cli("repartition", fixture_checkpoint(name), *args, "--format", "json", exit_code=exit_code)


def test_repartition_batches_are_what_spark_wrote():
    done = fixture_facts("repartition_rocksdb")["repartition"]
    [found] = repartitions(open_checkpoint(str(fixture_checkpoint("repartition_rocksdb"))))
    assert (found.batch, found.from_partitions, found.to_partitions, found.committed) == (
        done["batch"], done["from"], done["to"], True)
    failed = fixture_facts("repartition_failed_hdfs")["repartition"]
    stuck = unfinished(open_checkpoint(str(fixture_checkpoint("repartition_failed_hdfs"))))
    assert stuck is not None and (stuck.batch, stuck.committed) == (failed["batch"], False)
    assert failed["files_written"] == ["offsets/.9.crc", "offsets/9"] and failed["restart_changed_files"] == []
    for name in ("agg_window_hdfs", "checkpoint_v2", "compaction", V2):
        assert repartitions(open_checkpoint(str(fixture_checkpoint(name)))) == ()


def test_dry_run_plan_in_every_format(tmp_path):
    sink = FIXTURES / V2 / "output"
    doc = json.loads(plan_json(V2, "--partitions", "5", "--file-sink", sink, "--idle", "0").stdout)
    assert (doc["command"], doc["executed"], doc["request"]) == ("repartition", False, {"partitions": 5, "from": 3, "batch": 9})
    assert doc["after"] == {"last_batch": 9, "last_committed_batch": 9, "watermark_ms": doc["before"]["watermark_ms"],
                            "next_batch_partitions": 5}
    assert [(s["action"], s["root"], s["path"], s["new_size"], s["crc"]) for s in doc["steps"]] == [
        ("write", "sink", "_spark_metadata/9", 2, True)]
    assert doc["notes"][0] == "3 -> 5 partitions"
    assert doc["notes"][1].startswith("operator 0 (stateStoreSave): stores default; 3 partitions; ")
    assert "a snapshot of state version 10 in each of partitions 0..4" in doc["notes"][2]
    assert "spark.sql.streaming.stateStore.checkpointFormatVersion=2" in doc["notes"][3]
    table = run_cli("repartition", fixture_checkpoint(V2), "--partitions", "5", "--idle", "0").stdout
    assert "mode:           dry run: nothing was changed" in table and "no --file-sink given" in table
    rows = dict(r[:2] for r in csv.reader(io.StringIO(run_cli(
        "repartition", fixture_checkpoint(V2), "--partitions", "5", "--format", "csv", "--idle", "0").stdout)))
    assert rows["request.partitions"] == "5" and rows["after.last_committed_batch"] == "9"
    assert not (fixture_checkpoint(V2) / "_wmcheck").exists()


def test_spark_confs_carry_the_checkpoint_format():
    assert spark_confs(open_checkpoint(str(fixture_checkpoint(V2))))[
        "spark.sql.streaming.stateStore.checkpointFormatVersion"] == "2"
    assert spark_confs(open_checkpoint(str(fixture_checkpoint("dedup_rocksdb_p3"))))[
        "spark.sql.streaming.stateStore.checkpointFormatVersion"] == "1"


@pytest.mark.parametrize("name, args, message", [
    ("agg_window_hdfs", ["--partitions", "5"], f"cannot repartition to 5: the state store is "
     f"org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider: {HDFS_INSTEAD}"),
    ("repartition_failed_hdfs", ["--partitions", "5"], "cannot repartition to 5: batch 9 is an unfinished repartition "
     "(3 -> 5); run wmcheck rewind CKPT --to-batch 8 --execute first (wmcheck check: WM035)"),
    (V2, ["--partitions", "3"], "cannot repartition to 3: the checkpoint already has 3 partitions "
     "(Spark: SHUFFLE_PARTITIONS_ALREADY_MATCH)"),
    (V2, [], "nothing to do without --partitions N or --file-sink PATH"),
    ("join_v4_p3", ["--partitions", "5"], "cannot repartition to 5: operator 0 is a stream-stream join in state format "
     "4: Spark 4.3 repartitions it but places the rows of its keyWithTsToValues and tsWithKey stores by their whole "
     "state key"),
    ("streamline_agg_p3", ["--partitions", "5"], "cannot repartition to 5: operator 0 is StatefulStreamlineAggregate: "
     "Spark's repartition does not move its state (Spark 4.3 writes the repartition batch's offsets, then fails: "
     "[STDS_FAILED_TO_READ_STATE_SCHEMA]"),
])
def test_refusals_are_one_line_exit_2(name, args, message):
    out = run_cli("repartition", fixture_checkpoint(name), *args, exit_code=2).output
    assert out.startswith(f"Error: {message}") and len(out.strip().splitlines()) == 1


def test_uncommitted_last_batch_is_refused(copy_fixture):
    root = copy_fixture("dedup_rocksdb_p3")
    for p in (root / "checkpoint" / "commits").glob("*3*"):
        p.unlink()
    out = run_cli("repartition", root / "checkpoint", "--partitions", "5", exit_code=2).output
    assert "batch 3 is planned but not committed" in out and "wmcheck rewind CKPT --to-batch 2" in out


def test_spark_older_than_4_2_is_one_line():
    assert spark_version_problem("4.3.0") is None and spark_version_problem("4.2.0") is None
    assert spark_version_problem("3.5.1") == (
        "pyspark 3.5.1 is installed: Spark's offline state repartition needs pyspark 4.2 or newer")
    assert spark_version_problem("4.1.2") is not None


def test_remote_is_refused_before_anything_is_written(copy_fixture):
    root = copy_fixture(V2)
    out = run_cli("repartition", root / "checkpoint", "--partitions", "5", "--remote", "sc://localhost", "--execute",
                  "--idle", "0", exit_code=2).output
    assert out.startswith("Error: Spark's offline state repartition runs in Spark Classic only")
    assert not (root / "checkpoint" / "_wmcheck").exists()


def test_completing_a_spark_repartition_writes_only_the_sink_entry_and_undo_removes_it(copy_fixture):
    root = copy_fixture("repartition_rocksdb")
    ckpt, sink = root / "checkpoint", root / "output"
    before = sorted(p.name for p in (sink / "_spark_metadata").iterdir())
    done = repair.run(str(ckpt), repair.RepartitionRequest(file_sink=str(sink)),
                      repair.RunOptions(execute=True, idle_ms=0, force=True))
    assert done.verification is None and [s.path for s in done.plan.steps] == ["_spark_metadata/9"]
    assert (sink / "_spark_metadata" / "9").read_bytes() == b"v1"
    again = repair.run(str(ckpt), repair.RepartitionRequest(file_sink=str(sink)))
    assert again.plan.steps == () and again.plan.notes == ("the file sink log lacks no repartition batch",)
    repair.undo_repair(str(ckpt), idle_ms=0)
    assert sorted(p.name for p in (sink / "_spark_metadata").iterdir()) == before


def test_show_and_batches_table_name_the_repartition():
    table = run_cli("show", fixture_checkpoint("repartition_rocksdb")).stdout
    assert "next batch partitions:      5\n" in table and "repartition:                batch 9: 3 -> 5 partitions\n" in table
    assert ("note:                       operator 0: its v1 operator metadata still says 3 partitions: the repartition "
            "at batch 9 moved the state to 5 and Spark does not rewrite v1 metadata") in table
    rows = run_cli("batches", fixture_checkpoint("repartition_rocksdb"), "--last", "2").stdout.splitlines()
    assert [line.split()[:3] for line in rows[2:]] == [["8", "yes", "no-data"], ["9", "yes", "repartition"]]


def test_rewind_across_a_repartition_batch_restores_the_old_layout(copy_fixture):
    """Everything batch 9 wrote (as fixture.json lists it) goes; the partitions it added hold nothing."""
    root = copy_fixture("repartition_rocksdb")
    written = fixture_facts("repartition_rocksdb")["repartition"]["files_written"]
    doc = repair.run(str(root / "checkpoint"), repair.RewindRequest(to_batch=8, file_sink=str(root / "output")))
    assert sorted(s.path for s in doc.plan.steps) == sorted(written)


def test_removing_a_repartition_batch_puts_back_a_checkpoint_spark_could_not_restart_from(copy_fixture):
    """Undoing Spark's repartition batch (or its failed attempt) restores the checkpoint as it was, even where a
    rewind to the batch before is refused (offsets/7 gone: Spark restarting at batch 8 needs it)."""
    root = copy_fixture("repartition_rocksdb")
    for name in ("7", ".7.crc"):
        (root / "checkpoint" / "offsets" / name).unlink()
    ckpt = open_checkpoint(str(root / "checkpoint"))
    with pytest.raises(RefusedError, match="offsets/7 no longer exists"):
        repair.run(str(root / "checkpoint"), repair.RewindRequest(to_batch=8))
    at = Position(9, 9)
    plan = Plan("repartition", ckpt.location, None, RepartitionParams(5, 3, 9), at, at, (),
                created_ms=int(time.time() * 1000) + 60_000)  # made after every file: none is left by a killed run
    written = fixture_facts("repartition_rocksdb")["repartition"]["files_written"]
    assert sorted(s.path for s in batch_steps(ckpt, plan)) == sorted(written)


def test_saved_plan_is_refused_once_the_checkpoint_changed(copy_fixture, tmp_path):
    """Checked before Spark starts: the plan was made when the checkpoint had one batch less."""
    root = copy_fixture("dedup_rocksdb_p3")
    saved = tmp_path / "plan.json"
    run_cli("repartition", root / "checkpoint", "--partitions", "5", "--plan-out", saved, "--idle", "0")
    assert json.loads(saved.read_text())["request"] == {"partitions": 5, "from": 3, "batch": 4}
    for path in sorted((root / "checkpoint" / "commits").glob("*3*")):
        path.unlink()
    out = run_cli("repartition", root / "checkpoint", "--from-plan", saved, "--execute", "--idle", "0", exit_code=2).output
    assert out.startswith("Error: the checkpoint changed since the plan was made: cannot repartition to 5: batch 3 is "
                          "planned but not committed")
    assert not (root / "checkpoint" / "_wmcheck" / "backups").exists()


def test_operator_view_uses_the_metadata_of_the_batch_the_state_is_loaded_from(copy_fixture):
    """An uncommitted batch's v2 operator metadata (as a repartition that failed after writing it leaves) is not
    the operator's: the last committed batch's is; a committed one is."""
    root = copy_fixture("tws_pandas")
    ckpt = root / "checkpoint"
    last = fixture_facts("tws_pandas")["last_batch"]
    meta = ckpt / "state" / "0" / "_metadata" / "v2"
    newest = max(int(p.name) for p in meta.iterdir() if p.name.isdigit())
    (meta / str(last + 1)).write_text((meta / str(newest)).read_text().replace('"numPartitions":2', '"numPartitions":5'))
    offsets = (ckpt / "offsets" / str(last)).read_text()
    assert '"spark.sql.shuffle.partitions":"2"' in offsets
    (ckpt / "offsets" / str(last + 1)).write_text(offsets.replace('"spark.sql.shuffle.partitions":"2"',
                                                                   '"spark.sql.shuffle.partitions":"5"'))
    doc = json.loads(run_cli("show", ckpt, "--format", "json").stdout)
    assert [op["num_partitions"] for op in doc["operators"]] == [2]
    assert doc["unfinished_repartition"] == {"batch": last + 1, "from": 2, "to": 5} and doc["next_batch_partitions"] == 2
    (ckpt / "commits" / str(last + 1)).write_text((ckpt / "commits" / str(last)).read_text())
    doc = json.loads(run_cli("show", ckpt, "--format", "json").stdout)
    assert doc["repartitions"] == []  # its state is not what a repartition writes: a full copy in each new partition
    for partition in range(5):
        (ckpt / "state" / "0" / str(partition)).mkdir(exist_ok=True)
        shutil.copy2(ckpt / "state" / "0" / "0" / f"{last + 1}.zip", ckpt / "state" / "0" / str(partition) / f"{last + 2}.zip")
    doc = json.loads(run_cli("show", ckpt, "--format", "json").stdout)
    assert [op["num_partitions"] for op in doc["operators"]] == [5] and doc["next_batch_partitions"] == 5
    assert doc["repartitions"] == [{"batch": last + 1, "from": 2, "to": 5}]
    assert [op["metadata_lag"] for op in doc["operators"]] == [None]  # v2 metadata follows the repartition


def spark_wrote(writes, written: list[str]) -> dict[str, list[str]]:
    """Each planned Spark write (by path) with the files of ``written`` it names (a file's ``.NAME.crc`` with it);
    fails on a file no planned write names."""
    import fnmatch

    out: dict[str, list[str]] = {w.path: [] for w in writes}
    for path in written:
        folder, _, name = path.rpartition("/")
        checksum = name.startswith(".") and name.endswith(".crc")
        named = f"{folder}/{name[1:-4]}" if checksum else path
        [write] = [w for w in writes if fnmatch.fnmatchcase(named, w.path) and (w.crc or not checksum)]
        out[write.path].append(path)
    return out


def test_the_dry_run_lists_what_sparks_repartition_writes_as_the_steps_spark_runs(copy_fixture):
    """repartition_rocksdb rewound to batch 8 is the checkpoint Spark repartitioned 3 -> 5: the plan's Spark steps
    name every file Spark wrote as batch 9 (fixture.json: files_written), and each of them that is not optional."""
    root = copy_fixture("repartition_rocksdb")
    repair.run(str(root / "checkpoint"), repair.RewindRequest(to_batch=8, file_sink=str(root / "output")),
               repair.RunOptions(execute=True, idle_ms=0))
    plan = repair.run(str(root / "checkpoint"), repair.RepartitionRequest(partitions=5, file_sink=str(root / "output")),
                      repair.RunOptions(idle_ms=0)).plan
    written = fixture_facts("repartition_rocksdb")["repartition"]["files_written"]
    named = spark_wrote(plan.spark_writes, written)
    assert [w.path for w in plan.spark_writes if not w.optional and not named[w.path]] == []
    assert named["offsets/9"] == ["offsets/.9.crc", "offsets/9"] and named["state/0/4/10.zip"] == [
        "state/0/4/.10.zip.crc", "state/0/4/10.zip"]
    assert [(s.action, s.path) for s in plan.steps] == [("write", "_spark_metadata/9")]  # wmcheck's own write


def test_the_dry_run_table_lists_sparks_writes_and_counts_them():
    out = run_cli("repartition", fixture_checkpoint("dedup_rocksdb_p3"), "--partitions", "5", "--idle", "0").stdout
    lines = out.split("\n")
    assert "changes:        0 file(s) removed (moved into the backup), 0 written; Spark writes 12 more (steps marked " \
           "Spark)" in lines
    steps = lines[lines.index("Steps") + 1:]
    assert [" ".join(line.split()) for line in steps[2:5]] + [" ".join(steps[-2].split())] == [
        "Spark write offsets offsets/4 (and its .crc) offsets/3 with spark.sql.shuffle.partitions=5",
        "Spark write state state/0/0/5.zip (and its .crc) a snapshot of state version 5: the default rows of partition "
        "0 of 5",
        "Spark write state state/0/0/SSTs/*.sst (and their .crc) the snapshot's SST files, where the partition holds "
        "rows (Spark names them)",
        "Spark write commits commits/4 (and its .crc) batch 4 committed",
    ]
    assert len(steps) == 2 + 12 + 1  # header, rule, Spark's 12, the final newline
    doc = json.loads(plan_json("dedup_rocksdb_p3", "--partitions", "5", "--idle", "0").stdout)
    assert doc["steps"] == [] and doc["spark_writes"][0] == {
        "path": "offsets/4", "phase": "offsets", "reason": "offsets/3 with spark.sql.shuffle.partitions=5", "crc": True,
        "optional": False}
