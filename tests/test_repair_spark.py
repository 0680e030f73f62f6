"""Repairs proven with real Spark: a rewound query replays to the same output; a lowered watermark accepts late rows.

Each test runs a fixture's own query (fixtures/queries.py) on its own input in a temporary
directory, in the session's one Spark session with the fixture's SQL confs set for the test.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import pytest

from wmcheck.checkpoint import repair
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.validate import check_location
from wmcheck.cli.fixes import fix_text
from wmcheck.cli.output import repair_doc

from fixture_modules import fixture_module

pytestmark = pytest.mark.spark


QUERIES = fixture_module("queries.py")


@contextmanager
def fixture_conf(spark, name: str, extra: dict[str, str] | None = None):
    """The fixture's SQL confs (and ``extra``) on the shared session, restored afterwards."""
    conf = {**QUERIES.FIXTURES[name]["conf"], **(extra or {})}
    old = {k: spark.conf.get(k, None) for k in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in old.items():
            spark.conf.unset(key) if value is None else spark.conf.set(key, value)


def run_query(spark, name: str, root: Path, input_root: Path | None = None) -> list[dict]:
    """Run the fixture's query (input from input_root, default root) until every file is processed."""
    source = str((input_root or root) / "input")
    query = QUERIES.FIXTURES[name]["query"](spark, source, str(root / "checkpoint"), str(root / "output"))
    handle = query.start()
    handle.awaitTermination()
    assert handle.exception() is None, handle.exception()
    return [json.loads(p.json) if hasattr(p, "json") else p for p in handle.recentProgress]


def sink_rows(spark, name: str, root: Path) -> Counter:
    """The file sink's rows as Spark reads them (through _spark_metadata), as a multiset."""
    fmt = QUERIES.FIXTURES[name]["sink_format"]
    return Counter(tuple(r) for r in spark.read.format(fmt).load(str(root / "output")).collect())


def first_run(spark, name: str, root: Path) -> list[dict]:
    """The query on the input files of the fixture's first two runs (kept small: the machine is shared)."""
    QUERIES.write_inputs(name, str(root), runs=[0, 1])
    return run_query(spark, name, root)


@pytest.mark.parametrize("name, batch", [("agg_window_hdfs", 3), ("agg_window_rocksdb", 4), ("checkpoint_v2", 2)])
def test_rewound_query_replays_to_the_same_output(spark, tmp_path, name, batch):
    root = tmp_path / name
    with fixture_conf(spark, name):
        progress = first_run(spark, name, root)
        last = open_checkpoint(str(root / "checkpoint")).last_committed_batch
        original = sink_rows(spark, name, root)
        shutil.copytree(root / "output", tmp_path / "kept-output")
        shutil.copytree(root / "checkpoint", tmp_path / "kept-checkpoint")

        doc = repair_doc(repair.run(str(root / "checkpoint"), repair.RewindRequest(to_batch=batch, file_sink=str(root / "output")), repair.RunOptions(execute=True, idle_ms=0)))
        assert doc["after"]["last_committed_batch"] == batch and doc["backup_id"]
        assert any(s["phase"] == "state" for s in doc["steps"]) and any(s["phase"] == "sink-data" for s in doc["steps"])
        rewound = sink_rows(spark, name, root)
        assert rewound < original  # the removed batches' rows are really gone from the sink

        replay = run_query(spark, name, root)
    assert [p["batchId"] for p in replay] == list(range(batch + 1, last + 1))
    assert sum(p["numInputRows"] for p in replay) == sum(p["numInputRows"] for p in progress if p["batchId"] > batch)
    assert sink_rows(spark, name, root) == original
    assert open_checkpoint(str(root / "checkpoint")).last_committed_batch == last


def test_rewind_over_a_cleaned_up_source_log_replays_to_the_same_output(spark, tmp_path):
    """The source log's file for the target was cleaned up after compaction: wmcheck rebuilds it."""
    name, batch = "agg_window_hdfs", 3
    root = tmp_path / name
    with fixture_conf(spark, name, {"spark.sql.streaming.fileSource.log.compactInterval": "3"}):
        progress = first_run(spark, name, root)
        original = sink_rows(spark, name, root)
        log = root / "checkpoint" / "sources" / "0"
        assert sorted(p.name for p in log.iterdir() if not p.name.startswith(".")) == [
            "0", "1", "2.compact", "3", "4", "5.compact", "6"]
        for f in log.iterdir():  # what cleanup keeps with a shorter retention: the last compact file onwards
            if int(f.name.lstrip(".").split(".")[0]) < 5:
                f.unlink()
        doc = repair_doc(repair.run(str(root / "checkpoint"), repair.RewindRequest(to_batch=batch, file_sink=str(root / "output")), repair.RunOptions(execute=True, idle_ms=0)))
        assert [(s["action"], s["path"]) for s in doc["steps"] if s["phase"] == "sources"][0] == (
            "write", "sources/0/3.compact")
        assert sorted(p.name for p in log.iterdir()) == [".3.compact.crc", "3.compact"]
        assert sink_rows(spark, name, root) < original
        replay = run_query(spark, name, root)
    assert [(p["batchId"], p["numInputRows"]) for p in replay] == [
        (p["batchId"], p["numInputRows"]) for p in progress if p["batchId"] > batch]  # each file once, in its batch
    assert sink_rows(spark, name, root) == original


def hadoop_read(spark, path: Path) -> bytes:
    """A file's bytes through Hadoop's local FileSystem, which checks the .crc sidecar."""
    jvm = spark._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path.as_uri())
    stream = hadoop_path.getFileSystem(spark._jsc.hadoopConfiguration()).open(hadoop_path)
    try:
        return bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
    finally:
        stream.close()


def late_file(root: Path, name: str, rows: list[dict]) -> None:
    """One more input file, newer than every fixture file."""
    path = root / "input" / "late.json"
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    mtime = QUERIES.input_mtime(9, 0)
    os.utime(path, (mtime, mtime))


def test_lower_watermark_accepts_a_row_the_old_one_dropped(spark, tmp_path):
    name = "agg_window_hdfs"
    root = tmp_path / name
    late = [{"id": "z", "ts": "2024-01-01T00:00:45Z", "v": 1000}]  # before the watermark the first run ends with
    with fixture_conf(spark, name):
        first_run(spark, name, root)
        control = tmp_path / "control"  # the same checkpoint, not repaired
        shutil.copytree(root, control, ignore=shutil.ignore_patterns("input"))
        ckpt = open_checkpoint(str(root / "checkpoint"))
        old, last = ckpt.watermark_ms, ckpt.last_batch
        doc = repair_doc(repair.run(str(root / "checkpoint"), repair.SetWatermarkRequest(watermark="2024-01-01T00:00:40Z"), repair.RunOptions(execute=True, idle_ms=0)))
        assert doc["before"]["watermark_ms"] == old == 1704067253000
        assert doc["after"]["watermark_ms"] == 1704067240000
        assert {s["path"] for s in doc["steps"]} == {f"offsets/{last}", f"commits/{last}"}
        assert all(s["crc"] for s in doc["steps"])

        for step in doc["steps"]:  # Hadoop's checksummed file system verifies the regenerated sidecars ...
            assert hadoop_read(spark, root / "checkpoint" / step["path"]) == base64.b64decode(step["data_base64"])
        saved = Path(doc["backup"]) / "checkpoint"
        sidecar = Path(doc["steps"][0]["path"]).parent / f".{Path(doc['steps'][0]['path']).name}.crc"
        stale = tmp_path / "stale"
        shutil.copytree(root / "checkpoint", stale)
        shutil.copyfile(saved / sidecar, stale / sidecar)
        with pytest.raises(Exception, match="ChecksumException"):  # ... and would reject the old ones
            hadoop_read(spark, stale / doc["steps"][0]["path"])

        late_file(root, name, late)
        dropped = run_query(spark, name, control, input_root=root)  # the same input files, by the same paths
        accepted = run_query(spark, name, root)
    assert sum(o["numRowsDroppedByWatermark"] for p in dropped for o in p["stateOperators"]) == 1
    assert sum(o["numRowsDroppedByWatermark"] for p in accepted for o in p["stateOperators"]) == 0
    assert accepted[0]["numInputRows"] == 1 and accepted[0]["stateOperators"][0]["numRowsUpdated"] == 1
    assert accepted[0]["eventTime"]["watermark"] == "2024-01-01T00:00:40.000Z"


def start(spark, name: str, source: Path, checkpoint: Path, output: Path) -> list[dict]:
    """Run a fixture's query on explicit paths until every file is processed; its progress reports."""
    handle = QUERIES.FIXTURES[name]["query"](spark, str(source), str(checkpoint), str(output)).start()
    handle.awaitTermination()
    assert handle.exception() is None, handle.exception()
    return [json.loads(p.json) if hasattr(p, "json") else p for p in handle.recentProgress]


def test_moved_transform_with_state_checkpoint_restarts_once_relocated(spark, tmp_path):
    """Spark fails to restart a moved transformWithState checkpoint; after wmcheck relocate it resumes
    and its output equals that of the same query that never moved."""
    name = "tws_pandas"
    fmt = QUERIES.FIXTURES[name]["sink_format"]
    source = tmp_path / "input"

    def rows(output: Path) -> Counter:
        return Counter(tuple(r) for r in spark.read.format(fmt).load(str(output)).collect())

    QUERIES.write_inputs(name, str(tmp_path), runs=[0])
    with fixture_conf(spark, name):
        start(spark, name, source, tmp_path / "ckpt-ref", tmp_path / "out-ref")
        start(spark, name, source, tmp_path / "ckpt-a", tmp_path / "out")
        shutil.move(tmp_path / "ckpt-a", tmp_path / "ckpt-b")
        QUERIES.write_inputs(name, str(tmp_path), runs=[0, 1])
        with pytest.raises(Exception, match=r"ckpt-a/state/0/_stateSchema/default/0_[0-9a-f-]+ does not exist"):
            start(spark, name, source, tmp_path / "ckpt-b", tmp_path / "out")
        # every metadata file naming the moved schema (the failed restart wrote one more) has the same fix; run it as it is
        moved = [f for f in check_location(str(tmp_path / "ckpt-b")) if f.code == "WM027"]
        assert moved and {fix_text(f.fix, "CKPT") for f in moved} == {"wmcheck relocate CKPT"}
        doc = repair_doc(repair.run(str(tmp_path / "ckpt-b"), moved[0].fix, repair.RunOptions(execute=True, idle_ms=0)))
        assert doc["steps"] and all(s["path"].startswith("state/0/_metadata/v2/") for s in doc["steps"])
        resumed = start(spark, name, source, tmp_path / "ckpt-b", tmp_path / "out")
        reference = start(spark, name, source, tmp_path / "ckpt-ref", tmp_path / "out-ref")
        got, expected = rows(tmp_path / "out"), rows(tmp_path / "out-ref")
    assert [p["batchId"] for p in resumed] == [p["batchId"] for p in reference] != []
    assert got == expected and sum(got.values()) > 0


def test_moved_input_and_output_are_not_processed_again_once_relocated(spark, tmp_path):
    """A query moved with its input and file sink: without relocate Spark reads every input file again;
    after relocate --path-map only the new files, and the sink (its log mapped too) reads back whole."""
    name = "agg_window_hdfs"
    old, new, control = tmp_path / "a", tmp_path / "b", tmp_path / "control"
    with fixture_conf(spark, name):
        first_run(spark, name, old)
        before = sink_rows(spark, name, old)
        shutil.copytree(old, control)  # the same move, not relocated: its logs keep naming a/
        shutil.move(old, new)
        doc = repair_doc(repair.run(str(new / "checkpoint"), repair.RelocateRequest(path_map={str(old): str(new)}, file_sink=str(new / "output")), repair.RunOptions(execute=True, idle_ms=0)))
        phases = Counter(s["phase"] for s in doc["steps"])
        assert phases["sources"] == len(list((new / "checkpoint/sources/0").glob("[0-9]*")))
        assert phases["sink"] == len(list((new / "output/_spark_metadata").glob("[0-9]*")))
        assert f'"path":"file://{new}/input/run0-000.json"' in (new / "checkpoint/sources/0/0").read_text()
        assert sink_rows(spark, name, new) == before
        written = QUERIES.write_inputs(name, str(new), runs=[2])
        resumed = run_query(spark, name, new)
        QUERIES.write_inputs(name, str(control), runs=[2])
        again = run_query(spark, name, control)
    fresh = sum(len((new / f).read_text().splitlines()) for f in written)
    assert sum(p["numInputRows"] for p in resumed) == fresh
    assert sum(p["numInputRows"] for p in again) > fresh  # every old file was taken for a new one
