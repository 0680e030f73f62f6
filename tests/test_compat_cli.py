"""``wmcheck compat`` on the command line: every exit code (0 the same, 1 changes, 2 refused or unusable input)
and every format, with real Spark (the session of the test run, which the command reuses), and the user's own
errors as one line."""
from __future__ import annotations

import json
import traceback
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from compat_oracle import MODULE, digest

from wmcheck.checkpoint.errors import CheckpointError

from conftest import ROOT, run_cli
from restart_oracle import prepare

pytestmark = pytest.mark.spark
TESTS = ROOT / "tests"


@pytest.fixture(scope="module")
def fixture_copy(tmp_path_factory):
    return prepare("agg_window_hdfs", tmp_path_factory.mktemp("compat-cli") / "agg", extra=0)


def new_code(tmp_path: Path, root: Path, case: str) -> str:
    module = tmp_path / f"{case}_code.py"
    module.write_text(MODULE.format(tests=str(TESTS), name=case, input=str(root / "input"),
                                    checkpoint=str(root / "checkpoint"), output=str(root / "output")))
    return f"{module}:new_query"


def test_the_same_code_restarts_with_the_same_output(spark, fixture_copy, tmp_path):
    before = digest(fixture_copy)
    out = run_cli("compat", fixture_copy / "checkpoint", "--query", new_code(tmp_path, fixture_copy, "same_code")).stdout
    lines = out.splitlines()
    assert "batch:                  11 (a committed batch, re-run)" in lines and "verdict:                restarts" in lines
    assert "output:                 file sink: 3 row(s) before, 3 after; 0 only before, 0 only after" in lines
    assert lines[-1] == "restarts: batch 11 gives the same output and state (exit 0)"
    github = run_cli("compat", fixture_copy / "checkpoint", "--query", new_code(tmp_path, fixture_copy, "same_code"),
                     "--format", "github").stdout
    assert github.startswith(f"::notice file={str(fixture_copy / 'checkpoint').replace(':', '%3A')},title=wmcheck "
                             "compat%3A restarts::restarts: batch 11 gives the same output and state (exit 0)\n")
    suite = ET.fromstring(run_cli("compat", fixture_copy / "checkpoint", "--query",
                                  new_code(tmp_path, fixture_copy, "same_code"), "--format", "junit").stdout).find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("4", "0", "0")
    assert not [c for c in suite.iter("testcase") if len(c)]  # no failure, no output
    assert digest(fixture_copy) == before


def test_an_older_batch_is_rerun_with_batch(spark, fixture_copy, tmp_path):
    """--batch 6: the copy rewound to batch 5 re-runs batch 6, whose two rows (a and b in their windows) the old
    code wrote too."""
    query = new_code(tmp_path, fixture_copy, "same_code")
    doc = json.loads(run_cli("compat", fixture_copy / "checkpoint", "--query", query, "--batch", "6", "--format",
                             "json").stdout)
    assert (doc["batch"], doc["how"], doc["verdict"], doc["exit_code"]) == (6, "rerun", "restarts", 0)
    output = doc["output"]
    assert (output["sink"], output["old_rows"], output["new_rows"], output["only_old"], output["only_new"]) == ("file", 2, 2, 0, 0)
    assert [(s["operator_id"], s["store"], s["added"], s["removed"], s["changed"]) for s in doc["state"]] == [(0, "default", 0, 0, 0)]
    wm = json.loads((fixture_copy / "checkpoint" / "commits" / "6").read_text().splitlines()[1])["nextBatchWatermarkMs"]
    assert doc["watermark"]["old_next_ms"] == doc["watermark"]["new_next_ms"] == wm


def test_a_refused_change_exits_2_with_the_field_side_by_side(spark, fixture_copy, tmp_path):
    query = new_code(tmp_path, fixture_copy, "add_aggregate")
    doc = json.loads(run_cli("compat", fixture_copy / "checkpoint", "--query", query, "--format", "json",
                             exit_code=2).stdout)
    assert (doc["verdict"], doc["exit_code"], doc["changes"], doc["batch"]) == ("refused", 2, False, 11)
    refusal = doc["refusal"]
    assert refusal["error_class"] == "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE"
    assert (refusal["operator_id"], refusal["operator"], refusal["store"]) == (0, "stateStoreSave", "default")
    assert (refusal["schema"]["old"], refusal["schema"]["new"]) == ("count: bigint, sum: bigint",
                                                                   "count: bigint, sum: bigint, max: int")
    assert refusal["explanation"].startswith("operator 0 (stateStoreSave, aggregation) stores per key (count: bigint, "
                                             "sum: bigint); the new query's is (count: bigint, sum: bigint, max: int): "
                                             "added max int.")
    table = run_cli("compat", fixture_copy / "checkpoint", "--query", query, exit_code=2).stdout
    assert "Operator 0 default value schema: checkpoint -> new query" in table
    assert [line.split() for line in table.splitlines() if line.startswith("max ")] == [["max", "none", "int", "added"]]
    assert "rule:" in table and "Streaming aggregation: any change in number or type of grouping keys" in table


def test_changes_exit_1_unless_allowed(spark, fixture_copy, tmp_path):
    query = new_code(tmp_path, fixture_copy, "add_filter")
    github = run_cli("compat", fixture_copy / "checkpoint", "--query", query, "--format", "github", exit_code=1).stdout
    first, summary = github.rstrip("\n").split("\n")
    assert first.startswith(f"::error file={str(fixture_copy / 'checkpoint').replace(':', '%3A')},title=wmcheck compat%3A restarts::")
    assert summary.startswith("restarts, with changes: state of operator 0 default: 0 added, 1 removed, 1 changed;")
    assert summary.endswith("(exit 1)")
    report = tmp_path / "compat.xml"
    run_cli("compat", fixture_copy / "checkpoint", "--query", query, "--format", "junit", "--allow-output-change",
            "--output", report)
    suite = ET.parse(report).getroot().find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("4", "0", "0")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert sorted(cases) == ["output of batch 11", "restart of batch 11", "state of batch 11", "watermark of batch 11"]
    for name in ("state of batch 11", "watermark of batch 11"):  # the output of the batch is the same
        out = cases[name].find("system-out")
        assert out is not None and out.text.startswith("allowed: restarts, with changes, allowed by --allow-output-change")
    assert cases["output of batch 11"].find("system-out") is None
    table = run_cli("compat", fixture_copy / "checkpoint", "--query", query, exit_code=1).stdout.splitlines()
    assert ("watermark after it:     old code 1704067285000 (2024-01-01T00:01:25.000Z), new code 1704067281000 "
            "(2024-01-01T00:01:21.000Z)") in table
    state = table[table.index("State after the batch: old code -> new code") + 3].split()
    assert state == ["0", "default", "5", "4", "0", "1", "1"]  # rows before, after, added, removed, changed
    at = table.index("State rows that differ") + 3
    assert [(line.split()[2], json.loads(line.split(None, 3)[3])) for line in table[at:at + 3]] == [
        ("before", {"key": {"id": "c", "window": {"end": "2024-01-01T00:01:40.000000Z", "start": "2024-01-01T00:01:30.000000Z"}},
                    "value": {"count": 1, "sum": 29}}),
        ("before", {"key": {"id": "b", "window": {"end": "2024-01-01T00:01:30.000000Z", "start": "2024-01-01T00:01:20.000000Z"}},
                    "value": {"count": 2, "sum": 59}}),
        ("after", {"key": {"id": "b", "window": {"end": "2024-01-01T00:01:30.000000Z", "start": "2024-01-01T00:01:20.000000Z"}},
                   "value": {"count": 1, "sum": 28}})]  # the filter drops c's 29 and b's 31 of batch 11
    assert table[at + 3] == "" and table[-1] == summary


def test_the_users_exception_is_one_line_with_its_location(spark, fixture_copy, tmp_path):
    module = tmp_path / "broken_code.py"
    module.write_text("def new_query(spark):\n    raise ValueError('no such table: orders')\n")
    before = digest(fixture_copy)
    out = run_cli("compat", fixture_copy / "checkpoint", "--query", f"{module}:new_query", exit_code=2).output
    assert digest(fixture_copy) == before
    assert out == (f"Error: --query {module}:new_query raised ValueError: no such table: orders (at {module}:2) "
                   "(hint: --debug shows the traceback)\n")
    doc = json.loads(run_cli("compat", fixture_copy / "checkpoint", "--query", f"{module}:new_query", "--format", "json",
                             exit_code=2).stdout)
    assert doc == {"error": f"--query {module}:new_query raised ValueError: no such table: orders (at {module}:2)",
                   "hint": "--debug shows the traceback", "param": "--query", "where": None, "exit_code": 2}


def test_a_module_is_imported_from_the_current_directory(spark, fixture_copy, tmp_path, monkeypatch):
    (tmp_path / "jobs_in_cwd.py").write_text("def new_query(spark):\n    return 42\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [p for p in __import__("sys").path if p not in ("", str(tmp_path))])
    out = run_cli("compat", fixture_copy / "checkpoint", "--query", "jobs_in_cwd:new_query", exit_code=2).output
    assert out == ("Error: --query jobs_in_cwd:new_query returned int (hint: return the new query's streaming DataFrame "
                   "or its DataStreamWriter (not a started query))\n")


@pytest.mark.parametrize("body, message", [
    ("x = 1\n", "has no function new_query"),
    ("def new_query(spark):\n    return spark.range(3)\n", "returned a DataFrame that is not streaming"),
    ("def new_query(spark):\n    return 42\n", "returned int"),
    ("import os\nEVENTS = os.environ['NO_SUCH_VARIABLE']\n", "odd_code.py raised KeyError: 'NO_SUCH_VARIABLE' (at "),
])
def test_unusable_queries_exit_2(spark, fixture_copy, tmp_path, body, message):
    module = tmp_path / "odd_code.py"
    module.write_text(body)
    out = run_cli("compat", fixture_copy / "checkpoint", "--query", f"{module}:new_query", exit_code=2).output
    assert out.startswith("Error: --query") and message in out and "\n" not in out.rstrip("\n")


def test_a_query_started_by_the_users_function_is_refused_before_it_runs(spark, fixture_copy, tmp_path):
    """Started, the query would run on the checkpoint itself: the start raises, nothing runs, the checkpoint stays."""
    query = own_code(tmp_path, fixture_copy, "def new_query(spark):\n    return QUERIES.file_sink(_windowed(_events("
                                             "spark, INPUT)), CHECKPOINT, OUTPUT).start()\n")
    before = digest(fixture_copy)
    out = run_cli("compat", fixture_copy / "checkpoint", "--query", query, exit_code=2).output
    assert out == (f"Error: --query {query} called DataStreamWriter.start(): compat does not start the new query on the "
                   "checkpoint; it runs the writer on a copy (hint: return the writer (or the streaming DataFrame) "
                   "without starting it)\n")
    assert spark.streams.active == [] and digest(fixture_copy) == before


def test_a_module_that_does_not_import_exits_2(spark, fixture_copy):
    out = run_cli("compat", fixture_copy / "checkpoint", "--query", "no_such_module_here:new_query", exit_code=2).output
    assert out == ("Error: --query: cannot import no_such_module_here: No module named 'no_such_module_here' "
                   "(hint: the module must be importable from the current directory or PYTHONPATH)\n")


def own_code(tmp_path: Path, root: Path, body: str) -> str:
    """A module of new code over ``root``'s copy of agg_window_hdfs: ``body`` defines ``new_query(spark)`` with the
    helpers of tests/compat_cases.py and INPUT, CHECKPOINT and OUTPUT at hand."""
    module = tmp_path / "own_code.py"
    module.write_text(f"import sys\nsys.path[:0] = [{str(TESTS)!r}]\n"
                      "from compat_cases import QUERIES, _events, _windowed\n"
                      f"INPUT, CHECKPOINT, OUTPUT = {str(root / 'input')!r}, {str(root / 'checkpoint')!r}, "
                      f"{str(root / 'output')!r}\n\n" + body)
    return f"{module}:new_query"



def test_a_streaming_dataframe_is_written_to_a_sink_like_the_old_one(spark, fixture_copy, tmp_path):
    """FUNCTION may return the streaming DataFrame: with --file-sink its batch goes to a file sink of the old sink's
    format (and is compared with the old rows), without it the batch is captured."""
    query = own_code(tmp_path, fixture_copy, "def new_query(spark):\n    return _windowed(_events(spark, INPUT))\n")
    before = digest(fixture_copy)
    lines = run_cli("compat", fixture_copy / "checkpoint", "--query", query, "--file-sink", fixture_copy / "output"
                    ).stdout.splitlines()
    assert "output:                 file sink: 3 row(s) before, 3 after; 0 only before, 0 only after" in lines
    assert lines[-1] == "restarts: batch 11 gives the same output and state (exit 0)"
    doc = json.loads(run_cli("compat", fixture_copy / "checkpoint", "--query", query, "--format", "json").stdout)
    assert (doc["verdict"], doc["exit_code"], doc["output"]["sink"], doc["output"]["old_rows"], doc["output"]["new_rows"]) == (
        "restarts", 0, "captured", None, 3)
    assert digest(fixture_copy) == before


UDF = """from pyspark.sql import functions as F


@F.udf("int")
def checked(v):
    if v > 20:
        raise ValueError(f"v out of range: {v}")
    return v


def new_query(spark):
    return QUERIES.file_sink(_windowed(_events(spark, INPUT).withColumn("v", checked("v"))), CHECKPOINT, OUTPUT)
"""


def test_the_new_codes_exception_on_the_batchs_rows_is_one_line_in_every_format(spark, fixture_copy, tmp_path):
    """A UDF of the new code that raises on a row of the batch: the restart would fail; exit 2 with the user's
    exception and its location in one line, in every format, and the checkpoint unchanged."""
    query = own_code(tmp_path, fixture_copy, UDF)
    module = query.rsplit(":", 1)[0]
    line = Path(module).read_text().splitlines().index('        raise ValueError(f"v out of range: {v}")') + 1
    before = digest(fixture_copy)
    raised = f"the new code raised ValueError: v out of range: 29 (at {module}:{line}, in checked)"
    lines = run_cli("compat", fixture_copy / "checkpoint", "--query", query, exit_code=2).stdout.splitlines()
    assert "spark error:   PYTHON_EXCEPTION" in lines
    assert ("spark message: [PYTHON_EXCEPTION] An exception was thrown from the Python worker: ValueError: v out of "
            f"range: 29 (at {module}:{line}, in checked)") in lines
    assert lines[-1] == (f"refused: PYTHON_EXCEPTION: {raised} while Spark ran the batch: a restart fails the same way "
                         "on these rows (exit 2)")
    refusal = json.loads(run_cli("compat", fixture_copy / "checkpoint", "--query", query, "--format", "json",
                                 exit_code=2).stdout)["refusal"]
    assert (refusal["error_class"], refusal["rule"], refusal["operator_id"]) == ("PYTHON_EXCEPTION", None, None)
    assert refusal["explanation"].startswith(raised) and "\n" not in refusal["message"]
    github = run_cli("compat", fixture_copy / "checkpoint", "--query", query, "--format", "github", exit_code=2).stdout
    first, summary = github.rstrip("\n").split("\n")
    assert first.startswith(f"::error file={str(fixture_copy / 'checkpoint').replace(':', '%3A')},title=wmcheck compat%3A "
                            "refused (PYTHON_EXCEPTION)::")
    assert summary.startswith(f"refused: PYTHON_EXCEPTION: {raised}") and summary.endswith("(exit 2)")
    junit = ET.fromstring(run_cli("compat", fixture_copy / "checkpoint", "--query", query, "--format", "junit",
                                  exit_code=2).stdout)
    suite = junit.find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("4", "1", "3")
    failure = next(c for c in suite.iter("testcase") if c.get("name") == "restart of batch 11").find("failure")
    assert failure is not None and failure.get("type") == "PYTHON_EXCEPTION" and raised in (failure.get("message") or "")
    assert digest(fixture_copy) == before


def test_a_batch_over_its_time_is_stopped_with_one_line(spark, fixture_copy, tmp_path):
    slow = UDF.replace('raise ValueError(f"v out of range: {v}")', "__import__('time').sleep(60)")
    query = own_code(tmp_path, fixture_copy, slow)
    before = digest(fixture_copy)
    out = run_cli("compat", fixture_copy / "checkpoint", "--query", query, "--batch-timeout", "2", exit_code=2).output
    assert out == ("Error: the new code's batch did not finish within 2 s; compat stopped it (hint: give it longer with "
                   "--batch-timeout SECONDS, or look for a stuck task or a slow function in the new code)\n")
    assert digest(fixture_copy) == before


def test_debug_shows_the_traceback_of_the_users_exception(spark, fixture_copy, tmp_path):
    from click.testing import CliRunner

    from wmcheck.cli.main import cli

    module = tmp_path / "broken_code.py"
    module.write_text("def new_query(spark):\n    raise ValueError('no such table: orders')\n")
    result = CliRunner().invoke(cli, ["compat", str(fixture_copy / "checkpoint"), "--query", f"{module}:new_query",
                                      "--debug"])
    assert isinstance(result.exception, CheckpointError)
    cause = result.exception.__cause__
    assert isinstance(cause, ValueError) and str(cause) == "no such table: orders"
    assert traceback.extract_tb(cause.__traceback__)[-1][:2] == (str(module), 2)


def test_a_file_sources_moved_input_is_found_with_input(spark, tmp_path):
    """The logged input files moved (input/ -> archive/) and the new code reads them there: without --input compat
    stops before Spark with the files it misses; with --input 0=DIR it re-runs the batch from there."""
    import shutil

    root = prepare("agg_window_hdfs", tmp_path / "agg", extra=0)
    shutil.move(root / "input", root / "archive")
    query = own_code(tmp_path, root, "def new_query(spark):\n    return QUERIES.file_sink(_windowed(_events(spark, "
                                     "INPUT.replace('input', 'archive'))), CHECKPOINT, OUTPUT)\n")
    out = run_cli("compat", root / "checkpoint", "--query", query, exit_code=2).output
    assert out.startswith("Error: sources/0/") and "input file(s) source 0 read in batch 11 no longer exist" in out
    assert out.endswith("(hint: --input 0=DIR if they moved, or another --batch)\n")
    before = digest(root)
    lines = run_cli("compat", root / "checkpoint", "--query", query, "--input", f"0={root / 'archive'}").stdout.splitlines()
    assert "batch:                  11 (a committed batch, re-run)" in lines
    assert f"source 0:               file: 1 logged file(s), read from {root / 'archive'}" in lines
    assert lines[-1] == "restarts: batch 11 gives the same output and state (exit 0)"
    assert digest(root) == before


UNION = """import sys
sys.path[:0] = [{fixtures!r}]
import queries
from pyspark.sql import functions as F


def new_query(spark):
    def source(sub, delay):
        return (spark.readStream.format("json").schema("id STRING, ts TIMESTAMP, v INT").option("maxFilesPerTrigger", 1)
                .load({root!r} + "/input/" + sub).withWatermark("ts", delay))

    events = source("left", "10 seconds").unionByName(source("right", {right!r}))
    counts = events.groupBy(F.window("ts", "10 seconds"), "id").agg(F.count("*").alias("n"), F.sum("v").alias("v_sum"))
    return (counts.writeStream.format("json").outputMode("append").option("path", {root!r} + "/output")
            .option("checkpointLocation", {root!r} + "/checkpoint").trigger(availableNow=True))
"""


@pytest.mark.parametrize(("right", "last"), [
    ("20 seconds", "restarts: batch 6 gives the same output and state (exit 0)"),
    ("5 seconds", "restarts: batch 6 gives the same output and state (exit 0)"),  # the left input sets it here
])
def test_each_watermarked_input_is_judged_by_its_own_delay_not_another_inputs(spark, tmp_path, right, last):
    """multi_watermark_max's union of two inputs (delays 10 s and 20 s, policy max): the checkpoint's state records one
    delay for both, so neither input's old delay is compared with the other's (the unchanged code was "10s -> 20s, exit
    1"): both are unknown, and the right input's lowered delay, which does not set the watermark in batch 6 (the left
    input's does), changes nothing compat can see there."""
    root = prepare("multi_watermark_max", tmp_path / "mwm", extra=0)
    module = tmp_path / "union_code.py"
    module.write_text(UNION.format(fixtures=str(ROOT / "fixtures"), root=str(root), right=right))
    lines = run_cli("compat", root / "checkpoint", "--query", f"{module}:new_query", exit_code=None).stdout.splitlines()
    assert [line for line in lines if line.startswith("delay of ts")] == [
        "delay of ts (source 0): unknown -> 10s", f"delay of ts (source 1): unknown -> {right.split()[0]}s"]
    assert ("note:                   the new query has 2 watermarked inputs and the checkpoint's state records one "
            "delay for them: each input's old delay is unknown (the old query's plan in Spark's event log records it: "
            "--progress EVENTLOG), and a change of delay shows in the watermark after the batch (old code against new) "
            "only where that input sets it in the batch re-run") in lines
    assert lines[-1] == last
