"""``wmcheck compat`` against real restarts: for every change of tests/compat_cases.py (a fixture written by the old
code with pyspark 4.3, and the new code), compat's verdict is what a real restart of the new code on a copy of the
fixture does (the same error class, or a restart), the rows compat's re-run batch wrote are the rows a real restart
of a rewound copy writes for that batch, and the checkpoint compat was given is byte for byte unchanged. All
cases run in one Spark child process (tests/compat_oracle.py)."""
from __future__ import annotations

import json
from collections import Counter

import pytest
from compat_cases import CASES, REFUSED, RESTARTS
from compat_oracle import run

pytestmark = [pytest.mark.spark, pytest.mark.oracle]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    return run(list(CASES), tmp_path_factory.mktemp("compat"))


def _outcome(outcomes, name):
    got = outcomes[name]
    assert "oracle_error" not in got, got.get("oracle_error")
    assert got["compat_error"] is None, got["compat_error"]
    return got


@pytest.mark.parametrize("name", CASES)
def test_the_verdict_is_what_a_real_restart_does(outcomes, name):
    got = _outcome(outcomes, name)
    report, restart = got["compat"], got["restart"]
    assert report["verdict"] == (REFUSED if restart["error"] else RESTARTS), restart["error"]
    assert report["verdict"] == CASES[name].verdict
    if report["verdict"] == REFUSED:
        error_class = report["refusal"]["error_class"]
        assert error_class == CASES[name].error_class
        assert f"[{error_class}]" in restart["error"] or f"caused by: {error_class}" in restart["error"], restart["error"]
        assert got["exit_code"] == 2
    else:
        assert got["exit_code"] == (1 if got["changes"] else 0)


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c.verdict == RESTARTS])
def test_the_rerun_batch_writes_what_a_real_restart_writes(outcomes, name):
    got = _outcome(outcomes, name)
    assert got["rewound_error"] is None, got["rewound_error"]
    assert got["compat_rows"] == got["rewound_rows"]
    output = got["compat"]["output"]
    if output is None:  # no batch ran (a restart plans none without new input), and the real restart wrote none
        assert got["compat"]["how"] == "next" and got["rewound_rows"] is None
        return
    assert output["new_rows"] == len(got["rewound_rows"])
    if output["old_rows"] is not None:  # a file sink: the old code's rows of the batch, read through its log
        common = [c for c in output["new_columns"] if c in output["old_columns"]]  # compared on the columns both have
        old, new = (Counter(json.dumps([json.loads(r).get(c) for c in common]) for r in rows)
                    for rows in (got["old"], got["rewound_rows"]))
        assert (output["old_rows"], output["only_old"], output["only_new"]) == (
            len(got["old"]), sum((old - new).values()), sum((new - old).values()))
        for side, only in (("old", old - new), ("new", new - old)):  # the diff's samples are rows of that side only
            shown = Counter(json.dumps([s["row"].get(c) for c in common]) for s in output["samples"] if s["side"] == side)
            assert sum(shown.values()) == min(5, sum(only.values())) and not shown - only, (side, output["samples"])
    if CASES[name].changes is not None:
        assert got["changes"] == CASES[name].changes, json.dumps(got["compat"], indent=1)


@pytest.mark.parametrize("name", CASES)
def test_the_checkpoint_is_unchanged(outcomes, name):
    assert _outcome(outcomes, name)["unchanged"]


def _refusal(outcomes, name):
    return _outcome(outcomes, name)["compat"]["refusal"]


def _fields(refusal):
    return [(f["name"], f["old"], f["new"], f["change"]) for f in refusal["schema"]["fields"] if f["change"] != "same"]


@pytest.mark.parametrize("name, part, fields, rule", [
    ("change_grouping_keys", "key", [("v", None, "int", "added")], "Streaming aggregation"),
    ("add_aggregate", "value", [("max", None, "int", "added")], "Streaming aggregation"),
    ("change_aggregate_type", "value", [("sum", "bigint", "double", "type")], "Streaming aggregation"),
    ("change_dedup_columns", "key", [("v", None, "int", "added")], "Streaming deduplication"),
    ("unsafe_row_state_add_field", "value of count", [("note", None, "string", "added")], "transformWithState"),
    ("avro_state_narrow_type", "value of count", [("count", "bigint", "int", "type")], "transformWithState"),
])
def test_a_schema_refusal_names_the_operator_store_and_field(outcomes, name, part, fields, rule):
    refusal = _refusal(outcomes, name)
    assert refusal["operator_id"] == 0 and refusal["schema"]["part"] == part
    assert _fields(refusal) == fields
    assert refusal["rule"]["text"].startswith(rule)


def test_operator_and_source_refusals_name_what_changed(outcomes):
    added = _refusal(outcomes, "add_stateful_operator")
    assert added["operators"] == [{"operator_id": 1, "old": None, "new": "dedupe"}]
    removed = _refusal(outcomes, "remove_stateful_operator")
    assert removed["operators"] == [{"operator_id": 0, "old": "stateStoreSave", "new": None}]
    assert added["rule"]["text"].startswith("Changes in stateful operations")
    source = _refusal(outcomes, "add_source")
    assert source["sources"] == [1, 2] and source["rule"]["text"].startswith("Changes in the number or type")
    assert "the new query reads 2: it adds 1 source(s)" in source["explanation"]
    fewer = _refusal(outcomes, "remove_source")
    assert fewer["sources"] == [2, 1] and fewer["rule"]["text"].startswith("Changes in the number or type")
    assert "the new query reads 1: it removes 1 source(s)" in fewer["explanation"]


def test_a_longer_watermark_delay_keeps_the_rows_the_old_one_dropped(outcomes):
    report = _outcome(outcomes, "longer_watermark_delay")["compat"]
    wm = report["watermark"]
    assert wm["delays"] == [{"column": "ts", "old_ms": 10000, "new_ms": 20000, "sources": ["0"], "old_from": "the state schema"}]
    assert (wm["old_next_ms"] - wm["new_next_ms"]) == 10000  # the same max event time, 10 s more delay
    late = wm["late"]
    # fixtures/README.md: b@12, a@15, b@25 and c@44 are dropped with the 10 s delay; 20 s keeps them
    assert (late["old_late"], late["new_late"]) == (4, 0)
    assert sorted((s["row"]["id"], s["row"]["ts"]) for s in late["samples"]) == [
        ("a", "2024-01-01T00:00:15.000Z"), ("b", "2024-01-01T00:00:12.000Z"), ("b", "2024-01-01T00:00:25.000Z"),
        ("c", "2024-01-01T00:00:44.000Z")]


def test_an_evolved_avro_state_schema_is_reported(outcomes):
    added = _outcome(outcomes, "avro_state_add_field")["compat"]["schemas"]
    assert [(s["part"], s["old"], s["new"]) for s in added] == [("value of count", "count: bigint", "count: bigint, note: string")]
    renamed = _outcome(outcomes, "avro_state_rename_field")["compat"]["schemas"]
    assert [(f["name"], f["change"]) for s in renamed for f in s["fields"]] == [("count", "removed"), ("total", "added")]


def test_a_pinned_watermark_policy_is_noted(outcomes):
    wm = _outcome(outcomes, "min_watermark_policy")["compat"]["watermark"]
    assert (wm["policy"], wm["session_policy"]) == ("max", "min")
    assert any("a restart keeps max" in n for n in wm["notes"])


def test_a_moved_source_path_is_noted(outcomes):
    notes = _outcome(outcomes, "swap_source_path")["compat"]["notes"]
    assert any("now reads" in n and "input_v2" in n for n in notes), notes


@pytest.mark.parametrize("name", ["swap_source_path_pending", "swap_source_path_after_data"])
def test_a_moved_source_path_is_refused_where_spark_reads_its_logged_files(outcomes, name):
    """A planned batch re-run, or the last committed batch's files read back on restart: under the old path."""
    refusal = _refusal(outcomes, name)
    assert refusal["rule"]["text"].startswith("Changes in the parameters of input sources")
    assert refusal["explanation"].startswith("a file source now reads ") and "/input_v2, but on restart Spark reads " \
        "files its log recorded" in refusal["explanation"]
    assert "/input/run" in refusal["explanation"]


def test_longer_windows_restart_with_both_window_lengths_in_state(outcomes):
    """The key schema (a window struct and the id) does not change, so Spark restarts: the state keeps the old
    code's 10 s windows and adds 20 s ones; this batch's output is the same."""
    report = _outcome(outcomes, "longer_windows")["compat"]
    assert (report["output"]["only_old"], report["output"]["only_new"]) == (0, 0)
    [state] = report["state"]
    assert (state["old_rows"], state["new_rows"], state["added"], state["removed"], state["changed"]) == (5, 6, 3, 2, 1)
    seconds = {(int(w["end"][17:19]) - int(w["start"][17:19])) % 60 for w in (s["row"]["key"]["window"] for s in state["samples"])}
    assert seconds == {10, 20}


def test_a_renamed_aggregate_changes_the_output_columns_not_the_state(outcomes):
    report = _outcome(outcomes, "rename_aggregate")["compat"]
    assert report["output"]["note"] == "new columns: events; dropped columns: n; rows compared on window, id, v_sum"
    assert [(s["added"], s["removed"], s["changed"]) for s in report["state"]] == [(0, 0, 0)]
