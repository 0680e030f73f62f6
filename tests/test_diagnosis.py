"""Watermark diagnosis on real checkpoints: Spark's progress (event logs, JSON lines), source labels, stalls, WM038."""
from __future__ import annotations

import csv
import io
import json
import re
import shutil

import pytest

from wmcheck.checkpoint.errors import spelled
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.watermarks.progress import query_progress
from wmcheck.checkpoint.watermarks.progress_files import load_progress, read_reports
from wmcheck.checkpoint.watermarks.stall import EVENT_TIME, HELD, NO_INPUT, watermark_stall

from conftest import FIXTURES, fixture_checkpoint, fixture_facts, restartable_checkpoint, run_cli, sink_at_home

DIAGNOSIS = ["union_stall_min", "union_stall_max", "sliding_window", "no_new_input", "stalled_event_time"]
SECOND = 1000
BASE = 1704067200000  # 2024-01-01T00:00:00Z, the fixtures' event-time origin


STALL_ROOT = fixture_facts("union_stall_min")["root"]
"""Where the fixture was generated: its logs name the input files there, whatever the checkout."""


def query_id(name: str) -> str:
    return json.loads((fixture_checkpoint(name) / "metadata").read_text())["id"]


def progress(name: str):
    return load_progress(query_id(name), str(FIXTURES / name / "eventlog"))


def event_log_files(name: str) -> list[str]:
    return sorted(p.relative_to(FIXTURES / name / "eventlog").as_posix()
                  for p in (FIXTURES / name / "eventlog").rglob("*") if p.is_file() and not p.name.startswith("."))


def test_event_logs_are_in_every_form_spark_writes():
    forms = {name: [re.sub(r"local-\d+", "APP", f) for f in event_log_files(name)] for name in DIAGNOSIS}
    assert forms["union_stall_min"] == ["APP.zstd"]  # one file, Spark 4's default codec
    assert forms["union_stall_max"] == ["APP.lz4"]
    assert forms["sliding_window"] == ["APP.snappy"]
    assert forms["no_new_input"] == ["eventlog_v2_APP/appstatus_APP", "eventlog_v2_APP/events_1_APP"]  # rolled, plain
    assert forms["stalled_event_time"] == ["eventlog_v2_APP/appstatus_APP", "eventlog_v2_APP/events_1_APP.zstd"]


@pytest.mark.parametrize("name", DIAGNOSIS)
def test_event_log_and_progress_lines_give_the_reports_spark_printed(name):
    from_log = read_reports(str(FIXTURES / name / "eventlog"))
    from_lines = read_reports(str(FIXTURES / name / "progress.jsonl"))
    assert from_log == from_lines
    facts = fixture_facts(name)
    got = query_progress(query_id(name), from_log)
    assert list(got.batches) == [b["batch"] for b in facts["batches"]]
    assert len(got.run_ids) == len(facts["runs"]) >= 2  # every fixture restarted: one run id per run
    for batch in facts["batches"]:
        report = got.batches[batch["batch"]]
        assert report.num_input_rows == batch["num_input_rows"]
        assert (report.watermark_ms or 0) == batch["watermark_ms"]
        assert report.rows_dropped_by_watermark == batch["num_rows_dropped_by_watermark"]


def test_progress_matched_to_the_checkpoint_by_query_id(tmp_path):
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_bytes(b"".join((FIXTURES / n / "progress.jsonl").read_bytes() for n in ("union_stall_min", "sliding_window")))
    got = load_progress(query_id("sliding_window"), str(mixed))
    assert got.query_id == query_id("sliding_window") and len(got.batches) == len(fixture_facts("sliding_window")["batches"])
    other = run_cli("show", fixture_checkpoint("union_stall_max"), "--progress", FIXTURES / "sliding_window" / "progress.jsonl",
                    exit_code=2).output
    assert other.startswith(f"Error: {FIXTURES}/sliding_window/progress.jsonl holds no progress report of query "
                            f"{query_id('union_stall_max')} (it has reports of {query_id('sliding_window')})")
    assert "hint: pass the event log or progress file of this checkpoint's query" in other


def test_malformed_progress_file_is_one_line_with_its_line_number(tmp_path):
    bad = tmp_path / "p.jsonl"
    lines = (FIXTURES / "union_stall_min" / "progress.jsonl").read_text().splitlines()
    bad.write_text("\n".join([lines[0], "{not json", *lines[1:]]) + "\n")
    out = run_cli("check", fixture_checkpoint("union_stall_min"), "--progress", bad, exit_code=2).output
    assert out.strip().splitlines() == [
        f"Error: {bad}: line 2: expected one JSON object per line (a Spark event log or StreamingQueryProgress JSON "
        "lines) (hint: pass the file Spark wrote under spark.eventLog.dir, or query.lastProgress objects one per line)"]
    missing = run_cli("timeline", fixture_checkpoint("union_stall_min"), "--progress", tmp_path / "nope",
                      "--output", tmp_path / "t.svg", exit_code=2).output
    assert missing.startswith(f"Error: {tmp_path}/nope does not exist")


def test_a_cut_off_last_line_of_a_log_being_written_is_skipped(tmp_path):
    text = (FIXTURES / "union_stall_min" / "progress.jsonl").read_text()
    cut = tmp_path / "app.inprogress"
    cut.write_text(text[: len(text) - 40])
    assert len(read_reports(str(cut))) == len(text.splitlines()) - 1


def test_min_policy_stall_is_what_spark_reported():
    """Spark's own progress: from batch 5 the watermark stays at 8 s while only the left source reads rows,
    and the state is not evicted (no row removed)."""
    got = progress("union_stall_min")
    for batch in range(5, 11):
        report = got.batches[batch]
        assert report.watermark_ms == BASE + 8 * SECOND
        assert report.sources[0].num_input_rows > 0 and report.sources[1].num_input_rows == 0
        assert report.sources[1].description.endswith("/union_stall_min/input/right]")
    stall = watermark_stall(open_checkpoint(str(fixture_checkpoint("union_stall_min"))))
    assert (stall.since_batch, stall.batches, stall.held_by, stall.reason, stall.policy) == (5, 6, ("1",), HELD, "min")
    assert stall.watermark_ms == BASE + 8 * SECOND
    assert stall.event_time_advancing is None
    right = f"{STALL_ROOT}/input/right"
    assert stall.explanation == (
        f"the watermark has stayed at 2024-01-01T00:00:08.000Z since batch 5 "
        f"({_iso(stall.since_ms)}) over 6 data batches: source 1 (file {right}) brought no new data while source 0 "
        f"(file {STALL_ROOT}/input/left) did; under the min policy "
        "(spark.sql.streaming.multipleWatermarkPolicy) the slowest input holds the global watermark back")
    with_progress = watermark_stall(open_checkpoint(str(fixture_checkpoint("union_stall_min"))), got)
    assert with_progress.event_time_advancing is True
    assert with_progress.explanation.endswith("; max event time kept advancing")


def _iso(ms: int) -> str:
    from wmcheck.checkpoint.timeutil import format_ms

    return format_ms(ms)


def test_no_stall_under_max_policy_or_when_healthy():
    for name in ("union_stall_max", "sliding_window", "agg_window_hdfs", "multi_watermark_max", "join_stream_stream"):
        assert watermark_stall(open_checkpoint(str(fixture_checkpoint(name)))) is None, name
    # under max, Spark's watermark followed the left source past the idle right one
    got = progress("union_stall_max")
    assert [got.batches[b].watermark_ms - BASE for b in range(5, 12)] == [12000, 20000, 24000, 31000, 35000, 42000, 46000]


def test_no_new_input_is_not_a_held_watermark(copy_fixture):
    got = progress("no_new_input")
    assert [got.batches[b].num_input_rows for b in (3, 4, 5)] == [0, 0, 0]  # Spark ran them for three empty files
    root = sink_at_home(copy_fixture("no_new_input"), "no_new_input")  # without progress, the empty files are looked at
    for reports in (None, got):
        stall = watermark_stall(open_checkpoint(str(root / "checkpoint")), reports)
        assert (stall.reason, stall.held_by, stall.since_batch, stall.batches) == (NO_INPUT, (), 3, 3)
        assert stall.explanation.startswith("no new input since batch 3 (")
        assert stall.explanation.endswith(f"): 3 batches ran without a row from source 0 (file {root}/input), "
                                          "so the watermark stays at 2024-01-01T00:00:16.000Z")


def test_input_files_that_are_gone_count_as_data_without_progress(tmp_path):
    """Without progress, a batch whose logged files cannot be looked at is counted as one that brought data."""
    shutil.copytree(FIXTURES / "no_new_input", tmp_path, dirs_exist_ok=True)
    shutil.rmtree(sink_at_home(tmp_path, "no_new_input") / "input")
    stall = watermark_stall(open_checkpoint(str(tmp_path / "checkpoint")))
    assert (stall.reason, stall.held_by, stall.since_batch, stall.batches) == (EVENT_TIME, (), 3, 3)


def test_single_source_whose_event_time_stopped_advancing():
    ckpt = open_checkpoint(str(fixture_checkpoint("stalled_event_time")))
    bare = watermark_stall(ckpt)
    assert (bare.reason, bare.held_by, bare.batches, bare.event_time_advancing) == (EVENT_TIME, (), 6, None)
    assert spelled(bare.explanation).endswith("its event times are not beyond those seen before (pass progress to see the max "
                                     "event time per batch)")
    stall = watermark_stall(ckpt, progress("stalled_event_time"))
    assert stall.event_time_advancing is False
    assert stall.explanation.startswith("max event time not advancing: the watermark has stayed at 2024-01-01T00:00:16.000Z")


def wm038(name: str, *args: str, fmt: str = "json") -> list[dict]:
    rows = json.loads(run_cli("check", fixture_checkpoint(name), "--format", fmt, *args, exit_code=None).stdout)
    return [r for r in rows if r["code"] == "WM038"]


def test_check_warns_only_on_an_input_holding_the_watermark():
    found = wm038("union_stall_min")
    assert [(f["severity"], f["path"]) for f in found] == [("warning", "offsets/5")]
    assert f"source 1 (file {STALL_ROOT}/input/right) brought no new data" in found[0]["message"]
    assert "under the min policy (spark.sql.streaming.multipleWatermarkPolicy)" in found[0]["message"]
    assert wm038("union_stall_min", "--stall-batches", "6") and not wm038("union_stall_min", "--stall-batches", "7")
    with_progress = wm038("union_stall_min", "--progress", str(FIXTURES / "union_stall_min" / "eventlog"))
    assert "; max event time kept advancing. State is not evicted" in with_progress[0]["message"]
    for name in ("union_stall_max", "sliding_window", "no_new_input", "stalled_event_time"):
        assert wm038(name, "--progress", str(FIXTURES / name / "eventlog")) == [], name


def test_check_wm038_in_every_format(tmp_path):
    ckpt = restartable_checkpoint("union_stall_min", tmp_path)  # in place, its last batch's input is elsewhere: WM050
    table = run_cli("check", ckpt).stdout
    assert "warning     WM038   offsets/5" in table and "1 warning(s)" in table
    run_cli("check", ckpt, "--strict", exit_code=1)
    rows = list(csv.DictReader(io.StringIO(run_cli("check", ckpt, "--format", "csv").stdout)))
    assert [r["code"] for r in rows] == ["WM038"]
    assert "::warning file=" in run_cli("check", ckpt, "--format", "github").stdout
    assert 'WM038' in run_cli("check", ckpt, "--format", "junit").stdout
    run_cli("check", ckpt, "--stall-batches", "0", exit_code=2)


def test_show_reports_the_stall_and_labels_the_sources():
    doc = json.loads(run_cli("show", fixture_checkpoint("union_stall_min"), "--format", "json").stdout)
    stall = doc["watermark_stall"]
    assert {k: stall[k] for k in ("since_batch", "batches", "held_by", "reason", "policy")} == \
        {"since_batch": 5, "batches": 6, "held_by": ["1"], "reason": "held_by", "policy": "min"}
    assert stall["since"] == _iso(stall["since_ms"])
    assert [(s["source_id"], s["kind"], s["location"]) for s in doc["sources"]] == [
        ("0", "file", f"{STALL_ROOT}/input/left"), ("1", "file", f"{STALL_ROOT}/input/right")]
    table = run_cli("show", fixture_checkpoint("union_stall_min")).stdout
    assert f"watermark stall:            {stall['explanation']}\n" in table
    assert f"1            file    {STALL_ROOT}/input/right  file log batch 3" in table
    csv_rows = dict(csv.reader(io.StringIO(run_cli("show", fixture_checkpoint("union_stall_min"), "--format", "csv").stdout)))
    assert csv_rows["watermark_stall.held_by"] == "1" and csv_rows["sources.1.location"].endswith("/input/right")
    for name in ("union_stall_max", "sliding_window"):
        assert json.loads(run_cli("show", fixture_checkpoint(name), "--format", "json").stdout)["watermark_stall"] is None
    assert "watermark stall:            none\n" in run_cli("show", fixture_checkpoint("union_stall_max")).stdout
    no_input = run_cli("show", fixture_checkpoint("no_new_input"), "--progress", FIXTURES / "no_new_input" / "eventlog").stdout
    assert "watermark stall:            no new input since batch 3 (" in no_input
    stalled = run_cli("show", fixture_checkpoint("stalled_event_time"), "--progress", FIXTURES / "stalled_event_time" / "progress.jsonl").stdout
    assert "watermark stall:            max event time not advancing: " in stalled


def test_batches_say_what_each_source_brought():
    rows = json.loads(run_cli("batches", fixture_checkpoint("union_stall_min"), "--format", "json",
                              "--progress", FIXTURES / "union_stall_min" / "eventlog").stdout)
    assert rows[0]["watermark_advance_ms"] is None  # batch 0 has no earlier watermark to advance from
    assert rows[1]["watermark_advance_ms"] == 5000
    assert [[a["new_data"] for a in r["source_activity"]] for r in rows] == \
        [[True, True]] * 3 + [[False, False], [True, True]] + [[True, False]] * 6
    assert [r["kind"] for r in rows].count("no-data") == 1
    assert rows[5]["source_activity"][1] == {"source_id": "1", "kind": "file", "location": f"{STALL_ROOT}/input/right",
                                             "offset": '{"logOffset":3}', "new_offsets": False, "rows": 0, "new_data": False}
    assert rows[5]["progress"]["watermark_ms"] == BASE + 8 * SECOND and rows[5]["progress"]["num_input_rows"] == 2
    table = run_cli("batches", fixture_checkpoint("union_stall_min"), "--from", "5", "--to", "5").stdout.splitlines()
    assert "0 file …/input/left: file log batch 4 (new data); 1 file …/input/right: file log batch 3 (no new data)" in table[-1]
    assert table[-1].split()[6] == "0s"
    first = run_cli("batches", fixture_checkpoint("union_stall_min"), "--to", "0", "--format", "csv").stdout
    assert list(csv.DictReader(io.StringIO(first)))[0]["watermark_advance_ms"] == ""


def test_show_still_diagnoses_with_a_damaged_source_log(copy_fixture):
    root = copy_fixture("union_stall_min")
    for log in (root / "checkpoint" / "sources" / "0").iterdir():
        log.unlink()  # the left source's log is gone: its new files cannot be sized
    doc = json.loads(run_cli("show", root / "checkpoint", "--format", "json").stdout)
    assert doc["watermark_stall"]["held_by"] == ["1"] and doc["sources"][0]["location"] is None
