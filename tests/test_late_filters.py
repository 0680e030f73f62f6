"""The table of which group-state operators drop late rows (checkpoint/watermarks/late_filters.py), on real checkpoints and plans.

Spark's behaviour per cell is proven by real queries in test_group_state_late_spark.py (NoTimeout,
ProcessingTimeTimeout, EventTimeTimeout) and test_operator_watermarks.py (EventTimeTimeout with the event log, 4.x and
3.5; event-time transformWithState)."""
from __future__ import annotations

import pytest
from test_operator_watermarks import query_id

from wmcheck.checkpoint.errors import spelled
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.watermarks.late_filters import group_state_filter, operator_filter, time_mode_filter
from wmcheck.checkpoint.watermarks.progress_files import load_progress
from wmcheck.statestore.spark.operator_late import operator_late_rows

from conftest import FIXTURES, fixture_checkpoint

PANDAS = "applyInPandasWithState"


def test_group_state_cells():
    assert group_state_filter(PANDAS, "EventTimeTimeout").drops is True
    for timeout in ("NoTimeout", "ProcessingTimeTimeout"):
        rule = group_state_filter(PANDAS, timeout)
        assert (rule.drops, rule.reason) == (False, f"0: {PANDAS} with {timeout} drops no late rows (Spark filters them "
                                                    "only with EventTimeTimeout)")
    assert spelled(group_state_filter("flatMapGroupsWithState", None, False).reason) == (
        "flatMapGroupsWithState drops late rows only with EventTimeTimeout; its timeout is unknown here: pass Spark's "
        "event log of the query (progress=EVENTLOG)")


def test_transform_with_state_cells():
    name = "transformWithStateInPandasExec"
    assert time_mode_filter(name, {"timeMode": "EventTime"}).drops is True
    assert time_mode_filter(name, {"timeMode": "ProcessingTime"}).drops is False
    assert time_mode_filter(name, {"timeMode": "NoTime"}).drops is False
    assert time_mode_filter(name, None).drops is None


@pytest.mark.parametrize("name", ["fmgws_then_agg", "fmgws_then_agg_spark35"])
def test_the_timeout_comes_from_the_plan(name):
    """Both timeouts store timeoutTimestamp, so the state alone leaves it open; Spark's plan prints EventTimeTimeout."""
    ckpt = open_checkpoint(str(fixture_checkpoint(name)))
    prog = load_progress(query_id(name), str(FIXTURES / name / "eventlog"))
    assert operator_filter(ckpt, 1).drops is None
    assert operator_filter(ckpt, 1, prog.plans.values()).drops is True
    assert operator_filter(ckpt, 0) is None  # an aggregation: not a group-state operator


def test_aggregations_and_unknown_timeouts_in_replay_rows():
    """Without the event log the replay leaves applyInPandasWithState's count open, naming --progress."""
    from wmcheck.statestore.spark.replay import ReplaySummary

    ckpt = open_checkpoint(str(fixture_checkpoint("fmgws_then_agg")))
    row = ReplaySummary(4, True, 0, 0, "0", 1, 0, 2, 1, 1, None, 1)
    (ops,) = operator_late_rows(ckpt, [row])
    pandas = next(o for o in ops if o.operator_id == 1)
    assert pandas.late_rows is None and spelled(pandas.how).endswith("(progress=EVENTLOG)")
