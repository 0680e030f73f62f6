"""Every command on the six Kafka fixtures real Spark 4.2 queries wrote against a real broker (no broker needed):
show, batches, check, timeline, state, replay --plan, rewind (dry run, then executed and undone), each asserted with
the exact batches, offsets per topic-partition, next batch and watermark the fixture's kafka.json and records.json
say Spark wrote."""
from __future__ import annotations

import hashlib
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from wmcheck.checkpoint import repair

from conftest import FIXTURES, run_cli

NAMES = ("kafka_etl", "kafka_agg", "kafka_pattern", "kafka_grow", "kafka_named", "kafka_async")
AGG_WATERMARK = 1_704_067_229_000  # the last record's timestamp (T0 + 39 s) minus the 10 s delay


def facts(name: str) -> dict:
    return json.loads((FIXTURES / name / "kafka.json").read_text())


def ckpt(name: str) -> Path:
    return FIXTURES / name / "checkpoint"


def off(**topics: dict[int, int]) -> str:
    """The offsets JSON Spark writes for a Kafka source, topics named without their ``wmcheck-`` prefix."""
    return json.dumps({f"wmcheck-{t.replace('_', '-')}": {str(p): o for p, o in parts.items()}
                       for t, parts in topics.items()}, separators=(",", ":"))


def etl(a: int) -> str:
    return off(kafka_etl={0: a, 1: a})


# Each fixture's batches as Spark logged them: batch id -> its offsets (in Spark's own topic order).
BATCHES: dict[str, dict[int, str]] = {
    "kafka_etl": {b: etl(min(2 * b + 2, 13)) for b in range(7)},
    "kafka_agg": {b: off(kafka_agg={0: n, 1: n}) for b, n in enumerate([4, 8, 8, 12, 15, 15, 19, 20, 20])},
    "kafka_pattern": {
        0: off(kpat_a={0: 1, 1: 1}, kpat_b={0: 2}), 1: off(kpat_a={0: 3, 1: 3}, kpat_b={0: 4}),
        2: off(kpat_a={0: 4, 1: 4}, kpat_b={0: 6}), 3: off(kpat_a={0: 5, 1: 5}, kpat_b={0: 7}),
        4: off(kpat_a={0: 6, 1: 6}, kpat_c={0: 3}, kpat_b={0: 7})},
    "kafka_grow": {0: off(kafka_grow={0: 2, 1: 2}), 1: off(kafka_grow={0: 4, 1: 4}),
                   2: off(kafka_grow={0: 5, 1: 5, 2: 1}), 3: off(kafka_grow={0: 6, 1: 6, 2: 2}),
                   4: off(kafka_grow={0: 7, 1: 7, 2: 3})},
    "kafka_named": {b: off(kafka_named={0: n, 1: n}) for b, n in enumerate([2, 4, 6, 7])},
    "kafka_async": {b: off(kafka_async={0: n, 1: n}) for b, n in [(0, 1), (1, 2), (4, 5), (5, 6), (7, 8)]},
}
NEXT = {"kafka_etl": 7, "kafka_agg": 9, "kafka_pattern": 5, "kafka_grow": 5, "kafka_named": 4, "kafka_async": 8}
WATERMARK = {name: AGG_WATERMARK if name == "kafka_agg" else 0 for name in NAMES}
WATERMARK_TEXT = {n: "2024-01-01T00:00:29.000Z" if n == "kafka_agg" else "1970-01-01T00:00:00.000Z" for n in NAMES}
AGG_NEXT_WATERMARKS = [1704067197000, 1704067205000, 1704067205000, 1704067213000, 1704067219000, 1704067219000,
                       1704067227000, 1704067229000, 1704067229000]
AGG_NO_DATA = {2, 5, 8}


def summary(offsets: str) -> str:
    """``show``'s one-line summary of a Kafka offset: topic[partition]=offset, sorted."""
    parsed = json.loads(offsets)
    return ", ".join(f"{t}[{p}]={o}" for t in sorted(parsed) for p, o in sorted(parsed[t].items(), key=lambda x: int(x[0])))


def test_the_last_offsets_are_every_record_the_fixture_produced():
    """The expectations above are the data: the last batch ends after every record records.json says was sent."""
    for name in NAMES:
        topic = facts(name)["topic"]
        sent = Counter((r.get("topic", topic), r["partition"]) for r in json.loads((FIXTURES / name / "records.json").read_text()))
        last = json.loads(BATCHES[name][max(BATCHES[name])])
        assert {(t, int(p)): o for t, parts in last.items() for p, o in parts.items()} == dict(sent), name


@pytest.mark.parametrize("name", NAMES)
def test_show_json_and_table(name):
    doc = json.loads(run_cli("show", ckpt(name), "--format", "json").stdout)
    last = max(BATCHES[name])
    assert doc["verdict"] == {"restarts": True, "next_batch": NEXT[name], "watermark_ms": WATERMARK[name],
                              "watermark": WATERMARK_TEXT[name], "errors": 0,
                              "warnings": 1 if name == "kafka_async" else 0,
                              "worst": {"code": "WM085", "severity": "warning", "path": "offsets/2",
                                        "message": ASYNC_MESSAGE} if name == "kafka_async" else None}
    assert (doc["first_batch"], doc["last_batch"], doc["last_committed_batch"], doc["pending_batch"],
            doc["next_batch"], doc["watermark_ms"]) == (0, last, last, None, NEXT[name], WATERMARK[name])
    topics = sorted(json.loads(BATCHES[name][last]))
    assert [(s["source_id"], s["kind"], s["summary"], s["location"]) for s in doc["sources"]] == [
        ("0", "kafka", summary(BATCHES[name][last]), "topics " + ", ".join(topics))]
    assert json.loads(doc["sources"][0]["offset"]) == json.loads(BATCHES[name][last])
    assert [f["code"] for f in doc["findings"]] == (["WM085"] if name == "kafka_async" else [])
    lines = run_cli("show", ckpt(name)).stdout.splitlines()
    assert lines[0] == (f"restarts:                   yes: Spark runs batch {NEXT[name]} next, with watermark "
                        f"{doc['verdict']['watermark_ms']} ({doc['verdict']['watermark']})"
                        + "; state file contents not decoded (wmcheck check decodes them)")
    assert f"batches:                    0..{last}" in lines
    assert f"next batch:                 {NEXT[name]}" in lines
    row = next(line for line in lines if line.startswith("0            kafka"))
    assert row.endswith(summary(BATCHES[name][last])) and "topics " + ", ".join(topics) in row


def test_show_kafka_agg_watermark_is_the_last_event_minus_the_delay():
    doc = json.loads(run_cli("show", ckpt("kafka_agg"), "--format", "json").stdout)
    assert (doc["watermark_ms"], doc["watermark"]) == (AGG_WATERMARK, "2024-01-01T00:00:29.000Z")
    assert [(o["operator_id"], o["name"]) for o in doc["operators"]] == [(0, "stateStoreSave")]


@pytest.mark.parametrize("name", NAMES)
def test_batches_json_and_table(name):
    rows = json.loads(run_cli("batches", ckpt(name), "--format", "json").stdout)
    assert [(r["batch"], r["committed"], r["sources"]) for r in rows] == [
        (b, True, [o]) for b, o in sorted(BATCHES[name].items())]
    if name == "kafka_agg":
        assert [r["next_batch_watermark_ms"] for r in rows] == AGG_NEXT_WATERMARKS
        assert [r["batch_watermark_ms"] for r in rows] == [0] + AGG_NEXT_WATERMARKS[:-1]
        assert {r["batch"] for r in rows if r["kind"] == "no-data"} == AGG_NO_DATA
    else:
        assert {(r["kind"], r["batch_watermark_ms"], r["next_batch_watermark_ms"]) for r in rows} == {("data", 0, 0)}
    table = run_cli("batches", ckpt(name)).stdout.splitlines()
    assert [line.split()[0] for line in table[2:]] == [str(b) for b in sorted(BATCHES[name])]
    for line, (_, offsets) in zip(table[2:], sorted(BATCHES[name].items())):
        assert summary(offsets) in line, line


OFFLINE = ("note: WM081-WM084 compare Kafka offsets with the topics as the broker holds them now: not verified without "
           "the broker (pass --bootstrap-server HOST:PORT)")


@pytest.mark.parametrize("name", [n for n in NAMES if n != "kafka_async"])
def test_check_passes_every_kafka_fixture(name):
    result = run_cli("check", ckpt(name), "--format", "json")
    assert json.loads(result.stdout) == []
    table = run_cli("check", ckpt(name)).output.splitlines()
    assert table[0] == OFFLINE
    assert table[-1].endswith(": ok: 0 error(s), 0 warning(s) from 80 checks")


@pytest.mark.parametrize("name", NAMES)
def test_timeline_draws_every_batch(name, tmp_path):
    out = tmp_path / f"{name}.svg"
    doc = json.loads(run_cli("timeline", ckpt(name), "--output", out, "--format", "json").stdout)
    assert doc == {"output": str(out), "batches": len(BATCHES[name]), "stall": None}
    assert out.read_text().startswith('<?xml version="1.0" encoding="utf-8" standalone="no"?>')
    assert run_cli("timeline", ckpt(name), "--output", out).stdout.splitlines()[1:] == [
        f"batches: {len(BATCHES[name])}", "stall:   none"]


def test_state_of_the_kafka_aggregation():
    doc = json.loads(run_cli("state", ckpt("kafka_agg"), "--format", "json").stdout)
    assert (doc["batch"], doc["state_batch_id"], doc["watermark_ms"], doc["watermark_from"]) == (
        9, 8, AGG_WATERMARK, "next batch")
    [store] = doc["stores"]
    assert (store["operator_name"], store["rows"], store["rows_per_partition"], store["event_time_column"],
            store["older_than_watermark"], store["oldest_event_time"]) == (
        "stateStoreSave", 2, {"0": 0, "1": 2}, "key.window.end", 0, "2024-01-01T00:00:30.000Z")  # [20,30) and [30,40)
    table = run_cli("state", ckpt("kafka_agg")).stdout.splitlines()
    assert table[1:3] == ["batch:      9 (state written by batch 8)",
                          "watermark:  1704067229000 (2024-01-01T00:00:29.000Z, next batch)"]


@pytest.mark.parametrize("name", [n for n in NAMES if n != "kafka_agg"])
def test_state_of_a_stateless_kafka_query_is_one_line_exit_2(name):
    assert run_cli("state", ckpt(name), exit_code=2).output.strip() == (
        "Error: the checkpoint has no state: no stateful operator wrote under state/ (hint: wmcheck state reads "
        "stateful queries (aggregations, dedup, joins, [flatMap]GroupsWithState, transformWithState))")


def planned(name: str, *args: str) -> list[tuple[int, str, str, int | None, str | None]]:
    doc = json.loads(run_cli("replay", ckpt(name), "--from", "0", "--plan", "--format", "json", *args).stdout)
    return [(b["batch_id"], s["starting_offsets_json"], s["ending_offsets_json"], s["records"], s["note"])
            for b in doc["batches"] for s in b["sources"]]


def chained(name: str) -> list[tuple[int, str, str, int | None, str | None]]:
    """Each batch reads from where the one before ended to its own end (the first from offset 0 of each partition)."""
    out, start = [], None
    for b, end in sorted(BATCHES[name].items()):
        ends = json.loads(end)
        begin = start or {t: dict.fromkeys(parts, 0) for t, parts in ends.items()}
        out.append((b, json.dumps(begin, separators=(",", ":")), end,
                    sum(ends[t][p] - begin.get(t, {}).get(p, 0) for t in ends for p in ends[t]), None))
        start = ends
    return out


@pytest.mark.parametrize("name", ["kafka_etl", "kafka_agg", "kafka_named"])
def test_replay_plan_names_each_batch_s_offsets(name):
    assert planned(name) == chained(name)
    table = run_cli("replay", ckpt(name), "--from", "0", "--plan").stdout.splitlines()
    assert table[1:3] == [f"batches:           0..{max(BATCHES[name])}", "oldest replayable: 0"]
    rows = table[table.index("Batches") + 3:table.index("Files") - 1]
    assert [(r.split()[0], r.split()[-3:]) for r in rows] == [
        (str(b), [start, "->", end]) for b, start, end, _, _ in chained(name)]


def test_replay_plan_of_topics_and_partitions_that_appeared_mid_stream():
    earliest = "new partitions start at the earliest offset: "
    got = planned("kafka_pattern")
    assert got[:4] == chained("kafka_pattern")[:4]
    assert got[4] == (4, off(kpat_a={0: 5, 1: 5}, kpat_b={0: 7}, kpat_c={0: -2}),
                      off(kpat_a={0: 6, 1: 6}, kpat_b={0: 7}, kpat_c={0: 3}), None, earliest + "wmcheck-kpat-c[0]")
    grow = planned("kafka_grow")
    assert grow[2] == (2, off(kafka_grow={0: 4, 1: 4, 2: -2}), off(kafka_grow={0: 5, 1: 5, 2: 1}), None,
                       earliest + "wmcheck-kafka-grow[2]")
    assert [g[3] for g in grow] == [4, 4, None, 3, 3]


def relocated(name: str, tmp_path: Path) -> Path:
    """A copy of the fixture whose logs name its own files (they name where it was generated)."""
    root = tmp_path / name
    shutil.copytree(FIXTURES / name, root)
    sink = str(root / "output") if (root / "output" / "_spark_metadata").is_dir() else None
    repair.run(str(root / "checkpoint"), repair.RelocateRequest(path_map={facts(name)["root"]: str(root)}, file_sink=sink),
               repair.RunOptions(execute=True, idle_ms=0))
    shutil.rmtree(root / "checkpoint" / "_wmcheck", ignore_errors=True)
    return root


def digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "_wmcheck" not in p.parts}


REWIND_TO = {"kafka_etl": 4, "kafka_agg": 6, "kafka_pattern": 2, "kafka_grow": 1, "kafka_named": 2, "kafka_async": 5}


@pytest.mark.parametrize("name", NAMES)
def test_rewind_dry_run_then_executed_then_undone_restores_every_byte(name, tmp_path):
    root = relocated(name, tmp_path)
    before = digest(root)
    target = REWIND_TO[name]
    sink = ["--file-sink", root / "output"] if (root / "output").is_dir() else []
    args = ["rewind", root / "checkpoint", "--to-batch", target, *sink, "--idle", "0", "--format", "json"]
    plan = json.loads(run_cli(*args).stdout)
    assert digest(root) == before  # a dry run changes nothing
    resumed = json.loads(BATCHES[name][target])
    last = json.loads(BATCHES[name][max(BATCHES[name])])
    assert [(s["position"], s["before"], s["after"]) for s in plan["sources"]] == [  # Spark reads new ones anew
        (f"{t}/{p}", str(last[t][p]), str(resumed[t][p]) if p in resumed.get(t, {}) else "earliest")
        for t in sorted(last) for p in sorted(last[t])]
    new = [f"{t}[{p}]" for t in sorted(last) for p in sorted(last[t]) if p not in resumed.get(t, {})]
    assert f"source 0 (kafka) restarts from its offsets of batch {target}: {summary(BATCHES[name][target])}" + (
        f", and {', '.join(new)}, which it had not read by then, from the earliest offset the broker keeps (Spark "
        "reads partitions its offsets do not name from there)" if new else "") + (
        "; data the source no longer retains (e.g. past Kafka retention) cannot be replayed") in plan["warnings"]
    removed = sorted(b for b in BATCHES[name] if b > target)
    assert sorted({s["path"] for s in plan["steps"] if s["phase"] == "offsets"}) == sorted(
        f"offsets/{x}" for b in removed for x in (b, f".{b}.crc"))
    table = run_cli(*args[:-2]).stdout.splitlines()
    assert f"last batch:     {max(BATCHES[name])} -> {target}" in table
    sources = table[table.index("Sources (where each continues from)") + 3:]
    for t in sorted(last):
        for p in sorted(last[t]):
            after = str(resumed[t][p]) if p in resumed.get(t, {}) else "earliest"
            assert sources.pop(0).split() == ["0", "kafka", f"{t}/{p}", str(last[t][p]), after]
    assert sources[0] == ""
    assert digest(root) == before
    done = run_cli(*args[:-2], "--execute").stdout.splitlines()
    assert any(line.startswith("mode:           applied; backup ") for line in done)
    assert json.loads(run_cli("show", root / "checkpoint", "--format", "json").stdout)["next_batch"] == target + 1
    rows = json.loads(run_cli("batches", root / "checkpoint", "--format", "json").stdout)
    assert [r["batch"] for r in rows] == [b for b in sorted(BATCHES[name]) if b <= target]
    steps = plan["steps"]
    undone = run_cli("undo", root / "checkpoint", "--idle", "0").stdout.splitlines()
    assert "status:         applied -> undone" in undone and f"restored:       {len(steps)} file(s)" in undone
    assert digest(root) == before
    assert json.loads(run_cli("show", root / "checkpoint", "--format", "json").stdout)["next_batch"] == NEXT[name]


ASYNC_MESSAGE = (
    "offsets/ and commits/ both skip batch(es) 2..3, 6, every batch logged is committed and the query is stateless: the "
    "pattern asyncProgressTrackingEnabled writes (offsets and commits logged once per "
    "asyncProgressTrackingCheckpointIntervalMs; the option is not recorded in the checkpoint, so this is judged from "
    "the pattern). Restarted with asyncProgressTrackingEnabled, Spark resumes at batch 8 from offsets/7 "
    "(wmcheck-kafka-async[0]=8, wmcheck-kafka-async[1]=8), reading offsets/5 as the batch before it (tested with Spark "
    "4.2); without it, Spark fails ('batch 6 doesn't exist'); the batches not logged cannot be rewound to or replayed "
    "alone")


def test_check_reads_async_progress_tracking_s_gaps_as_written_by_design():
    """Not WM002 (an error), WM003 and WM075: one warning, and the restart verdict tests/test_kafka_fixture_restarts.py
    proves with Spark."""
    [finding] = json.loads(run_cli("check", ckpt("kafka_async"), "--format", "json").stdout)
    assert finding == {"code": "WM085", "severity": "warning", "checkpoint": str(ckpt("kafka_async")),
                       "path": "offsets/2", "message": ASYNC_MESSAGE,
                       "fix": {"kind": "instruction", "text": "nothing to change: restart the query with "
                                                               "asyncProgressTrackingEnabled, as it ran",
                               "request": None}}
    table = run_cli("check", ckpt("kafka_async")).output.splitlines()
    assert table[-1] == f"{ckpt('kafka_async')}: ok: 0 error(s), 1 warning(s) from 80 checks"
    assert run_cli("check", ckpt("kafka_async"), "--strict", exit_code=1).output.splitlines()[-1].endswith(
        ": FAIL: 0 error(s), 1 warning(s) from 80 checks")
    show = run_cli("show", ckpt("kafka_async")).stdout.splitlines()
    assert show[1] == f"worst finding:              warning WM085 offsets/2: {ASYNC_MESSAGE}"


def test_gaps_a_lost_file_leaves_are_still_errors(tmp_path):
    """The same gaps with a commit more than its offsets, or in a stateful query, are not async progress tracking's."""
    root = tmp_path / "kafka_async"
    shutil.copytree(FIXTURES / "kafka_async", root)
    (root / "checkpoint" / "commits" / "6").write_text("v1\n{\"nextBatchWatermarkMs\":0}")
    codes = [f["code"] for f in json.loads(run_cli("check", root / "checkpoint", "--format", "json",
                                                   exit_code=1).stdout)]
    assert codes == ["WM002", "WM003", "WM004", "WM075"]
    etl = tmp_path / "kafka_etl"
    shutil.copytree(FIXTURES / "kafka_etl", etl)
    for log in ("offsets", "commits"):
        (etl / "checkpoint" / log / "5").unlink()
    codes = [f["code"] for f in json.loads(run_cli("check", etl / "checkpoint", "--format", "json", "--file-sink",
                                                   etl / "output", exit_code=None).stdout)]
    assert "WM002" in codes and "WM085" not in codes  # a file sink: async progress tracking refuses one


def test_replay_plan_of_async_progress_tracking_s_logged_batches():
    assert planned("kafka_async", "--to", "1") == chained("kafka_async")[:2]
    assert planned("kafka_async", "--from", "5", "--to", "5")[0][:4] == (
        5, off(kafka_async={0: 5, 1: 5}), off(kafka_async={0: 6, 1: 6}), 2)
    out = run_cli("replay", ckpt("kafka_async"), "--from", "0", "--plan", exit_code=2).output
    assert out.strip() == (
        "Error: offsets/2: batch 2 cannot be replayed: offsets/2 is missing, a gap in the log (async progress tracking "
        "logs only some batches; otherwise a lost file): each batch needs its offsets file and the one before it "
        "(hint: the batches that can be replayed are 0..1, 5)")


def test_replay_plan_starts_a_named_source_at_its_initial_offsets_in_sources_name_0(tmp_path):
    """kafka_named's source is named ``orders`` (Spark 4.2's ``DataStreamReader.name``): Spark wrote its initial
    offsets to sources/orders/0, not sources/0/0; replay --plan starts batch 0 there."""
    assert sorted(p.name for p in (ckpt("kafka_named") / "sources").iterdir()) == ["orders"]
    assert planned("kafka_named")[0] == (0, off(kafka_named={0: 0, 1: 0}), off(kafka_named={0: 2, 1: 2}), 4, None)
    root = tmp_path / "kafka_named"
    shutil.copytree(FIXTURES / "kafka_named", root)
    initial = root / "checkpoint" / "sources" / "orders" / "0"
    (root / "checkpoint" / "sources" / "orders" / ".0.crc").unlink()
    initial.write_bytes(initial.read_bytes().replace(b'"0":0', b'"0":1'))  # as if startingOffsets began at 1
    doc = json.loads(run_cli("replay", root / "checkpoint", "--from", "0", "--to", "0", "--plan", "--format",
                             "json").stdout)
    [source] = doc["batches"][0]["sources"]
    assert (source["starting_offsets_json"], source["records"]) == (off(kafka_named={0: 1, 1: 0}), 3)
    shutil.rmtree(root / "checkpoint" / "sources" / "orders")
    doc = json.loads(run_cli("replay", root / "checkpoint", "--from", "0", "--to", "0", "--plan", "--format",
                             "json").stdout)
    [source] = doc["batches"][0]["sources"]
    assert (source["replayable"], source["note"]) == (
        False, "the first batch of this source starts at the initial offsets in sources/0/0, which is missing")


def test_a_rewind_to_a_batch_async_progress_tracking_did_not_log_is_refused_naming_the_gap():
    out = run_cli("rewind", ckpt("kafka_async"), "--to-batch", "6", "--idle", "0", exit_code=2).output
    assert out.strip() == (
        "Error: cannot rewind to batch 6: commits/6 does not exist, a gap in the log (async progress tracking logs only "
        "some batches; otherwise a lost file) (and 1 more problems) (hint: the newest batch this checkpoint can be "
        "rewound to is 5)")


def test_async_gaps_before_the_last_two_offsets_restart_with_or_without_the_option(tmp_path):
    """kafka_async as it was after batch 5: Spark reads offsets/4 and offsets/5 either way."""
    root = tmp_path / "kafka_async"
    shutil.copytree(FIXTURES / "kafka_async", root)
    for log in ("offsets", "commits"):
        for name in ("7", ".7.crc"):
            (root / "checkpoint" / log / name).unlink()
    [finding] = json.loads(run_cli("check", root / "checkpoint", "--format", "json").stdout)
    assert (finding["code"], finding["message"]) == ("WM085", (
        "offsets/ and commits/ both skip batch(es) 2..3, every batch logged is committed and the query is stateless: "
        "the pattern asyncProgressTrackingEnabled writes (offsets and commits logged once per "
        "asyncProgressTrackingCheckpointIntervalMs; the option is not recorded in the checkpoint, so this is judged "
        "from the pattern). Restarted with asyncProgressTrackingEnabled or without it, Spark resumes at batch 6 from "
        "offsets/5 (wmcheck-kafka-async[0]=6, wmcheck-kafka-async[1]=6) (it reads offsets/4 and offsets/5 only); the "
        "batches not logged cannot be rewound to or replayed alone"))
