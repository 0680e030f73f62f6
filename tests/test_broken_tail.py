"""A broken tail: rewind over empty or unparseable files after the target (removing their sidecars and the
orphaned sidecars of the batches it drops), show over a broken middle offsets file, and check's one
recommended repair when findings print different fixes. Spark's side of each is in test_restart_oracle.py."""
from __future__ import annotations

import json
import shutil

import pytest

from conftest import run_cli, sink_at_home

NAME = "agg_window_hdfs"


@pytest.fixture
def root(copy_fixture):
    return sink_at_home(copy_fixture(NAME), NAME)


@pytest.mark.parametrize("content", [b"", b"v1\n{\"batchWatermarkMs\":1", b"garbage\n"])
def test_rewind_drops_a_broken_last_offsets_file_with_its_sidecar(root, content):
    ckpt = root / "checkpoint"
    (ckpt / "offsets" / "12").write_bytes(content)
    assert json.loads(run_cli("check", ckpt, "--select", "WM001", "--format", "json", exit_code=1).stdout)[0]["path"] == "offsets/12"
    run_cli("rewind", ckpt, "--to-batch", "11", "--file-sink", root / "output", "--execute", "--idle", "0")
    assert not (ckpt / "offsets" / "12").exists() and not (ckpt / "offsets" / ".12.crc").exists()
    assert ": ok: 0 error(s), 0 warning(s) from " in run_cli("check", ckpt, "--file-sink", root / "output", "--strict").stdout
    assert json.loads(run_cli("show", ckpt, "--format", "json").stdout)["last_committed_batch"] == 11


def test_rewind_removes_orphaned_sidecars_of_the_batches_it_drops(root):
    ckpt = root / "checkpoint"
    (ckpt / "commits" / "12").unlink()  # deleted by hand: commits/.12.crc stays (WM029)
    (ckpt / "offsets" / "12").write_bytes(b"")
    rows = json.loads(run_cli("check", ckpt, "--format", "json", exit_code=1).stdout)
    assert {(r["code"], r["path"]) for r in rows} >= {("WM029", "commits/.12.crc"), ("WM001", "offsets/12")}
    doc = json.loads(run_cli("rewind", ckpt, "--to-batch", "11", "--execute", "--idle", "0", "--format", "json").stdout)
    assert {"commits/.12.crc", "offsets/12", "offsets/.12.crc"} <= {s["path"] for s in doc["steps"]}
    assert not (ckpt / "commits" / ".12.crc").exists()
    assert ": ok: 0 error(s), 0 warning(s) from " in run_cli("check", ckpt, "--strict").stdout


def test_rewind_removes_orphaned_sidecars_in_every_log_it_touches(root):
    """The last file of sources/0 deleted by hand (its sidecar left: the next file Spark writes there), an older
    orphan there, and one in the sink's log: check recommends the rewind that removes all three."""
    ckpt, sink = root / "checkpoint", root / "output"
    (ckpt / "sources" / "0" / "9.compact").unlink()
    shutil.copyfile(ckpt / "sources" / "0" / ".8.crc", ckpt / "sources" / "0" / ".10.crc")
    shutil.copyfile(sink / "_spark_metadata" / ".12.crc", sink / "_spark_metadata" / ".13.crc")
    rows = json.loads(run_cli("check", ckpt, "--file-sink", sink, "--format", "json", exit_code=1).stdout)
    assert {(r["code"], r["path"]) for r in rows} == {
        ("WM022", "sources/0/9"), ("WM029", "sources/0/.9.compact.crc"), ("WM010", "sources/0/.10.crc"),
        ("WM029", "../output/_spark_metadata/.13.crc")}
    out = run_cli("check", ckpt, "--file-sink", sink, exit_code=1).stdout.splitlines()
    assert out[-2] == f"recommended repair: wmcheck rewind {ckpt} --to-batch 10 --file-sink {sink}"
    run_cli("rewind", ckpt, "--to-batch", "10", "--file-sink", sink, "--execute", "--idle", "0")
    assert not [p for p in (ckpt / "sources" / "0" / ".9.compact.crc", ckpt / "sources" / "0" / ".10.crc",
                            sink / "_spark_metadata" / ".13.crc") if p.exists()]
    assert ": ok: 0 error(s), 0 warning(s) from " in run_cli("check", ckpt, "--file-sink", sink, "--strict").stdout


def test_show_summarises_over_a_broken_middle_offsets_file_with_checks_finding(root):
    ckpt = root / "checkpoint"
    (ckpt / "offsets" / "6").write_bytes(b"garbage\n")
    doc = json.loads(run_cli("show", ckpt, "--format", "json").stdout)
    assert (doc["last_batch"], doc["last_committed_batch"], doc["watermark_ms"]) == (12, 12, 1704067285000)
    assert doc["warnings"] == [] and [f["code"] for f in doc["findings"] if f["path"] == "offsets/6"] == ["WM055"]
    assert "WM055 offsets/6: " in run_cli("show", ckpt).stdout


def test_check_recommends_one_repair_when_fixes_differ(root):
    """offsets/11 missing (WM002: rewind to 10) and commits/11 without its offsets (WM004: rewind to 12):
    rewinding to 10 drops both, and is what the restart oracle proves."""
    ckpt = root / "checkpoint"
    (ckpt / "offsets" / "11").unlink()
    (ckpt / "offsets" / ".11.crc").unlink()
    out = run_cli("check", ckpt, "--file-sink", root / "output", exit_code=1).stdout.splitlines()
    assert {"WM002", "WM004"} <= {line.split()[1] for line in out if line.startswith("error ")}
    assert out[-2] == f"recommended repair: wmcheck rewind {ckpt} --to-batch 10 --file-sink {root / 'output'}"
    run_cli("rewind", ckpt, "--to-batch", "10", "--file-sink", root / "output", "--execute", "--idle", "0")
    assert ": ok: 0 error(s), 0 warning(s) from " in run_cli("check", ckpt, "--file-sink", root / "output").stdout


def test_undo_reports_the_state_it_left_as_show_reads_it(root):
    """A rewind applied under a query that kept running (it wrote offsets/9, commits/9 and a broken offsets/10),
    then undo --force: what undo reports is what show reads afterwards."""
    ckpt, original = root / "checkpoint", root.parent / "original"
    shutil.copytree(ckpt, original)
    run_cli("rewind", ckpt, "--to-batch", "8", "--execute", "--idle", "0")
    for log in ("offsets", "commits"):
        shutil.copyfile(original / log / "9", ckpt / log / "9")
    (ckpt / "offsets" / "10").write_text("v1\n")
    doc = json.loads(run_cli("undo", ckpt, "--force", "--idle", "0", "--format", "json").stdout)
    shown = json.loads(run_cli("show", ckpt, "--format", "json").stdout)
    assert (doc["last_batch"], doc["last_committed_batch"], doc["watermark_ms"]) == (
        shown["last_batch"], shown["last_committed_batch"], shown["watermark_ms"]) == (12, 12, 1704067285000)


def _crash_leftover(ckpt, content: bytes, committed: bool) -> None:
    """offsets/12 as a crash while Spark wrote it leaves it (empty or truncated); batch 12 committed or not."""
    (ckpt / "offsets" / "12").write_bytes(content)
    if not committed:
        (ckpt / "commits" / "12").unlink()
        (ckpt / "commits" / ".12.crc").unlink()


@pytest.mark.parametrize(("content", "committed", "state"), [
    (b"", True, "is empty"), (b"", False, "is empty"),
    (b'v1\n{"batchWatermarkMs":1704067285000,"batc', False, "does not parse (line 2: expected the batch metadata as JSON"),
])
def test_read_commands_summarise_over_a_broken_last_offsets_file(root, tmp_path, content, committed, state):
    """Spark fails to restart on it and, rewound to 11, plans batch 12 again (the restart oracle: WM001's
    empty-last-offsets and truncated-pending-offsets); show, batches, state and timeline show batches 0..11 with a
    warning that names that fix."""
    ckpt = root / "checkpoint"
    _crash_leftover(ckpt, content, committed)
    fix = "fix: wmcheck rewind CKPT --to-batch 11 removes it with the checksum files, and Spark plans batch 12 again"
    doc = json.loads(run_cli("show", ckpt, "--format", "json").stdout)
    assert (doc["last_batch"], doc["last_committed_batch"], doc["watermark_ms"]) == (12, 12 if committed else 11, 1704067285000)
    assert [s["offset"] for s in doc["sources"]] == ['{"logOffset":9}']
    assert doc["warnings"][0].startswith(f"offsets/12 {state}") and fix in doc["warnings"][0]
    shown = run_cli("show", ckpt).stdout
    assert fix in shown and "<" not in shown
    listed = run_cli("batches", ckpt, "--format", "json")
    rows = json.loads(listed.stdout)
    assert [r["batch"] for r in rows] == list(range(13)) and rows[11]["kind"] == "data"
    assert (rows[12]["kind"], rows[12]["committed"], rows[12]["batch_watermark_ms"]) == ("unreadable", committed, None)
    assert rows[12]["error"].startswith("offsets/12: ")
    assert listed.stderr.startswith(f"warning: offsets/12 {state}") and fix in listed.stderr
    summary = run_cli("state", ckpt, "--format", "json")
    assert json.loads(summary.stdout)["watermark_ms"] == 1704067285000 and fix in summary.stderr
    drawn = run_cli("timeline", ckpt, "--output", tmp_path / "t.svg", "--format", "json")
    assert json.loads(drawn.stdout)["batches"] == 12 and fix in drawn.stderr


def test_a_broken_first_and_only_offsets_file_has_no_rewind(tmp_path):
    from restart_oracle import FIXTURES

    ckpt = tmp_path / "checkpoint"
    shutil.copytree(FIXTURES / NAME / "checkpoint", ckpt)
    for log in ("offsets", "commits"):
        for path in (ckpt / log).iterdir():
            if path.name not in ("0", ".0.crc"):
                path.unlink()
    (ckpt / "offsets" / "0").write_bytes(b"")
    doc = json.loads(run_cli("show", ckpt, "--format", "json").stdout)
    assert doc["warnings"][0].startswith("offsets/0 is empty") and "start the query from a new checkpoint" in doc["warnings"][0]
    assert (doc["watermark_ms"], doc["sources"]) == (0, [])
