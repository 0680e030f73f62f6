"""The section "what the sink does" of reset-offsets, set-watermark and repartition, in every output format, with bad
input; and what it says proven by real restarts against control runs:

* reset-offsets back on a Kafka source: a Kafka sink gets the records read again a second time (counted), a
  foreachBatch function gets them under new batch ids, a Delta sink (Kafka connector and Delta Lake in one Spark)
  writes them again: the table holds the re-read rows twice;
* set-watermark on a planned-but-uncommitted batch: the batch runs again with the new watermark, and Spark's Delta
  sink skips it while the table's txn holds its id.
"""
from __future__ import annotations

import csv
import io
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from delta_spark import delta_python, relocated_copy, restart
from test_kafka_sink import calls, rows, topic_values

from wmcheck.checkpoint import repair

from conftest import FIXTURES, fixture_facts, run_cli
from kafka_env import Record, create_topic, produce, unique_topic

TOPIC = "wmcheck-kafka-etl"
T0 = 1_704_067_200_000
NO_RERUN = "no batch runs again: the sink gets the next batch only"
AGAIN = "4 record(s) read again (wmcheck-kafka-etl/0: 2, wmcheck-kafka-etl/1: 2)"


def reset(root: Path, *args: str, exit_code: int = 0):
    return run_cli("reset-offsets", root / "checkpoint", "--idle", "0", *args, exit_code=exit_code)


def test_reset_offsets_says_per_sink_what_the_records_read_again_do_in_every_format(copy_fixture):
    etl = copy_fixture("kafka_etl")
    args = ("--shift-by", "-2", "--kafka-sink", "out", "--foreach-batch", "--file-sink", etl / "output")
    out = reset(etl, *args).output
    titles = [line for line in out.splitlines() if line.startswith("What the")]
    ids = "from batch 8 on (batch ids the sink never saw)"
    assert titles == [
        f"What the kafka sink does with the batches read from the new offsets: Spark's Kafka sink writes the records "
        f"read again to out a second time {ids}: {AGAIN}",
        f"What the foreachBatch sink does with the batches read from the new offsets: the function is called {ids} "
        "with records it was called with before under other ids: a plain append writes them twice, and a writer keyed "
        f"on the batch id (Delta's txnAppId/txnVersion) writes them too: {AGAIN}",
        "What the file sink does with the batches read from the new offsets: the file sink writes the records read "
        f"again a second time {ids}: its log has no entry for them: {AGAIN}"]
    doc = json.loads(reset(etl, *args, "--format", "json").output)
    assert [(s["kind"], s["location"], s["batches"]) for s in doc["sinks"]] == [
        ("kafka", "out", [{"batch": 8, "action": "duplicate", "version": None, "files": 0, "rows": 4}]),
        ("foreachBatch", "", [{"batch": 8, "action": "duplicate", "version": None, "files": 0, "rows": 4}]),
        ("file", str(etl / "output"), [{"batch": 8, "action": "duplicate", "version": None, "files": 0, "rows": 4}])]
    fields = dict(csv.reader(io.StringIO(reset(etl, *args, "--format", "csv").output)))
    assert (fields["sinks.0.kind"], fields["sinks.0.batches.0.action"], fields["sinks.0.batches.0.rows"]) == (
        "kafka", "duplicate", "4")
    assert fields["sinks.2.summary"].endswith(AGAIN)


def test_a_reset_forward_says_the_records_skipped_never_reach_the_sink(copy_fixture):
    etl = copy_fixture("kafka_etl")
    doc = json.loads(reset(etl, "--shift-by", "3", "--kafka-sink", "out", "--format", "json").output)
    [effect] = doc["sinks"]
    assert effect["batches"] == [{"batch": 8, "action": "write", "version": None, "files": 0, "rows": 0}]
    assert effect["summary"] == ("the records reach out once from batch 8 on (batch ids the sink never saw): 6 "
                                 "record(s) skipped, never read by the query and never reaching the sink "
                                 "(wmcheck-kafka-etl/0: 3, wmcheck-kafka-etl/1: 3)")


@pytest.mark.parametrize("command", [("reset-offsets", "--shift-by", "-2"), ("set-watermark", "--watermark", "0"),
                                     ("repartition", "--partitions", "3")])
def test_a_delta_sink_that_is_no_delta_table_is_one_line_exit_2_and_changes_nothing(copy_fixture, command):
    root = copy_fixture("kafka_etl" if command[0] == "reset-offsets" else "agg_window_rocksdb")
    before = sorted((p, p.read_bytes()) for p in root.rglob("*") if p.is_file())
    out = run_cli(command[0], root / "checkpoint", *command[1:], "--delta-sink", root / "output", "--idle", "0",
                  "--execute", exit_code=2).output
    assert out.splitlines() == [f"Error: no _delta_log/ commits in {root / 'output'}: not a Delta table (hint: pass "
                                "the table's directory (the path the query writes to), or omit --delta-sink)"]
    assert sorted((p, p.read_bytes()) for p in root.rglob("*") if p.is_file()) == before


def test_set_watermark_and_repartition_on_a_committed_batch_run_no_batch_again(copy_fixture):
    delta = copy_fixture("agg_window_delta")
    out = run_cli("set-watermark", delta / "checkpoint", "--watermark", "-1 minute", "--delta-sink", delta / "output",
                  "--kafka-sink", "out", "--foreach-batch", "--idle", "0").output
    assert [line for line in out.splitlines() if line.startswith("What the")] == [
        f"What the {kind} sink does with the re-run batches: {NO_RERUN}" for kind in ("delta", "kafka", "foreachBatch")]
    doc = json.loads(run_cli("set-watermark", delta / "checkpoint", "--watermark", "-1 minute", "--delta-sink",
                             delta / "output", "--idle", "0", "--format", "json").output)
    assert [(s["kind"], s["committed"], s["batches"], s["summary"]) for s in doc["sinks"]] == [
        ("delta", 12, [], NO_RERUN)]
    rocks = copy_fixture("agg_window_rocksdb")
    fields = dict(csv.reader(io.StringIO(run_cli("repartition", rocks / "checkpoint", "--partitions", "3",
                                                 "--foreach-batch", "--idle", "0", "--format", "csv").output)))
    assert (fields["sinks.0.kind"], fields["sinks.0.summary"]) == ("foreachBatch", NO_RERUN)


def records(start: int, count: int) -> list[Record]:
    return [Record(i % 2, str(i), T0 + i * 1000) for i in range(start, start + count)]


def reset_back(ckpt: Path, **sinks) -> repair.RepairResult:
    request = repair.ResetOffsetsRequest(shift_by=-2, **sinks)
    return repair.run(str(ckpt), request, repair.RunOptions(execute=True, idle_ms=0))


def twin_runs(worker, query: str, bootstrap: str, tmp_path: Path, options) -> tuple[str, Path, Path]:
    """A source topic of 12 records read in 3 batches of 4 by two copies of ``query`` (the reset one and the control),
    each with its options from ``options(name)``."""
    source = create_topic(bootstrap, unique_topic("src"), 2)
    produce(bootstrap, source, records(0, 12))
    for name in ("reset", "control"):
        answer = worker.run(query, bootstrap, {"subscribe": source}, tmp_path / name / "ckpt", tmp_path / name / "out",
                            {"maxOffsetsPerTrigger": "4", **options(name)})
        assert answer["ok"] and answer["batches"] == [0, 1, 2], answer
    return source, tmp_path / "reset", tmp_path / "control"


def restart_both(worker, query: str, bootstrap: str, source: str, runs: tuple[Path, Path], options) -> None:
    produce(bootstrap, source, records(12, 4))
    for root in runs:
        answer = worker.run(query, bootstrap, {"subscribe": source}, root / "ckpt", root / "out", options(root.name))
        assert answer["ok"], answer


SAID = "from batch 4 on (batch ids the sink never saw)"
READ_AGAIN = "4 record(s) read again ({t}/0: 2, {t}/1: 2)"


@pytest.mark.spark
def test_a_reset_back_duplicates_in_the_kafka_sink_exactly_the_records_it_counts(spark_kafka, kafka_bootstrap,
                                                                                tmp_path):
    sinks = {name: create_topic(kafka_bootstrap, unique_topic(name), 1) for name in ("reset", "control")}
    source, reset_root, control = twin_runs(spark_kafka, "kafka_to_kafka", kafka_bootstrap, tmp_path,
                                            lambda name: {"sinkTopic": sinks[name]})
    plan = reset_back(reset_root / "ckpt", kafka_sink=sinks["reset"]).plan
    [effect] = plan.sinks
    assert [(b.batch, b.action, b.rows) for b in effect.batches] == [(4, "duplicate", 4)]
    assert effect.summary == (f"Spark's Kafka sink writes the records read again to {sinks['reset']} a second time "
                              f"{SAID}: {READ_AGAIN.format(t=source)}")
    restart_both(spark_kafka, "kafka_to_kafka", kafka_bootstrap, source, (reset_root, control),
                 lambda name: {"sinkTopic": sinks[name]})
    got, want = topic_values(kafka_bootstrap, sinks["reset"]), topic_values(kafka_bootstrap, sinks["control"])
    assert want == Counter({str(i): 1 for i in range(16)})
    assert got - want == Counter({"8": 1, "9": 1, "10": 1, "11": 1})  # offsets 4 and 5 of each partition, once more
    assert sum(got.values()) == 16 + 4


@pytest.mark.spark
def test_a_reset_back_calls_foreach_batch_with_new_ids_and_records_it_saw(spark_kafka, kafka_bootstrap, tmp_path):
    source, reset_root, control = twin_runs(spark_kafka, "kafka_foreach_batch", kafka_bootstrap, tmp_path,
                                            lambda name: {})
    [effect] = reset_back(reset_root / "ckpt", foreach_batch=True).plan.sinks
    assert [(b.batch, b.action, b.rows) for b in effect.batches] == [(4, "duplicate", 4)]
    assert effect.summary.startswith(f"the function is called {SAID} with records it was called with before")
    restart_both(spark_kafka, "kafka_foreach_batch", kafka_bootstrap, source, (reset_root, control), lambda name: {})
    assert calls(control / "out") == {0: 1, 1: 1, 2: 1, 3: 1}
    assert calls(reset_root / "out") == {0: 1, 1: 1, 2: 1, 4: 1}  # batch 3 is the reset's (it reads nothing)
    seen = Counter((r["partition"], r["offset"]) for r in rows(reset_root / "out"))
    assert {k for k, n in seen.items() if n == 2} == {(p, o) for p in (0, 1) for o in (4, 5)}
    assert sorted((r["partition"], r["offset"]) for r in rows(reset_root / "out") if r["batch_id"] == 4) == [
        (p, o) for p in (0, 1) for o in range(4, 8)]


def delta_rows(table: Path) -> Counter:
    from deltalake import DeltaTable

    return Counter((r["partition"], r["offset"], r["value"]) for r in DeltaTable(str(table)).to_pyarrow_table().to_pylist())


@pytest.mark.spark
def test_a_reset_back_writes_the_records_read_again_to_a_delta_sink_a_second_time(spark_kafka_delta, kafka_bootstrap,
                                                                                 tmp_path):
    source, reset_root, control = twin_runs(spark_kafka_delta, "kafka_to_delta", kafka_bootstrap, tmp_path,
                                            lambda name: {})
    [effect] = reset_back(reset_root / "ckpt", delta_sink=str(reset_root / "out")).plan.sinks
    assert (effect.kind, effect.committed, [(b.batch, b.action, b.rows) for b in effect.batches]) == (
        "delta", 2, [(4, "duplicate", 4)])
    assert effect.summary == ("the table's txn for this query is at 2: Spark's Delta sink writes the records read again "
                              f"{SAID}, so their rows land in the table twice: {READ_AGAIN.format(t=source)}")
    restart_both(spark_kafka_delta, "kafka_to_delta", kafka_bootstrap, source, (reset_root, control), lambda name: {})
    got, want = delta_rows(reset_root / "out"), delta_rows(control / "out")
    assert want == Counter({(i % 2, i // 2, str(i)): 1 for i in range(16)})
    assert got - want == Counter({(i % 2, i // 2, str(i)): 1 for i in (8, 9, 10, 11)})


@pytest.mark.spark
def test_set_watermark_on_a_planned_batch_the_delta_sink_holds_runs_it_again_and_the_sink_skips_it(tmp_path):
    """Batch 12 wrote the table (txn 12) but its commit file is gone: set-watermark's plan says batch 12 runs again
    and is skipped; Spark re-runs it and the table keeps version 12, txn 12 and the control run's rows."""
    delta_python()
    root = relocated_copy("agg_window_delta", tmp_path / "agg_window_delta")
    for path in (root / "checkpoint" / "commits" / "12", root / "checkpoint" / "commits" / ".12.crc"):
        path.unlink(missing_ok=True)
    args = ("set-watermark", root / "checkpoint", "--watermark", "-1 minute", "--delta-sink", root / "output",
            "--idle", "0", "--format", "json")
    doc = json.loads(run_cli(*args).output)
    [effect] = doc["sinks"]
    assert [(b["batch"], b["action"], b["version"]) for b in effect["batches"]] == [(12, "skip", 12)]
    assert effect["summary"].startswith("the table's txn for this query is at 12: Spark's Delta sink skips the re-run "
                                        "batches 12 and writes nothing for them")
    run_cli(*args, "--execute")
    out = restart("delta_restarts.py", [{"root": str(root)}])
    [got] = out["jobs"]
    assert (got["error"], got["batches"][0], got["version"], got["txn"]) == (None, 12, 12, 12)
    assert got["rows"] == out["control"]


def test_the_python_api_takes_the_sinks_of_every_repair(copy_fixture):
    import wmcheck

    etl = copy_fixture("kafka_etl")
    [effect] = wmcheck.reset_offsets(str(etl / "checkpoint"), shift_by=-2, kafka_sink="out").plan.sinks
    assert (effect.kind, [(b.batch, b.action, b.rows) for b in effect.batches]) == ("kafka", [(8, "duplicate", 4)])
    delta = copy_fixture("agg_window_delta")
    [effect] = wmcheck.set_watermark(str(delta / "checkpoint"), "-1 minute", delta_sink=str(delta / "output")).plan.sinks
    assert (effect.kind, effect.committed, effect.batches, effect.summary) == ("delta", 12, (), NO_RERUN)


@pytest.mark.spark
def test_set_watermark_on_a_planned_batch_the_file_sink_logged_runs_it_again_and_the_sink_skips_it(spark, tmp_path):
    """Batch 12 wrote its files and log entry but its commit file is gone: the plan says batch 12 runs again and the
    file sink skips it; Spark re-runs it and the sink's log entry and rows stay as they were."""
    from test_repair_spark import fixture_conf, run_query, sink_rows

    name = "agg_window_hdfs"
    root = tmp_path / name
    shutil.copytree(FIXTURES / name, root)
    run_cli("relocate", root / "checkpoint", "--path-map", f"{fixture_facts(name)['root']}={root}", "--file-sink",
            root / "output", "--execute", "--idle", "0")
    for path in (root / "checkpoint" / "commits" / "12", root / "checkpoint" / "commits" / ".12.crc"):
        path.unlink(missing_ok=True)
    args = ("set-watermark", root / "checkpoint", "--watermark", "-1 minute", "--file-sink", root / "output",
            "--idle", "0")
    table = run_cli(*args).output
    assert ("What the file sink does with the re-run batches: its log holds batch 12: Spark's file sink skips the "
            "re-run batch(es) 12 and writes nothing for them (their files stay as first written)") in table
    fields = dict(csv.reader(io.StringIO(run_cli(*args, "--format", "csv").output)))
    assert (fields["sinks.0.kind"], fields["sinks.0.committed"], fields["sinks.0.batches.0.batch"],
            fields["sinks.0.batches.0.action"]) == ("file", "12", "12", "skip")
    run_cli(*args, "--execute")
    entry = (root / "output" / "_spark_metadata" / "12").read_bytes()
    with fixture_conf(spark, name):
        before = sink_rows(spark, name, root)
        progress = run_query(spark, name, root)
        after = sink_rows(spark, name, root)
    assert progress[0]["batchId"] == 12
    assert (root / "output" / "_spark_metadata" / "12").read_bytes() == entry
    assert after == before
