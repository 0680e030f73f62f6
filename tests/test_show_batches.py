"""``wmcheck show`` and ``wmcheck batches`` on every fixture, in every format, against fixture.json."""
from __future__ import annotations

import csv
import io
import json
import re
import shutil
from pathlib import Path

import pytest

from conftest import (
    fixture_checkpoint,
    fixture_facts,
    fixture_names,
    names_own_schemas,
    restartable_checkpoint,
    run_cli,
    shown_name,
)

FIXTURES = fixture_names()



def check_json(ckpt: Path, *args: str) -> list[dict]:
    return json.loads(run_cli("check", ckpt, "--no-content", "--format", "json", *args, exit_code=None).stdout)


def show_json(name: str) -> dict:
    return json.loads(run_cli("show", fixture_checkpoint(name), "--format", "json").stdout)


@pytest.mark.parametrize("name", FIXTURES)
def test_show_json_matches_spark(name):
    facts = fixture_facts(name)
    doc = show_json(name)
    assert doc["last_batch"] == facts["last_batch"]
    assert doc["last_committed_batch"] == facts["last_committed_batch"]
    moved = facts.get("repartition")
    failed = moved is not None and moved["error"] is not None
    assert doc["pending_batch"] == (moved["batch"] if failed else None)
    assert doc["repartitions"] == ([{"batch": moved["batch"], "from": moved["from"], "to": moved["to"]}]
                                   if moved and not failed else [])
    assert doc["unfinished_repartition"] == ({"batch": moved["batch"], "from": moved["from"], "to": moved["to"]}
                                             if failed else None)
    assert doc["next_batch_partitions"] == int((moved["to"] if moved and not failed else facts["conf"]["spark.sql.shuffle.partitions"]))
    assert doc["watermark_ms"] == facts["next_watermark_ms"]
    assert doc["query_id"] == json.loads((fixture_checkpoint(name) / "metadata").read_text())["id"]
    if facts.get("operators"):
        got = [{k: op[k] for k in ("operator_id", "name", "stores", "num_partitions")} for op in doc["operators"]]
        want = [{"operator_id": o["operator_id"], "name": shown_name(facts, o),
                 "stores": o["stores"], "num_partitions": o["num_partitions"]} for o in facts["operators"]]
        if moved and not failed:  # Spark's state-metadata reader reports the v1 metadata, which keeps the old count
            assert [o["num_partitions"] for o in want] == [moved["from"]] * len(want)
            want = [{**o, "num_partitions": moved["to"]} for o in want]
            assert [op["metadata_lag"] for op in doc["operators"]] == [
                f"its v1 operator metadata still says {moved['from']} partitions: the repartition at batch "
                f"{moved['batch']} moved the state to {moved['to']} and Spark does not rewrite v1 metadata"] * len(want)
        else:
            assert [op["metadata_lag"] for op in doc["operators"]] == [None] * len(want)
        assert got == want
    old_spark = facts["spark_version"].startswith(("2.", "3."))  # no operator metadata before Spark 4.0
    assert [op["name_inferred"] for op in doc["operators"]] == [old_spark] * len(doc["operators"])
    errors = {f["path"] for f in check_json(fixture_checkpoint(name)) if f["severity"] == "error"}
    for op in doc["operators"]:  # loadable unless check has an error about its state (in place: schema files elsewhere)
        own = f"state/{op['operator_id']}"
        assert op["next_version_loadable"] == (not {p for p in errors if p in ("state", own) or p.startswith(own + "/")})
        assert op["next_version"] == doc["next_batch"]


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_where_spark_can_restart_it_shows_checks_verdict(name, tmp_path):
    """show's verdict and findings are check's (without state contents): a fixture Spark restarts has no error; one
    whose repartition failed half way, WM035 first."""
    ckpt = restartable_checkpoint(name, tmp_path)
    doc = json.loads(run_cli("show", ckpt, "--format", "json").stdout)
    found = check_json(ckpt)
    assert [(f["code"], f["severity"], f["path"], f["message"]) for f in doc["findings"]] == sorted(
        ((f["code"], f["severity"], f["path"], f["message"]) for f in found), key=lambda f: (f[1] != "error", f[0], f[2]))
    moved = fixture_facts(name).get("repartition")
    failed = bool(moved and moved["error"])  # Spark cannot restart it: its repartition failed half way
    assert (doc["verdict"]["restarts"], doc["verdict"]["worst"]["code"] if failed else None) == (not failed, "WM035" if failed else None)
    assert doc["warnings"] == [] and all(f["severity"] == "warning" for f in doc["findings"]) != failed


def test_moved_transform_with_state_checkpoint_shows_where_its_schemas_are(tmp_path):
    ckpt = names_own_schemas(Path(shutil.copytree(fixture_checkpoint("tws_pandas"), tmp_path / "a")))
    moved = shutil.move(ckpt, tmp_path / "b")
    doc = json.loads(run_cli("show", moved, "--format", "json").stdout)
    assert [(f["code"], f["path"]) for f in doc["findings"]] == [(f["code"], f["path"]) for f in check_json(moved)]
    assert {f["code"] for f in doc["findings"]} == {"WM027"} and not doc["verdict"]["restarts"]
    assert all(f"names the state schema file file:{tmp_path}/a/state/0/_stateSchema/" in f["message"] for f in doc["findings"])


def read_input(batch: dict) -> bool:
    """Whether Spark's progress shows the batch reading input: files, or rows of a source that names no files."""
    return bool(batch["input_files"] or batch["num_input_rows"])


@pytest.mark.parametrize("name", FIXTURES)
def test_batches_json_watermarks_match_progress_reports(name):
    facts = fixture_facts(name)
    rows = json.loads(run_cli("batches", fixture_checkpoint(name), "--format", "json").stdout)
    by_batch = {r["batch"]: r for r in rows}
    for batch in facts["batches"]:
        if batch["batch"] in by_batch:
            assert by_batch[batch["batch"]]["batch_watermark_ms"] == batch["watermark_ms"], batch["batch"]
    assert rows[-1]["batch"] == facts["last_batch"]
    moved = facts.get("repartition")
    if not (moved and moved["error"]):
        assert rows[-1]["next_batch_watermark_ms"] == facts["next_watermark_ms"]
    for batch in facts["batches"]:  # Spark's progress: a batch without input files or rows read no input
        if batch["batch"] in by_batch:
            assert by_batch[batch["batch"]]["kind"] == ("data" if read_input(batch) else "no-data"), batch["batch"]
    if moved:
        assert by_batch[moved["batch"]]["kind"] == "repartition"
        assert [r["batch"] for r in rows if r["kind"] == "repartition"] == [moved["batch"]]
    assert set(rows[0]) >= {"batch", "committed", "batch_watermark_ms", "next_batch_watermark_ms",
                            "batch_timestamp_ms", "sources"}


@pytest.mark.parametrize("name", FIXTURES)
def test_show_table_and_csv(name):
    facts = fixture_facts(name)
    table = run_cli("show", fixture_checkpoint(name)).stdout
    assert "batches:" in table and f"..{facts['last_batch']}" in table
    assert re.search(rf"^watermark: +{facts['next_watermark_ms']} \(2024-01-01T", table, re.M)
    assert "Stateful operators" in table
    for op in facts.get("operators", []):
        assert re.search(rf"^{op['operator_id']} +{shown_name(facts, op)} ", table, re.M)
    rows = dict(csv.reader(io.StringIO(run_cli("show", fixture_checkpoint(name), "--format", "csv").stdout)))
    assert rows["watermark_ms"] == str(facts["next_watermark_ms"])
    assert rows["last_batch"] == str(facts["last_batch"])
    for i, op in enumerate(facts.get("operators", [])):
        assert rows[f"operators.{i}.name"] == shown_name(facts, op)


def test_batches_table_shows_source_summaries():
    table = run_cli("batches", fixture_checkpoint("agg_window_hdfs"), "--last", "2").stdout.splitlines()
    assert "0 file …/agg_window_hdfs/input: file log batch 9 (new data)" in table[-2]
    assert "0 file …/agg_window_hdfs/input: file log batch 9 (no new data)" in table[-1]  # the no-data batch


@pytest.mark.parametrize("name", FIXTURES)
def test_batches_table_csv_and_ranges(name):
    facts = fixture_facts(name)
    ckpt = fixture_checkpoint(name)
    last = facts["last_batch"]
    table = run_cli("batches", ckpt, "--last", "2").stdout.splitlines()
    assert table[0].split()[:4] == ["batch", "committed", "kind", "watermark"]
    assert [line.split()[0] for line in table[2:]] == [str(last - 1), str(last)]
    progress = {b["batch"]: b for b in facts["batches"]}
    moved = facts.get("repartition")
    if moved:  # the repartition batch ran in no query: it has the watermark of the batch before
        assert table[-1].split()[1:4] == ["no" if moved["error"] else "yes", "repartition", str(progress[last - 1]["watermark_ms"])]
    else:
        assert table[-1].split()[1:4] == ["yes", "data" if read_input(progress[last]) else "no-data",
                                          str(progress[last]["watermark_ms"])]
    rows = list(csv.DictReader(io.StringIO(run_cli("batches", ckpt, "--from", last - 1, "--to", last, "--format", "csv").stdout)))
    assert [r["batch"] for r in rows] == [str(last - 1), str(last)]
    assert rows[0]["batch_watermark_ms"] == str(progress[last - 1]["watermark_ms"])
    assert rows[0]["committed"] == "yes"
    assert rows[-1]["kind"] == ("repartition" if moved else "data" if read_input(progress[last]) else "no-data")


def test_tz_changes_displayed_times_only():
    name = "agg_window_hdfs"
    utc = show_json(name)
    berlin = json.loads(run_cli("show", fixture_checkpoint(name), "--format", "json", "--tz", "Europe/Berlin").stdout)
    assert berlin["watermark_ms"] == utc["watermark_ms"]
    assert utc["watermark"].endswith("Z") and berlin["watermark"].endswith("+01:00")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["show", "/nonexistent/ckpt"], "Error: checkpoint not found: /nonexistent/ckpt"),
        (["batches", "/nonexistent/ckpt"], "Error: checkpoint not found: /nonexistent/ckpt"),
        (["show", "s3x://bucket/x"], "Error: unsupported URI scheme 's3x'"),
        (["show", "--tz", "Mars/Base", "."], "Error: unknown time zone 'Mars/Base'"),
        (["batches", ".", "--last", "2", "--from", "1"], "use either --last or --from/--to"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message):
    result = run_cli(*args, exit_code=2)
    assert message in result.output


def test_not_a_checkpoint(tmp_path):
    (tmp_path / "data.txt").write_text("x")
    result = run_cli("show", tmp_path, exit_code=2)
    assert "not a Structured Streaming checkpoint" in result.output and "hint:" in result.output


def test_malformed_offsets_names_file_and_line(copy_fixture):
    ckpt = copy_fixture("agg_window_hdfs") / "checkpoint"
    last = fixture_facts("agg_window_hdfs")["last_batch"]
    (ckpt / "offsets" / str(last)).write_bytes(b"v1\n{broken")
    result = run_cli("batches", ckpt, "--format", "json")
    assert json.loads(result.stdout)[-1]["error"].startswith(f"offsets/{last}: line 2: expected the batch metadata as JSON")
    (ckpt / "offsets" / str(last)).write_bytes(b"v9\n{}")
    result = run_cli("batches", ckpt, exit_code=2)
    assert f'Error: offsets/{last}: line 1 is "v9": written by a newer Spark than wmcheck knows (up to v2)' in result.output


def test_debug_shows_the_traceback():
    from click.testing import CliRunner

    from wmcheck.cli.main import cli

    result = CliRunner().invoke(cli, ["show", "/nonexistent/ckpt", "--debug"])
    assert result.exit_code != 0 and result.exception is not None and not isinstance(result.exception, SystemExit)


def test_remote_file_uri_goes_through_pyarrow():
    name = "agg_window_hdfs"
    local = show_json(name)
    remote = json.loads(run_cli("show", f"file://{fixture_checkpoint(name)}", "--format", "json").stdout)
    assert remote["location"] == f"file://{fixture_checkpoint(name)}"
    assert {k: v for k, v in remote.items() if k != "location"} == {k: v for k, v in local.items() if k != "location"}


def test_help_does_not_import_pyspark_or_pyarrow():
    import subprocess
    import sys

    code = ("import sys; from wmcheck.cli.main import cli\n"
            "try:\n    cli(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('pyspark', 'pyarrow', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_batches_table_shows_times_and_no_empty_progress_columns():
    """The next watermark as a time in the table (epoch ms in JSON and CSV), in --tz; rows, max event time and late
    rows only with Spark's progress."""
    ckpt = fixture_checkpoint("agg_window_hdfs")
    table = run_cli("batches", ckpt, "--last", "1", "--tz", "Europe/Berlin").stdout.splitlines()
    assert table[0].split("  ")[0:1] == ["batch"] and re.split(r" {2,}", table[0]) == [
        "batch", "committed", "kind", "watermark", "next watermark", "advanced", "timestamp", "lag", "sources"]
    assert re.split(r" {2,}", table[2])[4] == "2024-01-01T01:01:25.000+01:00"
    assert json.loads(run_cli("batches", ckpt, "--last", "1", "--format", "json").stdout)[0]["next_batch_watermark_ms"] == 1704067285000
    progress = fixture_checkpoint("union_stall_min").parent / "progress.jsonl"
    with_progress = run_cli("batches", fixture_checkpoint("union_stall_min"), "--last", "1", "--progress", progress).stdout
    assert re.split(r" {2,}", with_progress.splitlines()[0])[-3:] == ["rows", "max event time", "late rows"]


def test_show_imports_no_repair_planner_spark_or_plotting():
    """``show`` runs check's cheap part, whose findings name repair requests as fixes: the requests come without
    their planners, backups and executors (start-up time), and without pyspark, pyarrow or matplotlib."""
    import subprocess
    import sys

    code = ("import sys; from wmcheck.cli.main import cli\n"
            f"try:\n    cli(['show', {str(fixture_checkpoint('agg_window_hdfs'))!r}])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'pyarrow', 'pandas', 'matplotlib')\n"
            "  or m.startswith('wmcheck.checkpoint.repair.') and m.rsplit('.', 1)[1] not in ('requests', 'targets')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"
