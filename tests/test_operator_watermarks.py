"""Each stateful operator's own watermarks against what Spark printed in every batch's plan (the fixtures' event logs)."""
from __future__ import annotations

import csv
import io
import json
import re
from datetime import timezone

import pytest

from wmcheck.checkpoint.errors import spelled
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.timeutil import format_ms
from wmcheck.checkpoint.watermarks.operators import CHECKPOINT, JOIN_CONDITION, PLAN, UNKNOWN, operator_watermarks
from wmcheck.checkpoint.watermarks.plans import JOIN, NONE, PASSES, batch_plan
from wmcheck.checkpoint.watermarks.progress import QueryProgress
from wmcheck.checkpoint.watermarks.progress_files import load_progress, read_records

from conftest import FIXTURES, fixture_checkpoint, fixture_facts, run_cli

SPARK35 = ["join_then_agg_spark35", "agg_then_agg_spark35", "dedup_then_agg_spark35", "fmgws_then_agg_spark35"]
"""The same chains written by pyspark 3.5.9 (it has no transformWithState)."""
CHAINS = ["join_then_agg", "agg_then_agg", "dedup_then_agg", "fmgws_then_agg", "tws_then_agg", "fmgws_tws_agg", *SPARK35]
BASE = 1704067200000  # 2024-01-01T00:00:00Z


def query_id(name: str) -> str:
    return json.loads((fixture_checkpoint(name) / "metadata").read_text())["id"]


def progress(name: str) -> QueryProgress:
    return load_progress(query_id(name), str(FIXTURES / name / "eventlog"))


def printed(name: str) -> dict[int, dict[int, tuple[int | None, int | None]]]:
    """batch -> operator -> (late, evict) as Spark printed them."""
    return {b: {op.operator_id: (op.late_ms, op.evict_ms) for op in plan.root.operators()}
            for b, plan in progress(name).plans.items()}


def derived(name: str, with_plan_of: int | None) -> dict[int, dict[int, tuple[int | None, int | None]]]:
    """The model's values when the event log holds only the plan of batch ``with_plan_of`` (None: no event log)."""
    found = progress(name)
    plans = {with_plan_of: found.plans[with_plan_of]} if with_plan_of is not None else {}
    known = QueryProgress(found.query_id, found.run_ids, found.batches, plans)
    model = operator_watermarks(open_checkpoint(str(fixture_checkpoint(name))), known if plans else None)
    return {b.batch: {o.operator_id: (o.late_ms, o.evict_ms) for o in b.operators} for b in model.batches}


@pytest.mark.parametrize("name", CHAINS)
def test_every_batch_has_its_plan_in_the_event_log(name):
    facts = fixture_facts(name)
    plans = progress(name).plans
    assert sorted(plans) == [b["batch"] for b in facts["batches"]]
    assert {op.operator_id for op in plans[facts["last_batch"]].root.operators()} == \
        {op["operator_id"] for op in facts["operators"]}


@pytest.mark.parametrize("name", CHAINS)
def test_derived_watermarks_equal_the_plans_of_every_batch(name):
    """From the last batch's plan alone (the operators' order, a join's condition offset) and the checkpoint's global
    watermarks, every earlier batch's late and eviction watermark of every operator is what Spark printed."""
    spark = printed(name)
    last = max(spark)
    got = derived(name, last)
    assert {b: got[b] for b in spark} == spark


@pytest.mark.parametrize("name", ["agg_then_agg", "dedup_then_agg", "tws_then_agg", "agg_then_agg_spark35",
                                  "dedup_then_agg_spark35"])
def test_without_an_event_log_chains_that_pass_the_watermark_on_are_exact(name):
    spark = printed(name)
    got = derived(name, None)
    assert {b: got[b] for b in spark} == spark
    model = operator_watermarks(open_checkpoint(str(fixture_checkpoint(name))))
    assert {o.source for b in model.batches for o in b.operators} == {CHECKPOINT}
    assert model.topology_from.startswith("the checkpoint")


def test_join_then_agg_in_numbers():
    """The join's time-range condition (r_ts within 10 s of l_ts) holds the aggregation 10.001 s behind the global
    watermark; the next batch's values come from the condition's offset applied to the checkpoint's watermark."""
    ckpt = open_checkpoint(str(fixture_checkpoint("join_then_agg")))
    model = operator_watermarks(ckpt, progress("join_then_agg"))
    assert model.allow_multiple is True and model.topology_from == "batch 7's plan in the event log"
    join, agg = model.link(1), model.link(0)
    assert (join.name, join.node, join.output, join.join_offset_ms) == ("symmetricHashJoin", "StreamingSymmetricHashJoin", JOIN, -10001)
    assert (agg.name, agg.node, agg.upstream, agg.output) == ("stateStoreSave", "StateStoreSave", (1,), PASSES)
    b7 = model.batch(7)
    assert (b7.watermark_ms, b7.previous_ms, b7.planned) == (BASE + 44000, BASE + 31000, True)
    assert (b7.of(1).late_ms, b7.of(1).evict_ms, b7.of(1).source) == (BASE + 31000, BASE + 44000, PLAN)
    assert (b7.of(0).late_ms, b7.of(0).evict_ms, b7.of(0).source) == (BASE + 20999, BASE + 33999, PLAN)
    nxt = model.batch(8)
    assert (nxt.watermark_ms, nxt.planned) == (ckpt.watermark_ms, False) == (BASE + 44000, False)
    assert (nxt.of(0).late_ms, nxt.of(0).evict_ms, nxt.of(0).source) == (BASE + 33999, BASE + 33999, JOIN_CONDITION)
    assert nxt.of(0).note.startswith("the global watermark -10.001 s: the condition of symmetricHashJoin (operator 1)")
    assert (nxt.of(1).evict_ms, nxt.of(1).source) == (BASE + 44000, CHECKPOINT)


def test_join_upstream_without_an_event_log_is_unknown_with_the_reason():
    model = operator_watermarks(open_checkpoint(str(fixture_checkpoint("join_then_agg"))))
    assert model.topology_from == "the checkpoint (no plan: operators taken as one chain, operator 0 last)"
    zero, later = model.batch(0).of(0), model.batch(5).of(0)
    assert (zero.late_ms, zero.evict_ms, zero.source) == (0, 0, CHECKPOINT)  # a global watermark of 0 is no one's guess
    assert (later.late_ms, later.evict_ms, later.source) == (None, None, UNKNOWN)
    assert spelled(later.note) == ("a stream-stream join upstream, symmetricHashJoin (operator 1), holds its output "
                                   "watermark back by its time-range condition, which only the plan records: pass "
                                   "Spark's event log of the query (progress=EVENTLOG)")
    assert model.batch(5).of(1).evict_ms == BASE + 21000  # the join itself takes the global watermark


def test_no_watermark_below_flatmapgroupswithstate():
    """applyInPandasWithState passes no watermark on: transformWithState and the aggregation after it get 0 (the
    timers never fire, the aggregation never emits); without the plan that is unknown (a withWatermark after it would
    give the global one, as in fmgws_then_agg)."""
    model = operator_watermarks(open_checkpoint(str(fixture_checkpoint("fmgws_tws_agg"))), progress("fmgws_tws_agg"))
    assert [(o.operator_id, o.output, o.watermark_from) for o in model.operators] == \
        [(0, PASSES, (1,)), (1, PASSES, (2,)), (2, NONE, ())]
    last = model.batches[-1]
    assert last.watermark_ms > 0
    assert [(o.operator_id, o.late_ms, o.evict_ms) for o in last.operators] == \
        [(0, 0, 0), (1, 0, 0), (2, last.previous_ms, last.watermark_ms)]
    assert last.of(0).source == CHECKPOINT and "applyInPandasWithState (operator 2) upstream passes no watermark on" in last.of(0).note
    blind = operator_watermarks(open_checkpoint(str(fixture_checkpoint("fmgws_tws_agg"))))
    assert (blind.batches[-1].of(0).source, blind.batches[-1].of(0).evict_ms) == (UNKNOWN, None)
    assert "unless the query calls withWatermark again after it" in blind.batches[-1].of(0).note

    again = operator_watermarks(open_checkpoint(str(fixture_checkpoint("fmgws_then_agg"))), progress("fmgws_then_agg"))
    assert (again.link(0).upstream, again.link(0).watermark_from) == ((1,), ())  # a withWatermark in between
    last = again.batches[-1]
    assert (last.of(0).late_ms, last.of(0).evict_ms) == (last.previous_ms, last.watermark_ms)


def test_allow_multiple_false_gives_every_operator_the_batch_watermark():
    model = operator_watermarks(open_checkpoint(str(fixture_checkpoint("join_then_agg"))), allow_multiple=False)
    assert model.allow_multiple is False and model.allow_multiple_from == "given (allow_multiple=False)"
    b5 = model.batch(5)
    assert {(o.late_ms, o.evict_ms) for o in b5.operators} == {(b5.watermark_ms, b5.watermark_ms)}


def test_plan_strings_as_spark_prints_them():
    """Each exec's own argument order, taken from the fixtures' event logs."""
    records = read_records(str(FIXTURES / "tws_then_agg" / "eventlog"))
    plan = max((p for p in records.plans), key=lambda p: p.batch_id)
    tws = plan.operators[1]
    assert (tws.node, tws.output_watermark) == ("TransformWithStateInPySpark", PASSES)
    dedup = read_records(str(FIXTURES / "dedup_then_agg" / "eventlog")).plans[3].operators[1]
    assert (dedup.node, dedup.late_ms, dedup.evict_ms) == ("StreamingDeduplicate", BASE + 5000, BASE + 15000)
    assert batch_plan({"description": "no batch here", "sparkPlanInfo": {}}) is None


# -- what the state says: the rows "evicted next" are the rows Spark removed ---------------------------------------

def _stores(name: str) -> list[str]:
    from wmcheck.statestore.discovery import select

    return sorted({s.name for s in select(open_checkpoint(str(fixture_checkpoint(name))), None, None)})


EVICTION_STORES = [(n, s) for n in CHAINS for s in _stores(n) if s in ("default", "left", "right", "$eventTimers_keyToTimestamp")]
SKIPPED_STORES = {("tws_then_agg", "$eventTimers_keyToTimestamp")}
"""Its processor deletes and registers timers itself on every new row, so timers go without being evicted."""


def _rows(table, with_value: bool) -> list[str]:
    cols = ["partition_id", "key"] + (["value"] if with_value else [])
    return sorted(json.dumps({c: r[c] for c in cols}, default=str, sort_keys=True) for r in table.to_pylist())


def removed_by_spark(ckpt, store, batch: int, with_value: bool, engine: str = "python", spark=None) -> list[str]:
    """The rows of ``store`` in the state batch ``batch`` starts from that the state after it no longer holds."""
    from collections import Counter

    from wmcheck.statestore import engines

    def rows(b):
        table = engines.read_state(ckpt, store.operator_id, store.name, b, engine=engine, spark=spark)
        return _rows(table if engine == "python" else _arrow(table), with_value)

    return sorted((Counter(rows(batch)) - Counter(rows(batch + 1))).elements())


def _arrow(df):
    return df.select("partition_id", "key", "value").toArrow()


def evicted_next(ckpt, store, batch: int, prog, with_value: bool, engine: str = "python", spark=None) -> list[str]:
    from wmcheck.statestore import engines

    table = engines.older_than_watermark(ckpt, store.operator_id, store.name, batch, engine=engine, spark=spark, progress=prog)
    return _rows(table if engine == "python" else _arrow(table), with_value)


def eviction_cases(name: str, store_name: str):
    from wmcheck.statestore.discovery import select

    ckpt = open_checkpoint(str(fixture_checkpoint(name)))
    stores = [s for s in select(ckpt, None, None) if s.name == store_name]
    # every batch that starts from committed state and whose own state was committed after it
    batches = [b for b in ckpt.commit_ids if b >= 1 and b - 1 in ckpt.commit_ids]
    return ckpt, stores, batches


@pytest.mark.parametrize(("name", "store_name"), [c for c in EVICTION_STORES if c not in SKIPPED_STORES])
def test_evicted_next_is_what_spark_removed(name, store_name):
    """At every batch, the rows judged older than each operator's own eviction watermark are exactly the rows the
    state after that batch no longer holds (python engine; tests/test_state_spark.py does it with Spark's reader)."""
    ckpt, stores, batches = eviction_cases(name, store_name)
    prog = progress(name)
    for store in stores:
        join = store.name in ("left", "right")
        for batch in batches:
            assert evicted_next(ckpt, store, batch, prog, join) == removed_by_spark(ckpt, store, batch, join), (store, batch)


def test_the_global_watermark_would_have_evicted_windows_spark_kept():
    """The aggregation after the join: by the global watermark windows would go that Spark kept for a batch longer."""
    from wmcheck.statestore import engines

    ckpt, stores, batches = eviction_cases("join_then_agg", "default")
    wrong = []
    for batch in batches:
        state = engines.read_state(ckpt, 0, "default", batch, engine="python")
        by_global = state.filter([r["key"]["window"]["end"].timestamp() * 1000 <= ckpt.offsets(batch).metadata.batch_watermark_ms
                                  for r in state.to_pylist()])
        if _rows(by_global, False) != removed_by_spark(ckpt, stores[0], batch, False):
            wrong.append(batch)
    assert wrong == [3, 4, 5, 6, 7]  # and with the operator's own watermark, none (test above)


def test_state_refuses_an_operator_whose_watermark_is_unknown():
    from conftest import run_cli

    ckpt = fixture_checkpoint("join_then_agg")
    out = run_cli("state", str(ckpt), "--operator", "0", "--older-than-watermark", exit_code=2)
    line = out.stderr.strip()
    assert "\n" not in line
    assert line.startswith("Error: operator 0's own eviction watermark at batch 8 is unknown: a stream-stream join "
                           "upstream, symmetricHashJoin (operator 1), holds its output watermark back")
    assert "--progress EVENTLOG" in line and "--watermark TIME" in line
    shown = run_cli("state", str(ckpt), "--operator", "0", "--older-than-watermark", "--progress",
                    str(FIXTURES / "join_then_agg" / "eventlog"), "--format", "json")
    rows = json.loads(shown.stdout)
    assert rows == []  # [30 s, 40 s) ends after 33.999 s: Spark keeps it, though the global watermark (44 s) is past it
    summary = json.loads(run_cli("state", str(ckpt), "--format", "json").stdout)
    agg = next(s for s in summary["stores"] if s["operator_id"] == 0)
    assert (agg["older_than_watermark"], agg["watermark_ms"], agg["histogram"]) == (None, None, None)
    assert "is unknown" in agg["watermark_from"]


def test_a_join_sides_state_watermark_is_unknown_without_the_event_log():
    """A stream-stream join removes each side's rows by a state watermark derived from the other side's watermark and
    the join's condition, which only the plan records: without the event log its rows are not judged by the join's
    eviction watermark (join_stream_stream's left row at 41 s is kept by Spark although the watermark is 44 s)."""
    from conftest import run_cli

    ckpt = str(fixture_checkpoint("join_stream_stream"))
    out = run_cli("state", ckpt, "--older-than-watermark", exit_code=2)
    assert out.stdout == "" and out.stderr.count("\n") == 1
    assert out.stderr == (
        "Error: operator 0's state watermark of its left side at batch 8 is unknown: a stream-stream join removes each "
        "side's rows by a state watermark that Spark derives from the other side's watermark and the join's condition "
        "(a time range or a window key), which only the plan in the event log records, not by its eviction watermark: "
        "pass Spark's event log of the query (--progress EVENTLOG) (hint: or pass --watermark TIME to judge its state "
        "by a watermark you choose)\n")
    summary = json.loads(run_cli("state", ckpt, "--format", "json").stdout)
    assert [(s["store"], s["older_than_watermark"], s["watermark_ms"]) for s in summary["stores"]] == [
        ("left", None, None), ("right", None, None)]
    assert all("left state watermark is unknown" in s["watermark_from"] or "right state watermark is unknown"
               in s["watermark_from"] for s in summary["stores"])
    logged = json.loads(run_cli("state", str(fixture_checkpoint("join_then_agg")), "--operator", "1", "--format", "json",
                                "--progress", str(FIXTURES / "join_then_agg" / "eventlog")).stdout)
    assert [(s["store"], s["watermark_from"].split(", ", 1)[1]) for s in logged["stores"]] == [
        ("left", "operator 1's left state watermark (the join condition in the event log)"),
        ("right", "operator 1's right state watermark (the join condition in the event log)")]


# -- show and batches ------------------------------------------------------------------------------------------------


def test_show_lists_each_operators_own_watermarks():
    from conftest import run_cli

    ckpt, log = str(fixture_checkpoint("join_then_agg")), str(FIXTURES / "join_then_agg" / "eventlog")
    doc = json.loads(run_cli("show", ckpt, "--progress", log, "--format", "json").stdout)
    ops = {o["operator_id"]: o for o in doc["operators"]}
    assert (ops[0]["late_watermark_ms"], ops[0]["eviction_watermark_ms"], ops[0]["watermark_source"]) == \
        (BASE + 33999, BASE + 33999, JOIN_CONDITION)
    assert (ops[1]["late_watermark_ms"], ops[1]["eviction_watermark_ms"], ops[1]["watermark_source"]) == \
        (BASE + 44000, BASE + 44000, CHECKPOINT)
    table = run_cli("show", ckpt, "--progress", log).stdout
    assert "Operator watermarks (batch 8)" in table
    assert re.search(r"^0 +stateStoreSave +2024-01-01T00:00:33\.999Z +2024-01-01T00:00:33\.999Z \(-10\.001s\) +join condition "
                     r"+the global watermark "
                     r"-10\.001 s", table, re.M)
    blind = json.loads(run_cli("show", ckpt, "--format", "json").stdout)
    agg = blind["operators"][0]
    assert (agg["late_watermark_ms"], agg["eviction_watermark_ms"], agg["watermark_source"]) == (None, None, UNKNOWN)
    assert "--progress EVENTLOG" in agg["watermark_note"]
    assert re.search(r"^0 +stateStoreSave +unknown +unknown +unknown ", run_cli("show", ckpt).stdout, re.M)
    csv_text = run_cli("show", ckpt, "--format", "csv").stdout
    assert "operators.0.eviction_watermark_ms," in csv_text and "operators.0.watermark_source,unknown" in csv_text


def test_batches_operators_per_batch_in_every_format():
    from conftest import run_cli

    ckpt, log = str(fixture_checkpoint("join_then_agg")), str(FIXTURES / "join_then_agg" / "eventlog")
    rows = json.loads(run_cli("batches", ckpt, "--operators", "--progress", log, "--format", "json").stdout)
    spark = printed("join_then_agg")
    assert {r["batch"]: {o["operator_id"]: (o["late_ms"], o["evict_ms"]) for o in r["operators"]} for r in rows} == spark
    assert {o["source"] for r in rows for o in r["operators"]} == {PLAN}
    plain = json.loads(run_cli("batches", ckpt, "--format", "json").stdout)
    assert {r["operators"] is None for r in plain} == {True}
    table = run_cli("batches", ckpt, "--operators", "--progress", log, "--from", "7").stdout
    assert "operator 0 late / evict" in table.splitlines()[0] and "operator 1 late / evict" in table.splitlines()[0]
    assert "2024-01-01T00:00:20.999Z / 2024-01-01T00:00:33.999Z (-10.001s)" in table  # times in a table, ms in JSON and CSV
    assert "2024-01-01T00:00:31.000Z / 2024-01-01T00:00:44.000Z" in table
    csv_rows = list(csv.DictReader(io.StringIO(run_cli("batches", ckpt, "--operators", "--format", "csv").stdout)))
    assert json.loads(csv_rows[5]["operators"].split("; ")[0])["source"] == UNKNOWN


# -- with Spark's own state reader -----------------------------------------------------------------------------------

SPARK_SAMPLES = [("join_then_agg", "default", (3, 7)), ("join_then_agg", "left", (5,)), ("join_then_agg", "right", (6,)),
                 ("tws_then_agg", "default", (4,)), ("join_then_agg_spark35", "default", (3, 6))]


@pytest.mark.spark
@pytest.mark.parametrize(("name", "store_name", "batches"), SPARK_SAMPLES)
def test_evicted_next_is_what_spark_removed_read_by_spark(spark, name, store_name, batches):
    """The same through Spark's state reader (``--engine spark``), at a sample of batches."""
    ckpt, stores, _ = eviction_cases(name, store_name)
    prog = progress(name)
    for store in stores:
        join = store.name in ("left", "right")
        for batch in batches:
            assert evicted_next(ckpt, store, batch, prog, join, "spark", spark) == \
                removed_by_spark(ckpt, store, batch, join, "spark", spark), (store, batch)


# -- replay: each operator's late rows against Spark's numRowsDroppedByWatermark -------------------------------------

REPLAYED = ["agg_then_agg", "dedup_then_agg", "join_then_agg", "tws_then_agg", "fmgws_tws_agg", "fmgws_then_agg",
            "join_then_agg_spark35", "fmgws_then_agg_spark35"]


@pytest.mark.spark
@pytest.mark.parametrize("name", REPLAYED)
def test_replayed_late_rows_per_operator_equal_sparks(spark, name):
    """Every operator's late rows in every batch: the replay's for the operator reading the input (late groups for an
    aggregation; a join's sources summed), 0 after operators that pass their watermark on (or with a late-events
    watermark of 0); after applyInPandasWithState's function re-watermarked (fmgws_then_agg) the replay cannot tell."""
    from wmcheck.statestore.spark.late_rows import infer_window, window_key
    from wmcheck.statestore.spark.replay import ReplayOptions, prepare, replay

    from conftest import root_map

    ckpt = open_checkpoint(str(fixture_checkpoint(name)))
    facts = fixture_facts(name)
    prog = progress(name)
    sources = ["0", "1"] if name.startswith("join_then_agg") else [None]
    got: dict[int, dict[int, int | None]] = {}
    for source in sources:
        opts = ReplayOptions(source=source, source_format="json", schema="id STRING, ts TIMESTAMP, v INT", event_time="ts",
                             path_map=dict([root_map(name).split("=", 1)]))
        keys: tuple[str, ...] = ()
        stored = window_key(ckpt, prog)
        if stored is not None:
            inferred = infer_window(spark, ckpt, stored)
            opts = ReplayOptions(**{**opts.__dict__, "window": inferred.spec})
            keys = inferred.group_by
        for row in replay(spark, prepare(ckpt, 0, None, opts), opts, lambda _df, _b: None, keys, ckpt=ckpt, progress=prog):
            for op in row.operators:
                before = got.setdefault(row.batch, {}).get(op.operator_id)
                add = op.late_rows
                got[row.batch][op.operator_id] = None if add is None else (before or 0) + add
    spark_counts = {b["batch"]: {i: o["num_rows_dropped_by_watermark"] for i, o in enumerate(b["state_operators"])}
                    for b in facts["batches"]}
    unknown = {(b, op) for b, ops in got.items() for op, n in ops.items() if n is None}
    assert {(b, op): n for b, ops in got.items() for op, n in ops.items() if n is not None} == \
        {(b, op): n for b, ops in spark_counts.items() for op, n in ops.items() if (b, op) not in unknown}
    assert sum(n for ops in spark_counts.values() for n in ops.values()) > 0
    assert unknown == ({(b, 0) for b in got if b >= 2} if name.startswith("fmgws_then_agg") else set())


# -- timeline and the stall diagnosis ---------------------------------------------------------------------------------


def test_timeline_draws_each_operators_watermark_and_where_it_parts(tmp_path):
    from wmcheck.checkpoint.watermarks.timeline import event_time_lines, figure, save, timeline

    ckpt = open_checkpoint(str(fixture_checkpoint("join_then_agg")))
    tl = timeline(ckpt, progress("join_then_agg"))
    agg, join = tl.operators
    assert (agg.label, agg.parts_at, agg.stuck_at_zero) == ("operator 0 (stateStoreSave)", 1, False)
    assert agg.values == tuple(v[0][1] for _, v in sorted(printed("join_then_agg").items()))
    assert (join.parts_at, join.values) == (None, tuple(b.watermark_ms for b in tl.batches))
    assert [line.label for line in event_time_lines(tl)] == [
        "watermark", "operator 0 (stateStoreSave) eviction watermark", "operator 1 (symmetricHashJoin) eviction watermark",
        "max event time (progress)"]
    fig = figure(tl)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "operator 0 parts" in texts
    save(tl, fig, str(tmp_path / "t.png"))
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    stuck = timeline(open_checkpoint(str(fixture_checkpoint("fmgws_tws_agg"))), progress("fmgws_tws_agg"))
    assert [(o.operator_id, o.stuck_at_zero, o.parts_at) for o in stuck.operators] == [(0, True, 1), (1, True, 1), (2, False, None)]
    assert "operators 0 (0), 1 (0) part" in [t.get_text() for t in figure(stuck).axes[0].texts]
    single = timeline(open_checkpoint(str(fixture_checkpoint("agg_window_hdfs"))))
    assert single.operators == ()


def test_show_names_operators_held_still_while_the_global_watermark_moves():
    from conftest import run_cli

    ckpt, log = str(fixture_checkpoint("fmgws_tws_agg")), str(FIXTURES / "fmgws_tws_agg" / "eventlog")
    doc = json.loads(run_cli("show", ckpt, "--progress", log, "--format", "json").stdout)
    assert [(s["operator_id"], s["watermark_ms"], s["since_batch"]) for s in doc["operator_stalls"]] == [(0, 0, 0), (1, 0, 0)]
    assert doc["operator_stalls"][0]["explanation"] == (
        "stateStoreSave (operator 0)'s own watermark has stayed at 0 since batch 0 while the global watermark moved on "
        f"to {doc['watermark_ms']}: applyInPandasWithState (operator 2) upstream passes no watermark on")
    assert "operator stall:" in run_cli("show", ckpt, "--progress", log).stdout
    for name in ("join_then_agg", "agg_then_agg", "fmgws_tws_agg"):  # moving with the global one, or unknown: silent
        shown = run_cli("show", str(fixture_checkpoint(name)), "--format", "json").stdout
        assert json.loads(shown)["operator_stalls"] == []
    assert json.loads(run_cli("show", str(fixture_checkpoint("join_then_agg")), "--progress",
                              str(FIXTURES / "join_then_agg" / "eventlog"), "--format", "json").stdout)["operator_stalls"] == []


def test_a_chosen_watermark_judges_an_operator_whose_own_is_unknown():
    """What the hint of the refusal says: --watermark TIME is taken as the operator's own where the global watermark
    does not tell it; with the event log it is a global what-if, from which the operator's own follows."""
    from conftest import run_cli

    ckpt, log = str(fixture_checkpoint("join_then_agg")), str(FIXTURES / "join_then_agg" / "eventlog")
    chosen = run_cli("state", ckpt, "--operator", "0", "--older-than-watermark", "--watermark", str(BASE + 44000)).stdout
    assert chosen.splitlines()[0] == ("watermark 1704067244000 (2024-01-01T00:00:44.000Z, --watermark, taken as operator 0's "
                                      "eviction watermark (what the global watermark gives it is unknown))")
    assert chosen.count('"end":"2024-01-01T00:00:40.000000Z"') == 1  # [30 s, 40 s): what the global watermark would evict
    what_if = run_cli("state", ckpt, "--operator", "0", "--older-than-watermark", "--watermark", str(BASE + 44000),
                      "--progress", log, "--format", "json").stdout
    assert json.loads(what_if) == []  # the aggregation gets 33.999 s from it: Spark keeps [30 s, 40 s)


@pytest.mark.parametrize(("name", "drops"), [("pandas_state_p3", {0: None}), ("pandas_state_timeout", {0: None}),
                                            ("fmgws_then_agg", {0: True, 1: None}), ("agg_window_hdfs", {0: True})])
def test_batches_operators_say_whether_an_operator_drops_late_input_as_show_does(name, drops):
    """One rule for show and batches --operators: a group-state operator whose timeout only the plan tells may drop
    no late input (``(if it drops any)`` in the table, null in JSON), the others drop by their late watermark."""
    ckpt = fixture_checkpoint(name)
    shown = json.loads(run_cli("show", ckpt, "--format", "json").stdout)
    assert {op["operator_id"]: op["drops_late_input"] for op in shown["operators"]} == drops
    rows = json.loads(run_cli("batches", ckpt, "--operators", "--format", "json").stdout)
    assert {(o["operator_id"], o["drops_late_input"]) for r in rows for o in r["operators"]} == set(drops.items())
    last = rows[-1]
    table = run_cli("batches", ckpt, "--operators", "--last", "1", "--wide").stdout.splitlines()[-1]
    for o in last["operators"]:
        late = "unknown" if o["late_ms"] is None else format_ms(o["late_ms"], timezone.utc)
        cell = late if o["drops_late_input"] else f"{late} (if it drops any)"
        assert f"{cell} / " in table
