"""``wmcheck check`` on every fixture and on Spark's own golden checkpoints; options, exit codes, remote paths."""
from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from test_corpus import corpus_roots

from wmcheck.checkpoint.errors import NotACheckpointError
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.validate import CHECKS, check_checkpoint, check_location

from check_breaks import b_unloadable
from conftest import (
    FIXTURES,
    fixture_checkpoint,
    fixture_facts,
    fixture_names,
    names_own_schemas,
    restartable_checkpoint,
    run_cli,
    sink_at_home,
)

# Fixtures that keep what Spark itself left broken (tests/test_repartition_check.py checks them): a failed
# repartition (WM035, with or without the sink), a repartition without its sink log entry (WM036, with the sink)
# a watermark held back by an input that stopped receiving data (WM038) and operators after applyInPandasWithState,
# which passes no watermark on (WM042: without the event log, the checkpoint cannot tell whether a withWatermark after it
# gives them one again).
SPARK_LEFT_BROKEN = {"repartition_failed_hdfs": "WM035", "repartition_rocksdb": "WM036", "union_stall_min": "WM038",
                     "union_stall_min_spark35": "WM038", "fmgws_tws_agg": "WM042", "fmgws_then_agg": "WM042",
                     "fmgws_then_agg_spark35": "WM042"}
NAMES = fixture_names()
CLEAN = [n for n in NAMES if n not in ("repartition_failed_hdfs", "union_stall_min", "union_stall_min_spark35",
                                       "fmgws_tws_agg", "fmgws_then_agg", "fmgws_then_agg_spark35")]
SINK_CHECKS = sum(c.needs_sink for c in CHECKS.values())


def sink_of(name: str) -> Path | None:
    out = FIXTURES / name / "output"
    return out if (out / "_spark_metadata").is_dir() and name not in SPARK_LEFT_BROKEN else None


def with_own_sink(name: str, tmp_path: Path) -> tuple[Path, Path | None]:
    """(checkpoint, file sink) of a fixture as Spark can restart and read it here: with a file sink, a copy whose
    logs name its own files (they name where it was generated); else as ``restartable_checkpoint`` gives it."""
    if sink_of(name) is None:
        return restartable_checkpoint(name, tmp_path), None
    root = tmp_path / name
    shutil.copytree(FIXTURES / name, root)
    sink_at_home(root, name)
    return root / "checkpoint", root / "output"


@pytest.mark.parametrize("name", CLEAN)
def test_every_fixture_passes(name, tmp_path):
    ckpt, sink = with_own_sink(name, tmp_path)
    findings = check_location(str(ckpt), str(sink) if sink else None)
    assert findings == []
    args = ["--file-sink", sink] if sink else []
    out = run_cli("check", ckpt, *args, "--strict").stdout
    facts = fixture_facts(name)
    ran = len(CHECKS) - (0 if sink else SINK_CHECKS)  # WM000 too: the checkpoint was opened
    assert out == f"{ckpt}: ok: 0 error(s), 0 warning(s) from {ran} checks\n"
    assert facts["last_batch"] == open_checkpoint(str(ckpt)).last_batch


@pytest.mark.parametrize("name", sorted(SPARK_LEFT_BROKEN))
def test_fixtures_spark_left_broken_report_only_that(name, tmp_path):
    root = sink_at_home(Path(shutil.copytree(FIXTURES / name, tmp_path / name)), name)
    assert {f.code for f in check_location(str(root / "checkpoint"), str(root / "output"))} == {SPARK_LEFT_BROKEN[name]}


def test_all_fixtures_in_one_run_one_summary_line_each(tmp_path):
    paths = [restartable_checkpoint(n, tmp_path) for n in CLEAN]
    out = run_cli("check", *paths, "--strict", "--format", "github").stdout.splitlines()
    assert out == [f"{p}: ok: 0 error(s), 0 warning(s) from {len(CHECKS) - SINK_CHECKS} checks" for p in paths]
    assert json.loads(run_cli("check", *paths, "--format", "json").stdout) == []


def test_quoted_glob_is_expanded(tmp_path):
    for name in NAMES[:3]:
        shutil.copytree(fixture_checkpoint(name), tmp_path / name / "checkpoint")
    out = run_cli("check", str(tmp_path / "*" / "checkpoint"), "--format", "github").stdout.splitlines()
    assert [line.split(": ")[0] for line in out] == [str(tmp_path / n / "checkpoint") for n in NAMES[:3]]
    out = run_cli("check", str(tmp_path / "nothing*"), "--format", "github", exit_code=2).stdout.splitlines()
    assert out[-1] == f"{tmp_path / 'nothing*'}: cannot be read"


def test_inconsistent_corpus_checkpoint_reports_the_gap(corpus):
    root = corpus / "checkpoint-test-offsetId-commitId-inconsistent"
    rows = json.loads(run_cli("check", root, "--format", "json", exit_code=1).stdout)
    assert [(r["code"], r["severity"], r["path"]) for r in rows] == [("WM002", "error", "offsets/3")]
    assert rows[0]["message"].startswith("offsets/3 missing between batches 2 and 4")


def test_mixed_generation_corpus_checkpoints_report_conf_drift(corpus):
    """The corpus README: these offsets files come from an older run with another join state format. It matters to a
    join (join1, whose operators are unknown: its state files are not in the corpus) and to no deduplication or limit,
    which Spark restarts whatever the join state format is (WM044)."""
    base = corpus / "checkpoint-version-4.0.0-checkpoint-v2" / "rocksdb"
    got = {name: [(f.code, f.path) for f in check_location(str(base / name)) if f.code in ("WM015", "WM044")]
           for name in ("dedup", "join1", "join2", "limit")}
    assert got == {"dedup": [("WM044", "offsets/3")], "join1": [("WM015", "offsets/4")], "join2": [],
                   "limit": [("WM044", "offsets/1")]}


@pytest.mark.parametrize("root", corpus_roots() or ["(absent)"])
def test_every_corpus_checkpoint_is_checked_not_crashed(corpus, root):
    findings = check_location(str(corpus / root))
    assert "WM000" not in {f.code for f in findings}
    assert all(f.message and f.severity in ("error", "warning") for f in findings)


def test_unreadable_checkpoint_among_several_is_wm000_and_exit_2(tmp_path):
    good = fixture_checkpoint(NAMES[0])
    missing, empty = tmp_path / "missing", tmp_path / "empty"
    empty.mkdir()
    rows = json.loads(run_cli("check", good, missing, empty, "--format", "json", exit_code=2).stdout)
    assert [(r["code"], r["checkpoint"], r["path"]) for r in rows] == [("WM000", str(missing), ""), ("WM000", str(empty), "")]
    assert rows[0]["message"].startswith(f"checkpoint not found: {missing}")
    assert rows[1]["message"].startswith(f"not a Structured Streaming checkpoint: no offsets/, commits/ or metadata in {empty}")
    table = run_cli("check", good, missing, exit_code=2).stdout.splitlines()
    assert table[0].startswith(f"{good}: ok: ") and table[-1] == f"{missing}: cannot be read"
    xml = ET.fromstring(run_cli("check", good, missing, "--format", "junit", exit_code=2).stdout)
    suites = xml.findall("testsuite")
    assert [s.get("name") for s in suites] == [str(good), str(missing)]
    assert [(c.get("name"), c.find("error").get("type")) for c in suites[1].findall("testcase")] == [
        ("WM000 checkpoint cannot be opened", "WM000")]
    assert xml.get("errors") == "1" and xml.get("failures") == "0"


def test_usage_errors_exit_2(tmp_path):
    one, two = fixture_checkpoint(NAMES[0]), fixture_checkpoint(NAMES[1])
    result = run_cli("check", one, two, "--file-sink", tmp_path, exit_code=2)
    assert "--file-sink belongs to one checkpoint" in result.output
    result = run_cli("check", one, "--select", "WM002,WM999", exit_code=2)
    assert result.output.startswith("Error: unknown check code(s): WM999")
    result = run_cli("check", one, "--file-sink", tmp_path / "nope", exit_code=2)
    assert result.output.startswith(f"Error: file sink not found: {tmp_path / 'nope'}")
    result = run_cli("check", one, "--file-sink", tmp_path, exit_code=2)
    assert result.output.startswith(f"Error: no _spark_metadata/ in {tmp_path}: not the output directory of a file sink")
    run_cli("check", exit_code=2)


def test_select_ignore_and_output_file(copy_fixture, tmp_path):
    root = copy_fixture("agg_window_hdfs")
    b_unloadable(root, fixture_facts("agg_window_hdfs"))
    ckpt = root / "checkpoint"
    assert run_cli("check", ckpt, "--select", "wm016", "--format", "csv", exit_code=1).stdout.count("\nWM016,") == 1
    run_cli("check", ckpt, "--select", "WM002, WM003", exit_code=0)
    run_cli("check", ckpt, "--ignore", "WM016", exit_code=0)
    report = tmp_path / "out.xml"
    result = run_cli("check", ckpt, "--select", "WM016,WM017", "--format", "junit", "--output", report, exit_code=1)
    assert result.stdout == ""
    suite = ET.parse(report).getroot().find("testsuite")
    skipped = {c.get("name")[:5]: c.find("skipped").get("message") for c in suite.findall("testcase") if c.find("skipped") is not None}
    assert set(skipped) == set(CHECKS) - {"WM000", "WM016", "WM017"}
    assert skipped["WM002"] == "not selected (--select/--ignore)"
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == (str(len(CHECKS) - 1), "1", str(len(skipped)))


def test_remote_uri_finds_the_same(copy_fixture):
    root = copy_fixture("agg_window_hdfs")
    b_unloadable(root, fixture_facts("agg_window_hdfs"))
    local = check_location(str(root / "checkpoint"), str(root / "output"))
    uri = f"file://{root / 'checkpoint'}"
    remote = check_location(uri, f"file://{root / 'output'}")
    assert [(f.code, f.path, f.message) for f in remote] == [(f.code, f.path, f.message) for f in local]
    assert {f.checkpoint for f in remote} == {uri}
    out = run_cli("check", uri, "--format", "github", exit_code=1).stdout.splitlines()
    assert out[0].startswith("::error title=WM016 ")  # no file= for a remote checkpoint


@pytest.mark.parametrize("name", ["agg_window_hdfs", "checkpoint_v2", "compaction"])
def test_each_file_is_read_once(name, tmp_path):
    path, sink = with_own_sink(name, tmp_path)
    ckpt = open_checkpoint(str(path))
    reads: Counter[str] = Counter()
    read = ckpt.fs.read

    def counting(path: str) -> bytes:
        reads[path] += 1
        return read(path)

    ckpt.fs.read = counting
    assert check_checkpoint(ckpt) == []
    assert reads and max(reads.values()) == 1, reads.most_common(3)
    assert {"metadata", f"offsets/{ckpt.last_batch}", f"commits/{ckpt.last_batch}", ".metadata.crc"} <= set(reads)
    assert any(p.startswith("state/") and p.endswith(".crc") for p in reads)
    assert sink is None or check_checkpoint(ckpt, str(sink)) == []


def test_pending_batch_state_is_not_a_leftover(copy_fixture):
    """A batch that ran but crashed before its commit left state version last+1: Spark re-runs it, nothing to report."""
    root = copy_fixture("agg_window_hdfs")
    last = fixture_facts("agg_window_hdfs")["last_batch"]
    for p in (root / "checkpoint" / "commits").glob(f"*{last}*"):
        if p.name in (str(last), f".{last}.crc"):
            p.unlink()
    assert check_location(str(root / "checkpoint")) == []


def test_check_help_lists_formats():
    out = run_cli("check", "--help").stdout
    assert "table|json|csv|github|junit" in out.replace("[", "").replace("]", "").replace("\n", "")
    assert "--file-sink" in out and "--strict" in out and "--select" in out


def test_copy_of_every_fixture_without_sink_files_still_passes(tmp_path):
    """The checkpoint alone (no input, no output next to it) needs nothing outside it, but for the
    schema files transformWithState names where it was generated: a copy reports them until relocated."""
    for name in CLEAN:
        copy = tmp_path / name
        shutil.copytree(fixture_checkpoint(name), copy)
        if any(copy.glob("state/*/_metadata/v2/*")):
            found = check_location(str(copy))
            assert {f.code for f in found} in ({"WM027"}, {"WM028"}), found
            assert [f.path for f in found] == sorted(str(p.relative_to(copy)) for p in copy.glob("state/*/_metadata/v2/[0-9]*"))
            names_own_schemas(copy)
        assert check_location(str(copy)) == [], name


def test_times_in_messages_follow_tz(copy_fixture):
    from check_breaks import b_decreasing

    root = copy_fixture("agg_window_hdfs")
    b_decreasing(root, fixture_facts("agg_window_hdfs"))
    utc = json.loads(run_cli("check", root / "checkpoint", "--format", "json").stdout)[0]["message"]
    india = json.loads(run_cli("check", root / "checkpoint", "--tz", "Asia/Kolkata", "--format", "json").stdout)[0]["message"]
    assert "Z)" in utc and "+05:30)" in india and "Z)" not in india


def test_readme_lists_every_code_with_its_severity_and_title():
    readme = (FIXTURES.parent / "README.md").read_text()
    for check in CHECKS.values():
        assert f"| {check.code} | {check.severity} | {check.title} |" in readme, check.code


INSIDE = ["state", "offsets", "commits", "state/0/1", "sources/0"]


@pytest.mark.parametrize("inside", INSIDE)
def test_a_directory_inside_a_checkpoint_is_answered_with_the_checkpoint_in_every_format(inside, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    ckpt = fixture_checkpoint("agg_window_hdfs")
    where = ckpt / inside
    message = (f"not a Structured Streaming checkpoint: no offsets/, commits/ or metadata in {where} (hint: did you mean "
               f"{ckpt}? It is the checkpoint that {inside}/ belongs to)")
    fix = f"pass {ckpt}, the checkpoint's root (it holds offsets/ and commits/)"
    rows = json.loads(run_cli("check", where, "--format", "json", exit_code=2).stdout)
    assert rows == [{"code": "WM000", "severity": "error", "checkpoint": str(where), "path": "", "message": message,
                     "fix": {"kind": "instruction", "text": fix, "request": None}}]
    assert run_cli("check", where, "--format", "csv", exit_code=2).stdout == (
        f'code,severity,checkpoint,path,message,fix\nWM000,error,{where},,"{message}","by hand: {fix}"\n')
    assert run_cli("check", where, "--format", "github", exit_code=2).stdout == (
        f"::error file={where},title=WM000 checkpoint cannot be opened::{message}. Fix: by hand: {fix}\n"
        f"{where}: cannot be read\n")
    error = ET.fromstring(run_cli("check", where, "--format", "junit", exit_code=2).stdout).find("testsuite/testcase/error")
    assert (error.get("type"), error.get("message"), error.text) == ("WM000", message, f"{message}. Fix: by hand: {fix}")
    table = run_cli("check", where, exit_code=2).stdout.splitlines()
    assert [line.split("  ")[0] for line in table[2:]] == ["error", f"{where}: cannot be read"]
    assert table[2].split() == ["error", "WM000", *message.split(), "by", "hand:", *fix.split()]


def test_a_file_sink_output_or_its_log_is_answered_with_the_checkpoint_and_the_sink():
    out = fixture_checkpoint("agg_window_hdfs").parent / "output"
    for where in (out, out / "_spark_metadata"):
        [row] = json.loads(run_cli("check", where, "--format", "json", exit_code=2).stdout)
        assert row["message"] == (
            f"not a Structured Streaming checkpoint: no offsets/, commits/ or metadata in {where} (hint: {out} is the "
            f"output directory of a file sink: pass the query's checkpointLocation, and --file-sink {out} to check the "
            "sink against it)")
        assert row["fix"]["text"] == row["message"].split("(hint: ", 1)[1][:-1]  # the remedy of this cause
        assert run_cli("show", where, exit_code=2).output == f"Error: {row['message']}\n"
    with pytest.raises(NotACheckpointError) as info:
        open_checkpoint(str(out / "_spark_metadata"))
    assert info.value.suggested is None and f"file_sink={out} to check" in str(info.value)


def test_a_directory_outside_any_checkpoint_keeps_the_plain_hint(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    [row] = json.loads(run_cli("check", tmp_path / "a" / "b", "--format", "json", exit_code=2).stdout)
    assert row["message"].endswith("(hint: pass the directory given as checkpointLocation (it holds offsets/ and commits/))")
    assert row["fix"]["text"].startswith("pass the directory given as checkpointLocation")


def test_a_watermark_wmcheck_set_watermark_lowered_is_a_note_not_wm011(copy_fixture):
    """Right after a planned set-watermark check --strict passes, saying in a note that the lower watermark is the
    repair's; undone, nothing is said; the same change by hand stays WM011."""
    root = copy_fixture("agg_window_hdfs")
    ckpt = root / "checkpoint"
    run_cli("set-watermark", ckpt, "--watermark", "-1 minute", "--execute", "--idle", "0")
    backup = next((ckpt / "_wmcheck" / "backups").iterdir()).name
    done = run_cli("check", ckpt, "--strict")
    assert done.stdout == f"{ckpt}: ok: 0 error(s), 0 warning(s) from {len(CHECKS) - SINK_CHECKS} checks\n"
    assert done.stderr == (f"note: offsets/12: the watermark 1704067225000 (2024-01-01T00:00:25.000Z), below batch 11's, was "
                           f"set by wmcheck set-watermark (backup {backup}): an intended change, not WM011 (wmcheck undo "
                           "puts the old one back)\n")
    shutil.rmtree(ckpt / "_wmcheck")  # the same files, no record of wmcheck's: a change by hand
    assert [f["code"] for f in json.loads(run_cli("check", ckpt, "--strict", "--format", "json", exit_code=1).stdout)] == ["WM011"]
