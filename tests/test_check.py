"""``wmcheck check``: every check on a real fixture broken the way the check describes, in every format, and each printed fix
executed (the cases: tests/check_breaks.py)."""
from __future__ import annotations

import csv
import io
import json
import os
import shlex
from xml.etree import ElementTree as ET

import pytest

from wmcheck.checkpoint import repair
from wmcheck.checkpoint.checks.definition import Instruction
from wmcheck.checkpoint.errors import CheckpointError
from wmcheck.checkpoint.logs.offsets import parse_offsets
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.validate import CHECKS, check_checkpoint

from check_breaks import (
    BREAKS,
    Break,
    b_unparseable,
    broken_copy,
    fixes,
    messages,
)
from conftest import fixture_facts, run_cli, sink_at_home


def test_every_check_has_a_breaking_case():
    """(WM037's cases need another user or a read-only mount: tests/test_access.py; WM081-WM084's a live broker and
    the topic broken there: tests/test_kafka_check.py; WM085's Spark's own async progress tracking:
    tests/test_kafka_fixture_restarts.py; WM086 and WM087's a Delta table broken with deltalake: tests/test_delta_check.py;
    WM088's partitions added on the live broker: tests/test_kafka_check.py; WM089-WM091's a Delta source table broken
    with deltalake: tests/test_delta_source_check.py.)"""
    assert {b.code for b in BREAKS.values()} == set(CHECKS) - {"WM000", "WM037", "WM081", "WM082", "WM083", "WM084",
                                                               "WM085", "WM086", "WM087", "WM088", "WM089", "WM090",
                                                               "WM091"}


@pytest.fixture(params=sorted(BREAKS))
def broken(request, copy_fixture):
    """A broken copy of a fixture: (case, root, expected path, extra CLI args)."""
    case = BREAKS[request.param]
    root = copy_fixture(case.fixture)
    if case.sink:
        sink_at_home(root, case.fixture)
    path = case.apply(root, fixture_facts(case.fixture))
    args = ["--file-sink", str(root / "output")] if case.sink else []
    return case, root, path, args


def test_library_reports_the_break(broken):
    case, root, path, args = broken
    findings = check_checkpoint(open_checkpoint(str(root / "checkpoint")), str(root / "output") if case.sink else None)
    assert sorted({f.code for f in findings}) == sorted({case.code, *case.also}), findings
    mine = [f for f in findings if f.code == case.code]
    assert [(f.severity, f.path) for f in mine] == [(CHECKS[case.code].severity, path)], mine
    assert all(f.checkpoint == open_checkpoint(str(root / "checkpoint")).location for f in findings)


def expected_exit(case: Break, strict: bool = False) -> int:
    return 1 if CHECKS[case.code].severity == "error" or strict else 0


def test_json_and_csv(broken):
    case, root, path, args = broken
    ckpt = str(root / "checkpoint")
    rows = json.loads(run_cli("check", ckpt, *args, "--format", "json", exit_code=expected_exit(case)).stdout)
    assert all(list(r) == ["code", "severity", "checkpoint", "path", "message", "fix"] for r in rows)
    assert all(list(r["fix"]) == ["kind", "text", "request"] for r in rows)
    mine = [r for r in rows if r["code"] == case.code]
    assert [(r["severity"], r["checkpoint"], r["path"]) for r in mine] == [(CHECKS[case.code].severity, ckpt, path)]
    for row in rows:  # a command line starts with its kind and names the checkpoint; an instruction has no request
        fix = row["fix"]
        assert fix["text"].startswith(f"wmcheck {fix['kind']} {ckpt}") if fix["request"] is not None else fix["kind"] == "instruction"
    table = list(csv.DictReader(io.StringIO(run_cli("check", ckpt, *args, "--format", "csv", exit_code=expected_exit(case)).stdout)))
    assert table == [{**{k: str(v) for k, v in r.items()}, "fix": fix_line(r["fix"])} for r in rows]


def fix_line(fix: dict) -> str:
    """A fix of check's JSON as the other formats print it."""
    return fix["text"] if fix["request"] is not None else f"by hand: {fix['text']}"


def test_every_fix_check_prints_is_a_command_that_repairs_its_break(broken):
    """Each command line check prints as a fix, run as printed (with --execute), changes the checkpoint and takes
    the finding away; the restart oracle proves with Spark that it makes the restart work."""
    case, root, path, args = broken
    ckpt = str(root / "checkpoint")
    rows = json.loads(run_cli("check", ckpt, *args, "--format", "json", exit_code=expected_exit(case)).stdout)
    fix = next(r["fix"] for r in rows if r["code"] == case.code)
    if fix["request"] is None:
        return
    words = shlex.split(fix["text"])
    doc = json.loads(run_cli(*words[1:], *([] if fix["kind"] == "undo" else ["--execute"]), "--idle", "0",
                             "--format", "json").stdout)
    assert doc["restored"] if fix["kind"] == "undo" else doc["steps"], doc  # not a no-op
    after = json.loads(run_cli("check", ckpt, *args, "--format", "json", exit_code=None).stdout)
    assert not [r for r in after if r["code"] == case.code], after


def test_table_and_strict(broken):
    case, root, path, args = broken
    ckpt = str(root / "checkpoint")
    out = run_cli("check", ckpt, *args, exit_code=expected_exit(case)).stdout
    line = next(line for line in out.splitlines() if f" {case.code} " in line)
    assert line.split()[:3] == [CHECKS[case.code].severity, case.code, path]
    status = "FAIL" if expected_exit(case) else "ok"
    assert out.splitlines()[-1].startswith(f"{ckpt}: {status}: ")
    run_cli("check", ckpt, *args, "--strict", "--format", "json", exit_code=expected_exit(case, strict=True))
    run_cli("check", ckpt, *args, "--ignore", ",".join([case.code, *case.also]), "--strict", exit_code=0)


def test_github_annotations(broken):
    case, root, path, args = broken
    ckpt = str(root / "checkpoint")
    out = run_cli("check", ckpt, *args, "--format", "github", exit_code=expected_exit(case)).stdout.splitlines()
    level = "error" if CHECKS[case.code].severity == "error" else "warning"
    file = os.path.normpath(os.path.join(ckpt, path)).replace(",", "%2C").replace(":", "%3A")
    title = f"{case.code} {CHECKS[case.code].title}".replace(",", "%2C").replace(":", "%3A")
    prefix = f"::{level} file={file},title={title}::"
    assert sum(line.startswith(prefix) for line in out) == 1, out
    assert out[-1].startswith(f"{ckpt}: ")


def test_junit_xml(broken, tmp_path):
    case, root, path, args = broken
    ckpt = str(root / "checkpoint")
    report = tmp_path / "report.xml"
    run_cli("check", ckpt, *args, "--format", "junit", "--output", report, exit_code=expected_exit(case))
    suite = ET.parse(report).getroot().find("testsuite")
    assert suite.get("name") == ckpt
    cases = {c.get("name").split()[0]: c for c in suite.findall("testcase")}
    assert list(cases) == [c for c in CHECKS if c != "WM000"]
    assert int(suite.get("tests")) == len(cases)
    got = cases[case.code]
    if CHECKS[case.code].severity == "error":
        failure = got.find("failure")
        assert failure.get("type") == "error" and failure.get("message").startswith(f"{path}: ")
    else:
        assert got.find("failure") is None and got.find("system-out").text.startswith(f"warning: {path}: ")
    failed = {c for c, el in cases.items() if el.find("failure") is not None}
    assert failed == {c for c in [case.code, *case.also] if CHECKS[c].severity == "error"}
    assert int(suite.get("failures")) == len(failed)
    skipped = {c for c, el in cases.items() if el.find("skipped") is not None}
    assert skipped == (set() if case.sink else {c.code for c in CHECKS.values() if c.needs_sink})


# -- exact messages ----------------------------------------------------------------------------------------


def test_parse_error_message_is_the_parsers(copy_fixture):
    root = copy_fixture("agg_window_hdfs")
    last = fixture_facts("agg_window_hdfs")["last_batch"]
    b_unparseable(root, fixture_facts("agg_window_hdfs"))
    data = (root / "checkpoint" / "offsets" / str(last)).read_bytes()
    with pytest.raises(CheckpointError) as exc:
        parse_offsets(data, f"offsets/{last}")
    assert messages(root)["WM001"] == (f"line 2: {exc.value.message} (hint: {exc.value.hint}) (a file of the last batch: "
                                       f"rewinding to batch {last - 1} drops it with its checksum files, and Spark plans "
                                       f"batch {last} again)")
    assert fixes(root)["WM001"] == repair.RewindRequest(to_batch=last - 1)


def test_operator_metadata_naming_an_operator_spark_does_not_have_fails_the_restart(copy_fixture):
    """Spark compares the metadata's operator names with the query's exactly (restart probe: StateStoreSave fails
    with STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA; deleting the v1 file: the control run)."""
    root, _ = broken_copy(copy_fixture, "WM046-unknown-name")
    assert messages(root)["WM046"].startswith(
        "the operator metadata names operator 0 'StateStoreSave', a name Spark gives no operator (it writes "
        "StatefulStreamlineAggregate, applyInPandasWithState, dedupe, ")
    assert fixes(root)["WM046"] == Instruction(
        "while the query is stopped, delete state/0/_metadata/metadata with its checksum file: Spark writes it again "
        "from the query when it starts")
