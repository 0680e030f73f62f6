"""``wmcheck compat --baseline-query``: the batches a restart runs next (a new input file, and the no-data batch that
closes windows after it) run by the new code and by the old on two more scratch copies, their outputs compared,
against real restarts of both codes on copies of the fixture with the same new file."""
from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from compat_oracle import MODULE, _json_rows, digest

from wmcheck.checkpoint.batch_inputs import article
from wmcheck.checkpoint.fs import open_fs
from wmcheck.statestore.spark.compat.compare import read_files, sink_batch_files

from conftest import ROOT, run_cli
from restart_oracle import prepare

pytestmark = pytest.mark.spark
LAST, COMMITTED = 11, 12
"""agg_window_hdfs's last data batch (the one compat re-runs) and its last committed one (a no-data batch)."""
QUIET = 5
"""A batch of agg_window_hdfs that read a file and closed no window (its sink log lists one empty file)."""


def _code(tmp_path: Path, root: Path, case: str) -> str:
    module = tmp_path / f"{root.name}_{case}.py"
    module.write_text(MODULE.format(tests=str(ROOT / "tests"), name=case, input=str(root / "input"),
                                    checkpoint=str(root / "checkpoint"), output=str(root / "output")))
    return f"{module}:new_query"


def _restart(spark, tmp_path: Path, case: str, fixture: str = "agg_window_hdfs", fmt: str = "parquet",
             committed: int = COMMITTED) -> tuple[list[int], list[str], list[str]]:
    """A real restart of ``case``'s code on a copy of ``fixture`` with the one new file: the batches after its last
    committed one it ran, the rows its ``fmt`` file sink wrote in them and their columns."""
    from wmcheck.statestore.spark.user_code import load_callable

    root = prepare(fixture, tmp_path / f"restart_{case}", extra=1)
    writer = load_callable(_code(tmp_path, root, case), "query", "m:f")(spark)
    handle = writer.start()
    handle.awaitTermination(300)
    batches = sorted(int(p.name) for p in (root / "checkpoint" / "commits").iterdir() if p.name.isdigit() and int(p.name) > committed)
    sink = open_fs(str(root / "output"))
    files = [f for b in batches for f in sink_batch_files(sink, b) or []]
    df = read_files(spark, fmt, files, writer._df)
    return batches, _json_rows(df), df.columns


def test_a_projection_after_the_aggregation_shows_in_the_next_batches_as_a_real_restart_writes_them(spark, tmp_path):
    """add_projection (n_twice = n * 2) against the same code: the next batches (13 with the new file, 14 the no-data
    batch whose watermark closes the windows) write the rows of a real restart of each code, with n_twice only in the
    new code's."""
    root = prepare("agg_window_hdfs", tmp_path / "agg", extra=1)
    before = digest(root)
    new, old = _code(tmp_path, root, "add_projection"), _code(tmp_path, root, "same_code")
    doc = json.loads(run_cli("compat", root / "checkpoint", "--query", new, "--baseline-query", old, "--format", "json",
                             exit_code=1).stdout)
    following = doc["next"]
    new_batches, new_rows, new_columns = _restart(spark, tmp_path, "add_projection")
    old_batches, old_rows, old_columns = _restart(spark, tmp_path, "same_code")
    assert new_batches == old_batches == following["batches"] == [13, 14]
    output = following["output"]
    assert (output["old_rows"], output["new_rows"]) == (len(old_rows), len(new_rows))
    assert len(new_rows) > 0  # windows closed in the next batches
    assert (output["old_columns"], output["new_columns"]) == (old_columns, new_columns)
    assert new_columns == [*old_columns, "n_twice"]
    assert (output["only_old"], output["only_new"]) == (0, 0)  # on the columns both have
    common = {json.dumps({k: v for k, v in json.loads(r).items() if k != "n_twice"}, sort_keys=True) for r in new_rows}
    assert common == {json.dumps(json.loads(r), sort_keys=True) for r in old_rows}
    assert all(json.loads(r)["n_twice"] == 2 * json.loads(r)["n"] for r in new_rows)
    assert following["baseline"] == old and doc["exit_code"] == 1
    table = run_cli("compat", root / "checkpoint", "--query", new, "--baseline-query", old, exit_code=1).stdout.splitlines()
    assert (f"next batches:           batches 13..14, new code against the old ({old}): {len(old_rows)} row(s) with the "
            f"old code, {len(new_rows)} with the new; 0 only with the old, 0 only with the new (new columns: n_twice; "
            "rows compared on window, id, n, v_sum)") in table
    assert "output of the next batches (batches 13..14) against the old code's" in table[-1]
    suite = ET.fromstring(run_cli("compat", root / "checkpoint", "--query", new, "--baseline-query", old, "--format",
                                  "junit", exit_code=1).stdout).find("testsuite")
    assert suite is not None
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases["output of the next batches"].find("failure") is not None
    assert digest(root) == before


def test_a_renamed_aggregate_shows_in_the_next_batches_when_the_rerun_batch_writes_no_row(spark, tmp_path):
    """The count renamed n -> events (append mode) against the same code, re-running batch 5 (it closed no window:
    no row): the next batches (13 with the new file, 14 the no-data batch that closes windows) write the rows of real
    restarts of each code, the same windows, ids, counts and sums, under events instead of n."""
    root = prepare("agg_window_hdfs", tmp_path / "agg", extra=1)
    before = digest(root)
    new, old = _code(tmp_path, root, "rename_aggregate"), _code(tmp_path, root, "same_code")
    args = ("compat", root / "checkpoint", "--query", new, "--baseline-query", old, "--batch", QUIET)
    doc = json.loads(run_cli(*args, "--format", "json", exit_code=1).stdout)
    assert (doc["batch"], doc["output"]["new_rows"], doc["output"]["old_rows"]) == (QUIET, 0, 0)
    new_batches, new_rows, new_columns = _restart(spark, tmp_path, "rename_aggregate")
    old_batches, old_rows, old_columns = _restart(spark, tmp_path, "same_code")
    following = doc["next"]
    assert new_batches == old_batches == following["batches"] == [13, 14]
    output = following["output"]
    assert len(new_rows) == len(old_rows) > 0 and (output["old_rows"], output["new_rows"]) == (len(old_rows), len(new_rows))
    assert (output["old_columns"], output["new_columns"]) == (old_columns, new_columns)
    assert (old_columns, new_columns) == (["window", "id", "n", "v_sum"], ["window", "id", "events", "v_sum"])
    assert (output["only_old"], output["only_new"], output["changed_types"]) == (0, 0, [])
    renamed = sorted(json.dumps({("n" if k == "events" else k): v for k, v in json.loads(r).items()}, sort_keys=True)
                     for r in new_rows)
    assert renamed == sorted(json.dumps(json.loads(r), sort_keys=True) for r in old_rows)
    assert doc["exit_code"] == 1 and doc["changes"] is True
    summary = run_cli(*args, exit_code=1).stdout.splitlines()[-1]
    assert ("output of the next batches (batches 13..14) against the old code's: 0 row(s) only with the old code, 0 only "
            "with the new (new columns: events; dropped columns: n; rows compared on window, id, v_sum)") in summary
    assert summary.endswith("(exit 1)") and digest(root) == before


def test_the_same_code_as_its_baseline_changes_nothing(spark, tmp_path):
    root = prepare("agg_window_hdfs", tmp_path / "same", extra=1)
    code = _code(tmp_path, root, "same_code")
    lines = run_cli("compat", root / "checkpoint", "--query", code, "--baseline-query", code).stdout.splitlines()
    [shown] = [line for line in lines if line.startswith("next batches:")]
    assert shown.endswith("0 only with the old, 0 only with the new")
    assert lines[-1] == f"restarts: batch {LAST} gives the same output and state (exit 0)"


@pytest.mark.parametrize("body, raised", [
    ("def old_query(spark):\n    raise ValueError('no such table: orders')\n",
     " {spec} raised ValueError: no such table: orders (at {module}:2)"),
    ("import os\nEVENTS = os.environ['NO_SUCH_VARIABLE']\n",
     ": importing {module} raised KeyError: 'NO_SUCH_VARIABLE' (at {module}:2)"),
], ids=["function", "import"])
def test_the_old_codes_exception_is_one_line_naming_baseline_query(spark, tmp_path, body, raised):
    """The old code raising as it builds its query (in its function, or as its module is imported): one line naming
    --baseline-query (not --query), exit 2, before anything is copied or run; the checkpoint is only read."""
    root = prepare("agg_window_hdfs", tmp_path / "agg", extra=1)
    before = digest(root)
    module = tmp_path / "old_code.py"
    module.write_text(body)
    spec = f"{module}:old_query"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    args = ("compat", root / "checkpoint", "--query", _code(tmp_path, root, "same_code"), "--baseline-query", spec,
            "--scratch-dir", scratch)
    message = "--baseline-query" + raised.format(spec=spec, module=module)
    assert run_cli(*args, exit_code=2).output == f"Error: {message} (hint: --debug shows the traceback)\n"
    doc = json.loads(run_cli(*args, "--format", "json", exit_code=2).stdout)
    assert (doc["error"], doc["param"], doc["exit_code"]) == (message, "--baseline-query", 2)
    assert list(scratch.iterdir()) == [] and digest(root) == before


def test_new_files_given_with_next_input_are_what_the_next_batches_read_as_a_restart_reads_them(spark, tmp_path):
    """--next-input 0=DIR: the source directory holds no new file (a restart would run no batch), DIR the file the real
    restarts find in theirs; the next batches 13 and 14 read it and write the rows of those restarts, by each code."""
    from restart_oracle import add_input

    root = prepare("agg_window_hdfs", tmp_path / "agg", extra=0)
    before = digest(root)
    given = tmp_path / "new-files"
    given.mkdir()
    add_input(given, 0)  # the file prepare(extra=1) puts in the restarts' source directory, with its mtime
    new, old = _code(tmp_path, root, "add_projection"), _code(tmp_path, root, "same_code")
    args = ("compat", root / "checkpoint", "--query", new, "--baseline-query", old, "--format", "json")
    unfed = json.loads(run_cli(*args, exit_code=1).stdout)["next"]
    assert (unfed["batches"], unfed["output"], unfed["note"]) == ([], None, "no new input: a restart runs no batch")
    following = json.loads(run_cli(*args, "--next-input", f"0={given}", exit_code=1).stdout)["next"]
    new_batches, new_rows, new_columns = _restart(spark, tmp_path, "add_projection")
    old_batches, old_rows, old_columns = _restart(spark, tmp_path, "same_code")
    assert new_batches == old_batches == following["batches"] == [13, 14]
    output = following["output"]
    assert len(new_rows) > 0 and (output["old_rows"], output["new_rows"]) == (len(old_rows), len(new_rows))
    assert (output["old_columns"], output["new_columns"]) == (old_columns, new_columns)
    assert (output["only_old"], output["only_new"]) == (0, 0)
    assert digest(root) == before and sorted(p.name for p in given.iterdir()) == ["zz-extra-0.json"]


def test_next_input_after_a_last_batch_that_read_files_reads_them_again_as_a_restart_does(spark, tmp_path):
    """stalled_event_time's last committed batch read a file, which a restart reads once more under the source's path:
    with --next-input (the source directory holds no new file) that file goes along into the directory the source
    reads, and the next batches run and write the rows of real restarts of the code with the new file."""
    from restart_oracle import add_input

    root = prepare("stalled_event_time", tmp_path / "stalled", extra=0)
    given = tmp_path / "new-files"
    given.mkdir()
    add_input(given, 0)
    code = _code(tmp_path, root, "quiet_json_batch_same_code")
    doc = json.loads(run_cli("compat", root / "checkpoint", "--query", code, "--baseline-query", code, "--next-input",
                             f"0={given}", "--format", "json").stdout)
    committed = int(max(p.name for p in (root / "checkpoint" / "commits").iterdir() if p.name.isdigit()))
    batches, rows, columns = _restart(spark, tmp_path, "quiet_json_batch_same_code", "stalled_event_time", "json",
                                      committed)
    assert batches and doc["next"]["batches"] == batches and doc["next"]["note"] is None
    output = doc["next"]["output"]
    assert (output["old_rows"], output["new_rows"], output["only_old"], output["only_new"]) == (len(rows), len(rows), 0, 0)
    assert output["new_columns"] == columns


def test_the_next_batches_of_a_source_compat_cannot_feed_are_not_run_and_every_format_says_why(spark, tmp_path):
    """python_source (a Python data source, its batch's rows given with --input): a restart would read the source's
    live input (here a new file), which compat cannot give both codes, so the next batches are not run, and the
    report says so in every format (JUnit: the fifth case skipped)."""
    import shutil

    root = prepare("python_source", tmp_path / "pysrc", extra=1)
    before = digest(root)
    rows = tmp_path / "rows"
    rows.mkdir()
    for path in sorted((root / "input").glob("run2-*.json")):
        shutil.copy(path, rows)
    code = _code(tmp_path, root, "python_source_given_input")
    args = ("compat", root / "checkpoint", "--query", code, "--baseline-query", code, "--input", f"0={rows}")
    doc = json.loads(run_cli(*args, "--format", "json").stdout)
    [kind] = [s["kind"] for s in doc["sources"]]
    reason = f"compat can give the next batches a file source's files only; {article(kind)} source would read its live input"
    assert doc["next"] == {"baseline": code, "batches": [], "output": None, "note": f"not run: source 0 ({kind}): {reason}",
                           "not_run": [{"source_id": "0", "kind": kind, "reason": reason}]}
    assert doc["exit_code"] == 0
    said = f"the next batches were not run: source 0 ({kind}): {reason}"
    lines = run_cli(*args).stdout.splitlines()
    assert f"next batches:           none, new code against the old ({code}); not run: source 0 ({kind}): {reason}" in lines
    assert lines[-1] == f"restarts: batch {doc['batch']} gives the same output and state; {said} (exit 0)"
    assert said in run_cli(*args, "--format", "github").stdout.splitlines()[-1]
    suite = ET.fromstring(run_cli(*args, "--format", "junit").stdout).find("testsuite")
    assert suite is not None
    skipped = {c.get("name"): c.find("skipped") for c in suite.iter("testcase")}["output of the next batches"]
    assert skipped is not None and skipped.get("message") == f"not run: source 0 ({kind}): {reason}"
    assert digest(root) == before


FOREACH = """import sys
sys.path[:0] = [{tests!r}]
from compat_cases import QUERIES, later_session_timeout

def query(spark):
    return {fn}(spark, {input!r}, {checkpoint!r}, {output!r})
"""
TIMEOUT_COMMITTED = 8
"""pandas_state_timeout's last committed batch."""


def _foreach_code(tmp_path: Path, root: Path, fn: str) -> str:
    module = tmp_path / f"{root.name}_{fn.replace('.', '_')}.py"
    module.write_text(FOREACH.format(tests=str(ROOT / "tests"), fn=fn, input=str(root / "input"),
                                     checkpoint=str(root / "checkpoint"), output=str(root / "output")))
    return f"{module}:query"


def _foreach_restart(spark, tmp_path: Path, fn: str) -> tuple[list[int], list[str]]:
    """A real restart of pandas_state_timeout by ``fn`` with one new file: the batches after 8 its foreachBatch
    function wrote, and their rows."""
    from compat_oracle import batch_file_rows

    from wmcheck.statestore.spark.user_code import load_callable

    root = prepare("pandas_state_timeout", tmp_path / f"restart_{fn.replace('.', '_')}", extra=1)
    handle = load_callable(_foreach_code(tmp_path, root, fn), "query", "m:f")(spark).start()
    handle.awaitTermination(300)
    batches = sorted(int(p.name) for p in (root / "checkpoint" / "commits").iterdir()
                     if p.name.isdigit() and int(p.name) > TIMEOUT_COMMITTED)
    return batches, [row for b in batches for row in batch_file_rows(root / "output", b) or []]


def test_the_next_batches_of_a_foreach_batch_sink_are_captured_and_compared_as_real_restarts_write_them(spark, tmp_path):
    """pandas_state_timeout (applyInPandasWithState, a foreachBatch sink) with sessions timing out 20 s after their
    last row instead of 10 s: the next batches' rows, captured (the user's function is not called), are those the
    real restarts' foreachBatch functions write, by each code, and differ where the timeout does."""
    from collections import Counter

    root = prepare("pandas_state_timeout", tmp_path / "timeout", extra=1)
    before = digest(root)
    new = _foreach_code(tmp_path, root, "later_session_timeout")
    old = _foreach_code(tmp_path, root, "QUERIES.pandas_state_timeout")
    doc = json.loads(run_cli("compat", root / "checkpoint", "--query", new, "--baseline-query", old, "--format", "json",
                             exit_code=1).stdout)
    new_batches, new_rows = _foreach_restart(spark, tmp_path, "later_session_timeout")
    old_batches, old_rows = _foreach_restart(spark, tmp_path, "QUERIES.pandas_state_timeout")
    following = doc["next"]
    assert following["batches"] == new_batches and following["note"] == (
        None if new_batches == old_batches else f"the old code ran batches {', '.join(map(str, old_batches))}")
    output = following["output"]
    assert output["sink"] == "captured" and len(new_rows) > 0
    assert (output["old_rows"], output["new_rows"]) == (len(old_rows), len(new_rows))
    only_old = sum((Counter(old_rows) - Counter(new_rows)).values())
    only_new = sum((Counter(new_rows) - Counter(old_rows)).values())
    assert (output["only_old"], output["only_new"]) == (only_old, only_new) and only_old + only_new > 0
    assert following["not_run"] == [] and digest(root) == before  # the user's foreachBatch wrote no file
