"""``wmcheck reset-offsets`` without a broker: the plan, its table in every format, the batch it writes, --export and
--from-file, refusals and bad input (one line, exit 2), undo; and the Kafka fixtures (written by real Kafka queries)
read by the other commands. The restarts: tests/test_reset_offsets_spark.py."""
from __future__ import annotations

import base64
import csv
import io
import json
import sys
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, run_cli

TOPIC = "wmcheck-kafka-etl"


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "_wmcheck" not in p.parts}


@pytest.fixture
def etl(copy_fixture) -> Path:
    return copy_fixture("kafka_etl")


def reset(root: Path, *args: str, exit_code: int = 0):
    return run_cli("reset-offsets", root / "checkpoint", "--idle", "0", *args, exit_code=exit_code)


def test_the_dry_run_lists_each_partition_as_kafka_consumer_groups_does_and_changes_nothing(etl):
    before = tree(etl)
    out = reset(etl, "--shift-by", "-2", "--file-sink", etl / "output").output
    assert tree(etl) == before
    table = out[out.index("Offsets (where the next batch starts)"):out.index("What the file sink")].strip().splitlines()
    assert table[1].split() == ["TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET", "DIFFERENCE"]
    assert [line.split() for line in table[3:]] == [[TOPIC, "0", "13", "11", "-2"], [TOPIC, "1", "13", "11", "-2"]]
    assert "mode:           dry run: nothing was changed (add --execute to apply)" in out
    assert "last committed: 6 -> 7" in out
    assert "note:           batch 8 starts source 0 at the new offsets (2 of 2 partition(s) move, --shift-by -2)" in out
    assert "warning:        4 record(s) are read again and written to the sink a second time" in out
    steps = out[out.index("Steps"):].splitlines()[3:]
    assert [line.split()[:4] for line in steps] == [["0", "write", "offsets", "offsets/7"],
                                                    ["1", "write", "commits", "commits/7"],
                                                    ["2", "write", "sink", "_spark_metadata/7"]]


def test_json_and_csv_carry_the_request_the_offsets_and_the_steps(etl):
    doc = json.loads(reset(etl, "--to-offset", "5", "--topic", f"{TOPIC}:1", "--format", "json").output)
    assert doc["command"] == "reset-offsets" and doc["executed"] is False
    assert doc["request"] == {"source_id": "0", "offsets": json.dumps({TOPIC: {"1": 5}}, separators=(",", ":")),
                              "batch": 7}
    assert doc["sources"] == [{"source_id": "0", "kind": "kafka", "position": f"{TOPIC}/1", "before": "13",
                               "after": "5"}]
    assert [s["path"] for s in doc["steps"]] == ["offsets/7", "commits/7"]
    written = base64_text(doc["steps"][0]["data_base64"]).splitlines()
    assert written[0] == "v1" and written[2] == json.dumps({TOPIC: {"0": 13, "1": 5}}, separators=(",", ":"))
    assert json.loads(written[1])["batchWatermarkMs"] == 0
    fields = dict(csv.reader(io.StringIO(reset(etl, "--to-offset", "5", "--format", "csv").output)))
    assert (fields["command"], fields["request.offsets"], fields["request.batch"]) == (
        "reset-offsets", json.dumps({TOPIC: {"0": 5, "1": 5}}, separators=(",", ":")), "7")


def base64_text(data: str) -> str:
    return base64.b64decode(data).decode()


def test_export_writes_what_from_file_reads_and_both_give_one_plan(etl, tmp_path):
    exported = reset(etl, "--shift-by", "-3", "--export").output
    assert exported.splitlines() == ["topic,partition,offset", f"{TOPIC},0,10", f"{TOPIC},1,10"]
    csv_file = tmp_path / "offsets.csv"
    csv_file.write_text(exported)
    by_file = json.loads(reset(etl, "--from-file", csv_file, "--format", "json").output)
    by_shift = json.loads(reset(etl, "--shift-by", "-3", "--format", "json").output)
    assert [s["data_base64"] for s in by_file["steps"]] == [s["data_base64"] for s in by_shift["steps"]]


def test_execute_writes_the_batch_check_finds_nothing_and_undo_restores_every_byte(etl):
    before = tree(etl)
    out = reset(etl, "--shift-by", "-2", "--file-sink", etl / "output", "--execute").output
    assert "mode:           applied; backup " in out
    assert (etl / "checkpoint/offsets/7").read_text().splitlines()[2] == json.dumps(
        {TOPIC: {"0": 11, "1": 11}}, separators=(",", ":"))
    assert (etl / "output/_spark_metadata/7").read_bytes() == b"v1"
    assert json.loads((etl / "checkpoint/commits/7").read_text().splitlines()[1]) == {"nextBatchWatermarkMs": 0}
    shown = run_cli("show", etl / "checkpoint").output
    assert "last committed:             7" in shown and "next batch:                 8" in shown
    run_cli("check", etl / "checkpoint")
    undone = run_cli("undo", etl / "checkpoint", "--idle", "0").output
    assert "status:         applied -> undone" in undone
    assert tree(etl) == before


def test_a_saved_plan_is_applied_without_the_broker_or_the_spec(etl, tmp_path):
    plan = tmp_path / "plan.json"
    reset(etl, "--to-offset", "4", "--plan-out", plan)
    reset(etl, "--from-plan", plan, "--execute")
    assert (etl / "checkpoint/offsets/7").read_text().splitlines()[2] == json.dumps(
        {TOPIC: {"0": 4, "1": 4}}, separators=(",", ":"))


def test_a_stateful_query_gets_its_next_state_version_as_the_last_one(copy_fixture):
    agg = copy_fixture("kafka_agg")
    doc = json.loads(reset(agg, "--shift-by", "-1", "--format", "json").output)
    state = [s for s in doc["steps"] if s["phase"] == "state"]
    assert [s["path"] for s in state] == ["state/0/0/10.delta", "state/0/1/10.delta"]
    for s in state:
        source = agg / "checkpoint" / s["path"].replace("10.delta", "9.delta")
        assert base64.b64decode(s["data_base64"]) == source.read_bytes()
    assert doc["warnings"][0].startswith("2 record(s) are read again while the state is kept: an aggregation counts "
                                         "them a second time, a deduplication drops them, and rows behind the "
                                         "watermark are dropped as late")


@pytest.mark.parametrize(("args", "message", "param"), [
    (["--to-offset", "-1"], "cannot reset: offset -1 of wmcheck-kafka-etl/0 is negative", "--to-offset"),
    (["--to-offset", "1", "--shift-by", "2"], "reset-offsets takes exactly one of", "--shift-by"),
    ([], "reset-offsets takes exactly one of", "--to-offset"),
    (["--to-earliest"], "--to-earliest asks the broker: pass --bootstrap-server HOST:PORT", "--bootstrap-server"),
    (["--to-offset", "1", "--topic", "other"], "the source does not read topic 'other'", "--topic"),
    (["--to-offset", "1", "--topic", f"{TOPIC}:7"], "the source does not read partition 7 of wmcheck-kafka-etl",
     "--topic"),
    (["--to-offset", "1", "--topic", f"{TOPIC}:x"], "expected TOPIC or TOPIC:PARTITION,PARTITION...", "--topic"),
    (["--to-offset", "1", "--source", "3"], "offsets/6 has no source '3'", "--source"),
])
def test_bad_requests_are_one_line_exit_2_and_change_nothing(etl, args, message, param):
    before = tree(etl)
    result = reset(etl, *args, "--format", "json", exit_code=2)
    error = json.loads(result.output)
    assert message in error["error"], error
    assert tree(etl) == before


def test_a_query_without_a_kafka_source_is_refused(copy_fixture):
    agg = copy_fixture("agg_window_hdfs")
    out = reset(agg, "--to-offset", "1", exit_code=2).output
    assert out.startswith("Error: offsets/12 has no Kafka source") and len(out.strip().splitlines()) == 1


def test_a_bad_csv_names_the_file_and_line(etl, tmp_path):
    bad = tmp_path / "offsets.csv"
    bad.write_text(f"{TOPIC},0,5\n{TOPIC},zero,5\n")
    out = reset(etl, "--from-file", bad, exit_code=2).output
    assert "line 2" in out and "expected TOPIC,PARTITION,OFFSET" in out and str(bad) in out
    assert len(out.strip().splitlines()) == 1


def test_a_broker_that_does_not_answer_fails_in_one_line_within_the_timeout(etl):
    started = time.monotonic()
    out = reset(etl, "--to-latest", "--bootstrap-server", "127.0.0.1:1", "--timeout", "1", exit_code=2).output
    assert time.monotonic() - started < 15
    assert out.startswith("Error: the Kafka broker at 127.0.0.1:1 did not answer a metadata request within 1 s")
    assert len(out.strip().splitlines()) == 1


def test_without_the_kafka_client_the_broker_options_name_the_extra(etl, monkeypatch):
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)
    out = reset(etl, "--to-latest", "--bootstrap-server", "127.0.0.1:9092", exit_code=2).output
    assert out.startswith("Error: asking the Kafka broker needs the Kafka client, which is not installed")
    assert "pip install 'wmcheck[kafka]'" in out


@pytest.mark.parametrize("name", ["kafka_etl", "kafka_agg"])
def test_the_kafka_fixtures_read_in_every_command(name):
    facts = json.loads((FIXTURES / name / "kafka.json").read_text())
    ckpt = FIXTURES / name / "checkpoint"
    last = facts["batches"][-1][-1]
    shown = run_cli("show", ckpt).output
    assert f"last committed:             {last}" in shown
    assert f"kafka   topics {facts['topic']}" in shown
    rows = json.loads(run_cli("batches", ckpt, "--format", "json").output)
    assert [r["batch"] for r in rows] == list(range(last + 1))
    assert run_cli("check", ckpt, "--format", "json").stdout.strip() == "[]"


def test_a_batch_a_failed_restart_planned_is_replaced_and_undo_puts_it_back(etl):
    planned = (etl / "checkpoint/offsets/6").read_bytes().replace(b'"0":13,"1":13', b'"0":20,"1":20')
    (etl / "checkpoint/offsets/7").write_bytes(planned)
    before = tree(etl)
    doc = json.loads(reset(etl, "--to-offset", "2", "--format", "json").output)
    assert doc["notes"][-1] == ("batch 7 was planned but not committed (a restart that failed): its offsets and the "
                                "state it wrote are replaced, the originals kept in the backup")
    offsets_step = doc["steps"][0]
    assert (offsets_step["path"], offsets_step["sha256"] is not None) == ("offsets/7", True)
    assert offsets_step["reason"] == "batch 7 ends at the new offsets (replacing the failed batch's)"
    reset(etl, "--to-offset", "2", "--execute")
    assert (etl / "checkpoint/offsets/7").read_text().splitlines()[2] == json.dumps(
        {TOPIC: {"0": 2, "1": 2}}, separators=(",", ":"))
    run_cli("undo", etl / "checkpoint", "--idle", "0")
    assert tree(etl) == before


def test_two_batches_planned_past_the_last_commit_are_refused(etl):
    for batch in (7, 8):
        (etl / f"checkpoint/offsets/{batch}").write_bytes((etl / "checkpoint/offsets/6").read_bytes())
    out = reset(etl, "--to-offset", "2", exit_code=2).output
    assert out.startswith("Error: batches 7..8 are planned but not committed (wmcheck check: WM005)")


def test_a_reset_to_where_the_next_batch_starts_writes_nothing(etl):
    before = tree(etl)
    out = reset(etl, "--to-offset", "13", "--execute").output
    assert "note:           the next batch starts at these offsets already: nothing to write" in out
    assert "mode:           applied; nothing needed changing" in out
    assert tree(etl) == before
