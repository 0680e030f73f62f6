"""compat's scratch copy, without Spark: which batch it re-runs, the files it copies, and that the copy is the
checkpoint rewound by one batch (what ``wmcheck rewind --keep-next-offsets --keep-source-log`` makes), while the
checkpoint itself stays as it was."""
from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from wmcheck.checkpoint.errors import CheckpointError, MissingFileError
from wmcheck.checkpoint.fs import open_fs
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.relocation import foreign_references
from wmcheck.statestore.spark.compat.scratch import make_scratch, needed_files, rerun_batch, sink_format

from conftest import FIXTURES, fixture_checkpoint


def digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_rerun_batch_is_the_last_one_that_read_input():
    ckpt = open_checkpoint(str(fixture_checkpoint("agg_window_hdfs")))
    assert (ckpt.last_committed_batch, rerun_batch(ckpt)) == (12, (11, "rerun"))  # 12: the run's closing no-data batch
    assert rerun_batch(ckpt, 12) == (12, "rerun") and rerun_batch(ckpt, 0) == (0, "rerun")


def test_a_pending_batch_is_the_one_a_restart_reruns(tmp_path):
    shutil.copytree(fixture_checkpoint("agg_window_hdfs"), tmp_path / "ckpt")
    for name in ("12", ".12.crc"):
        (tmp_path / "ckpt" / "commits" / name).unlink()
    assert rerun_batch(open_checkpoint(str(tmp_path / "ckpt"))) == (12, "pending")


def test_a_batch_that_cannot_be_rerun_is_refused():
    ckpt = open_checkpoint(str(fixture_checkpoint("agg_window_hdfs")))
    with pytest.raises(CheckpointError, match="batch 13 is not a committed batch") as err:
        rerun_batch(ckpt, 13)
    assert err.value.param == "batch"
    compacted = open_checkpoint(str(fixture_checkpoint("compaction")))
    first = min(compacted.offset_ids)
    with pytest.raises(MissingFileError, match=f"batch {first - 1} it starts from was purged"):
        rerun_batch(compacted, first)


def test_only_what_the_batch_reads_is_copied():
    ckpt = open_checkpoint(str(fixture_checkpoint("agg_window_hdfs")))
    files = needed_files(ckpt, 11)
    logs = sorted(p for p in files if p.startswith(("offsets/", "commits/")) and not p.endswith(".crc"))
    assert logs == ["commits/10", "offsets/10", "offsets/11"]
    deltas = sorted({int(p.rsplit("/", 1)[1].split(".")[0]) for p in files if p.startswith("state/0/") and p.endswith(".delta")})
    assert deltas == list(range(1, 12))  # HDFS: no snapshot, so every delta up to version 11
    assert not [p for p in files if "/12.delta" in p or "/13.delta" in p]
    assert "state/0/0/_metadata/schema" in files and "metadata" in files


def test_the_scratch_copy_is_the_checkpoint_rewound_by_one_batch(tmp_path):
    src = tmp_path / "fixture"
    shutil.copytree(FIXTURES / "agg_window_hdfs", src)
    before = digest(src)
    scratch = make_scratch(open_checkpoint(str(src / "checkpoint")), 11, str(tmp_path / "scratch"),
                           open_fs(str(src / "output")))
    assert digest(src) == before
    copy = open_checkpoint(scratch.checkpoint)
    assert (copy.last_committed_batch, copy.last_batch, copy.next_batch) == (10, 11, 11)
    assert sorted(p.name for p in Path(scratch.checkpoint, "offsets").iterdir() if not p.name.startswith(".")) == ["10", "11"]
    assert not Path(scratch.checkpoint, "_wmcheck").exists()
    sink_log = sorted(int(p.name) for p in Path(scratch.sink, "_spark_metadata").iterdir() if p.name.isdigit())
    assert sink_log[-1] == 10
    assert not [p for p in Path(scratch.sink).iterdir() if p.name != "_spark_metadata"]  # no data file is copied
    assert scratch.files == len(needed_files(open_checkpoint(str(src / "checkpoint")), 11)) + len(
        list((src / "output" / "_spark_metadata").iterdir()))


@pytest.mark.parametrize("name", ["agg_window_rocksdb", "checkpoint_v2"])
def test_rocksdb_and_checkpoint_v2_copies_load_the_batch_state(tmp_path, name):
    ckpt = open_checkpoint(str(fixture_checkpoint(name)))
    batch, _ = rerun_batch(ckpt)
    scratch = make_scratch(ckpt, batch, str(tmp_path / "scratch"))
    copy = open_checkpoint(scratch.checkpoint)
    assert copy.last_committed_batch == batch - 1
    assert all(copy.operators[0].partitions[i].can_load(batch, None if name != "checkpoint_v2" else
               copy.unique_ids_for(0, copy.operators[0].partitions[i].partition, 0))
               for i in range(len(copy.operators[0].partitions)))
    later = [f for op in ckpt.operators for p in op.partitions for f in p.files if f.version > batch]
    assert later and not [f for op in copy.operators for p in op.partitions for f in p.files if f.version > batch]


def test_a_transform_with_state_copy_names_its_own_schema_files(tmp_path):
    ckpt = open_checkpoint(str(fixture_checkpoint("tws_pandas")))
    assert foreign_references(ckpt)  # the fixture names schema files where it was generated
    scratch = make_scratch(ckpt, rerun_batch(ckpt)[0], str(tmp_path / "scratch"))
    assert foreign_references(open_checkpoint(scratch.checkpoint)) == []


def test_the_sink_format_comes_from_its_data_files():
    assert sink_format(open_fs(str(FIXTURES / "agg_window_hdfs" / "output"))) == "parquet"
    assert sink_format(open_fs(str(FIXTURES / "chained_aggs" / "output"))) == "json"


def test_a_source_that_cannot_be_read_again_needs_its_rows(tmp_path):
    """Before Spark starts: the Python data source's offsets name no files, so the batch's input must be given."""
    from conftest import run_cli

    module = tmp_path / "new_code.py"
    module.write_text("def new_query(spark):\n    raise AssertionError('not called before the input is known')\n")
    ckpt = fixture_checkpoint("python_source")
    out = run_cli("compat", ckpt, "--query", f"{module}:new_query", exit_code=2).output
    assert out == ("Error: offsets/2: source 0 (unknown) is not replayable: an unknown offset ({\"files\": 10}): wmcheck "
                   "cannot rebuild this source's input; compat re-runs batch 2 from its recorded input (hint: pass --input 0=DIR: a directory "
                   "of the rows it read in batch 2 (wmcheck replay CKPT --from 2 --to 2 --source 0 --output DIR writes a "
                   "Kafka source's))\n")
    (tmp_path / "empty").mkdir()
    out = run_cli("compat", ckpt, "--query", f"{module}:new_query", "--input", f"0={tmp_path / 'empty'}", exit_code=2).output
    assert out.startswith(f"Error: --input 0={tmp_path / 'empty'}: no data files there")
    out = run_cli("compat", ckpt, "--query", f"{module}:new_query", "--input", f"3={tmp_path}", exit_code=2).output
    assert out.startswith("Error: --input names source 3, which batch 2 does not have")


def test_the_rows_given_for_a_source_are_its_batchs_files(tmp_path):
    """--input DIR: its data files, or those of DIR/batch_id=N as `wmcheck replay --output DIR` writes them;
    Spark's and hidden files are not data; one format only."""
    from wmcheck.cli.flags import cli_spelling
    from wmcheck.statestore.spark.compat.substitute import batch_rows

    for batch in (2, 3):
        (tmp_path / "replayed" / f"batch_id={batch}").mkdir(parents=True)
        (tmp_path / "replayed" / f"batch_id={batch}" / f"part-0000{batch}.snappy.parquet").write_bytes(b"PAR1")
    (tmp_path / "replayed" / "_SUCCESS").write_bytes(b"")
    rows = batch_rows("0", str(tmp_path / "replayed"), 2)
    assert (rows.source_id, rows.format, rows.location) == ("0", "parquet", str(tmp_path / "replayed" / "batch_id=2"))
    assert [uri for uri, _ in rows.files] == [f"file://{tmp_path}/replayed/batch_id=2/part-00002.snappy.parquet"]
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for name in ("a.json", "b.csv", ".a.json.crc", "_spark_metadata"):
        (mixed / name).write_text("{}")
    with pytest.raises(CheckpointError) as err:
        batch_rows("1", str(mixed), 2)
    assert err.value.text(cli_spelling) == (f"--input 1={mixed}: expected files of one format (avro, csv, json, orc, "
                                            "parquet, txt), found csv, json")


def test_a_compaction_batchs_own_sink_files_are_its_compact_file_less_the_batches_before():
    """compaction's sink log holds 8.compact, 9, 10, 11.compact and 12 (the files before 8 purged): batch 11's own file
    is what 11.compact lists beyond 8.compact, 9 and 10; batch 8's cannot be told (the files before it are gone);
    agg_window_hdfs's 9.compact, its first, less files 0..8."""
    from wmcheck.checkpoint.logs.file_logs import parse_file_log
    from wmcheck.statestore.spark.compat.compare import sink_batch_files

    sink = open_fs(str(FIXTURES / "compaction" / "output"))
    log = FIXTURES / "compaction" / "output" / "_spark_metadata"
    listed = {n: {e.path for e in parse_file_log((log / n).read_bytes(), n).entries} for n in ("8.compact", "9", "10", "11.compact")}
    def names(paths):
        return sorted(p.rsplit("/", 1)[-1] for p in paths)

    (own,) = listed["11.compact"] - listed["8.compact"] - listed["9"] - listed["10"]
    assert names(sink_batch_files(sink, 11) or []) == names([own]) == [
        "part-00000-6decc62d-cc66-4abb-b678-770b716eee57-c000.snappy.parquet"]
    assert sink_batch_files(sink, 8) is None and sink_batch_files(sink, 7) is None
    assert names(sink_batch_files(sink, 10) or []) == names(listed["10"])
    hdfs = open_fs(str(FIXTURES / "agg_window_hdfs" / "output"))
    assert names(sink_batch_files(hdfs, 9) or []) == ["part-00000-079e139f-de77-47d2-a2cd-97c7259b3806-c000.snappy.parquet"]
