"""``show``'s verdict is ``check``'s: the same checkpoint never gets two answers (whether and how Spark restarts,
which state it loads, which code a damaged file has), and ``show`` says it first."""
from __future__ import annotations

import json
import re

import pytest

from conftest import fixture_checkpoint, run_cli

NO_WATERMARK = ("checkpoint-version-2.1.0", "escaped-path-2.4.0/chk%252520%252525@%252523chk",
                "checkpoint-version-4.0.0-tws-unsaferow", "checkpoint-version-4.0.0/rocksdb/agg")


def show_json(ckpt) -> dict:
    return json.loads(run_cli("show", ckpt, "--format", "json").stdout)


@pytest.mark.parametrize("where", NO_WATERMARK)
def test_a_query_without_a_watermark_has_no_watermark_stall(corpus, where):
    """Every batch ran with watermark 0 (no withWatermark): nothing is stalled, in show's table and JSON alike."""
    ckpt = corpus / where
    assert show_json(ckpt)["watermark_stall"] is None
    assert re.search(r"^watermark stall: +none$", run_cli("show", ckpt).stdout, re.M)


def test_a_watermark_held_over_one_data_batch_is_no_stall(copy_fixture):
    """union_stall_min's watermark stays put from batch 5 on; kept up to batch 5 alone, that is one data batch."""
    ckpt = copy_fixture("union_stall_min") / "checkpoint"
    assert show_json(ckpt)["watermark_stall"]["batches"] == 6
    for batch in range(6, 11):
        (ckpt / "offsets" / str(batch)).unlink()
        (ckpt / "commits" / str(batch)).unlink()
    assert show_json(ckpt)["watermark_stall"] is None
    (ckpt / "commits" / "5").unlink()
    assert show_json(ckpt)["watermark_stall"] is None


def state_errors(findings: list[dict], operator_id: int) -> set[str]:
    own = f"state/{operator_id}"
    return {f["path"] for f in findings if f["severity"] == "error" and (f["path"] in ("state", own) or f["path"].startswith(own + "/"))}


def check_json(ckpt) -> list[dict]:
    return json.loads(run_cli("check", ckpt, "--no-content", "--format", "json", exit_code=None).stdout)


def as_check_has_it(doc: dict, found: list[dict]) -> None:
    """show's findings are check's (errors first), its verdict and each operator's next state version agree."""
    assert [(f["code"], f["severity"], f["path"]) for f in doc["findings"]] == sorted(
        ((f["code"], f["severity"], f["path"]) for f in found), key=lambda f: (f[1] != "error", f[0], f[2]))
    assert doc["verdict"]["restarts"] == (not any(f["severity"] == "error" for f in found))
    for op in doc["operators"]:
        assert (op["next_version"], op["next_version_loadable"]) == (doc["next_batch"], not state_errors(found, op["operator_id"]))


def remove(path) -> None:
    import shutil

    shutil.rmtree(path) if path.is_dir() else path.unlink()


@pytest.mark.parametrize(("damage", "code"), [
    (lambda c: remove(c / "state" / "0" / "1"), "WM018"),      # a partition's directory
    (lambda c: remove(c / "state" / "0"), "WM053"),            # every operator's state (state/ left empty)
    (lambda c: [remove(p) for p in (c / "state" / "0" / "2").glob("1[23].delta")], "WM016"),  # the versions it rebuilds from
    (lambda c: (c / "offsets" / "5").write_bytes(b"garbage\n"), "WM055"),  # a middle offsets file
    (lambda c: (c / "offsets" / "12").write_bytes(b'v1\n{"batchWatermarkMs":17040'), "WM001"),  # the last one, truncated
    (lambda c: (c / "commits" / "3").write_bytes(b""), "WM055"),  # a middle commit
])
def test_show_gives_checks_verdict_and_codes_for_every_damage(copy_fixture, damage, code):
    """The same damaged checkpoint: show names check's codes for the same files, says restart no exactly where check
    has an error, and an operator's next state version loadable exactly where check has no error about its state."""
    ckpt = copy_fixture("agg_window_hdfs") / "checkpoint"
    damage(ckpt)
    doc = json.loads(run_cli("show", ckpt, "--format", "json").stdout)
    found = check_json(ckpt)
    assert code in {f["code"] for f in found}
    as_check_has_it(doc, found)


def test_show_of_a_missing_partition_says_first_that_spark_fails(copy_fixture):
    """Issue 38's case: state/0/1 removed; check's WM018 is show's first lines and its operator row (13 no)."""
    ckpt = copy_fixture("agg_window_hdfs") / "checkpoint"
    remove(ckpt / "state" / "0" / "1")
    lines = run_cli("show", ckpt).stdout.splitlines()
    assert lines[:2] == [
        "restarts:                   no: 1 error makes Spark fail, lose data or misbehave on restart (their fixes: wmcheck check)",
        "worst finding:              error WM018 state/0/1: 1 state directory of operator 0 missing (state/0/1); it has 3 "
        "partitions (numPartitions in its operator metadata): Spark fails to load state version 13 there"]
    assert re.search(r"^0 +stateStoreSave +default +3 +1 +13 +\d+ +0 +26 +0 +0 +13 +no$", "\n".join(lines), re.M)


def test_the_next_state_version_is_the_next_batchs_when_nothing_is_committed(corpus):
    """Spark 4.0's rocksdb/agg: no commits/, offsets 0..3, no state files: Spark re-runs batch 3 and loads state
    version 3, which is not there (check: WM018), not version 0."""
    doc = json.loads(run_cli("show", corpus / "checkpoint-version-4.0.0" / "rocksdb" / "agg", "--format", "json").stdout)
    assert (doc["last_committed_batch"], doc["next_batch"]) == (None, 3)
    assert [(op["next_version"], op["next_version_loadable"]) for op in doc["operators"]] == [(3, False)]
    assert (doc["verdict"]["restarts"], doc["verdict"]["worst"]["code"]) == (False, "WM018")


def test_a_truncated_last_offsets_file_comes_first_and_the_header_says_what_it_describes(copy_fixture):
    ckpt = copy_fixture("agg_window_hdfs") / "checkpoint"
    (ckpt / "offsets" / "12").write_bytes(b'v1\n{"batchWatermarkMs":17040')
    lines = run_cli("show", ckpt).stdout.splitlines()
    assert lines[0] == "restarts:                   no: 1 error makes Spark fail, lose data or misbehave on restart (their fixes: wmcheck check)"
    assert lines[1].startswith("worst finding:              error WM001 offsets/12: line 2: expected the batch metadata as JSON")
    assert lines[2].startswith("warning:                    offsets/12 does not parse (line 2: ") and lines[2].endswith(
        "(shown here: the checkpoint up to batch 11)")
    assert "batches:                    0..12 (offsets/12 broken, see the warning: the rest describes batch 11)" in lines


def test_show_leads_with_the_verdict_of_a_clean_checkpoint():
    lines = run_cli("show", fixture_checkpoint("agg_window_hdfs")).stdout.splitlines()
    assert lines[:3] == [
        "restarts:                   yes: Spark runs batch 13 next, with watermark 1704067285000 (2024-01-01T00:01:25.000Z); "
        "state file contents not decoded (wmcheck check decodes them)",
        "worst finding:              none",
        "query id:                   c796209a-1aef-4a7c-8c2d-a29d62cc1cf8"]
    assert "watermark:                  1704067285000 (2024-01-01T00:01:25.000Z)" in lines


def test_show_imports_neither_pyspark_nor_matplotlib_nor_state_decoders():
    import subprocess
    import sys

    code = ("import sys; from wmcheck.cli.main import cli\n"
            f"try:\n    cli(['show', {str(fixture_checkpoint('agg_window_hdfs'))!r}])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('pyspark', 'matplotlib', 'pyarrow', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_the_readmes_show_example_is_what_show_prints():
    """The README's first example, line for line (the checkpoint's location is where the repository is)."""
    from conftest import ROOT

    readme = (ROOT / "README.md").read_text()
    command = "$ wmcheck show fixtures/agg_window_hdfs/checkpoint\n"
    example = readme.split(command, 1)[1].split("```", 1)[0].splitlines()
    printed = [line.rstrip() for line in run_cli("show", fixture_checkpoint("agg_window_hdfs")).stdout.splitlines()]
    assert [line for line in example if not line.startswith("location:")] == \
        [line for line in printed if not line.startswith("location:")]
    assert re.search(r"^watermark: *1704067285000 ", "\n".join(example), re.M)  # what .ci/run looks for


MIDDLE_HINT = ("Spark does not read it on restart (only the last offsets files and the newest commit), but rewinds to this "
               "batch and replays of it need it: restore it from a backup")


@pytest.mark.parametrize(("path", "content", "hint"), [
    ("offsets/3", b"garbage\n", MIDDLE_HINT),
    ("commits/2", b"", MIDDLE_HINT),
    ("commits/5", b"v1\n{", MIDDLE_HINT),
    ("commits/12", b"", "an empty commit file is left by a crash while writing; delete it so Spark re-runs the batch"),
])
def test_a_damaged_log_file_is_read_around_by_one_rule_with_a_hint_true_where_it_is(copy_fixture, tmp_path, path, content, hint):
    """Any damaged offsets or commit file: batches marks its row unreadable (exit 0) with a hint that fits its place
    (a file Spark does not read on restart is not to be deleted), the other read commands read around it, and
    check's WM055 for a middle file says only what its place means."""
    ckpt = copy_fixture("agg_window_hdfs") / "checkpoint"
    (ckpt / path).write_bytes(content)
    batch = int(path.split("/")[1])
    rows = json.loads(run_cli("batches", ckpt, "--format", "json").stdout)
    assert [r["batch"] for r in rows if r["kind"] == "unreadable"] == [batch]
    assert rows[batch]["committed"] and rows[batch]["error"].startswith(f"{path}: ") and rows[batch]["error"].endswith(f"(hint: {hint})")
    for command in (["show"], ["state"], ["timeline", "--output", str(tmp_path / "t.svg")]):
        run_cli(command[0], ckpt, *command[1:])
    found = [f for f in check_json(ckpt) if f["path"] == path and f["code"] in ("WM001", "WM055")]
    assert [f["code"] for f in found] == ["WM055" if hint == MIDDLE_HINT else "WM001"]
    assert "delete it" not in found[0]["message"] or hint != MIDDLE_HINT


def _sinkless_breaks() -> list[str]:
    from check_breaks import BREAKS

    return sorted(key for key, case in BREAKS.items() if not case.sink)


@pytest.mark.parametrize("key", _sinkless_breaks())
def test_show_and_check_agree_on_every_breaking_case(copy_fixture, key):
    """The class of show-against-check disagreements: every case that breaks a checkpoint for check (the sink's
    cases aside: show does not read a sink) gets from show the findings check reports without decoding state
    contents, its verdict and each operator's next state version; where check's full read finds more, show's first
    line says it did not decode the contents."""
    from check_breaks import broken_copy

    root, _ = broken_copy(copy_fixture, key)
    ckpt = root / "checkpoint"
    shown = run_cli("show", ckpt, "--format", "json", exit_code=None)
    if shown.exit_code == 2:  # not readable as a checkpoint at all: one line, as check's WM000 says
        assert json.loads(run_cli("check", ckpt, "--format", "json", exit_code=None).stdout)[0]["code"] == "WM000"
        return
    doc = json.loads(shown.stdout)
    as_check_has_it(doc, check_json(ckpt))
    full = json.loads(run_cli("check", ckpt, "--format", "json", exit_code=None).stdout)
    if any(f["severity"] == "error" for f in full) and doc["verdict"]["restarts"]:
        assert "state file contents not decoded" in run_cli("show", ckpt).stdout.splitlines()[0]
