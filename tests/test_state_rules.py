"""``wmcheck state`` without Spark: eviction rules from the schema files, discovery, targets, and every
error that must come before (or instead of) starting Spark."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from wmcheck.checkpoint.errors import CheckpointError
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.statestore.discovery import all_operators, select
from wmcheck.statestore.eviction import eviction_rule
from wmcheck.statestore.targets import target

from conftest import ROOT, fixture_checkpoint, fixture_facts, fixture_names, run_cli, shown_name

FIXTURES = fixture_names()
WINDOWED = ["agg_window_hdfs", "agg_window_rocksdb", "checkpoint_v2", "compaction", "multi_watermark_max", "agg_spark35", "chained_aggs"]
# (fixture, store) -> (event-time column in the reader's rows, unit, strict): Spark's rules, written out by hand
EXPECTED = {
    **{(name, "default"): ("key.window.end", "us", False) for name in WINDOWED},
    ("dedup_watermark", "default"): ("key.ts", "us", False),
    ("join_stream_stream", "left"): ("value.l_ts", "us", False),
    ("join_stream_stream", "right"): ("value.r_ts", "us", False),
    ("join_stream_stream", "left-keyWithIndexToValue"): ("value.l_ts", "us", False),
    ("join_stream_stream", "right-keyWithIndexToValue"): ("value.r_ts", "us", False),
    ("join_stream_stream", "left-keyToNumValues"): (None, "us", False),
    ("join_stream_stream", "right-keyToNumValues"): (None, "us", False),
    ("pandas_state_timeout", "default"): ("value.timeoutTimestamp", "ms", True),
    ("tws_pandas", "$eventTimers_keyToTimestamp"): ("expiration_timestamp_ms", "ms", False),  # fires at <= (test_tws_timers_spark)
    ("tws_pandas", "count"): (None, "us", False),
    ("tws_pandas", "events"): (None, "us", False),
    ("tws_pandas", "last_by_v"): (None, "us", False),
}


def _rule(name: str, label: str):
    ckpt = open_checkpoint(str(fixture_checkpoint(name)))
    store = select(ckpt, store=label)[0]
    schema = ckpt.store_schema(store.operator_id, store.schema_store)
    return eviction_rule(store.operator_name, store.name, schema.key_schema if schema else None,
                         schema.value_schema if schema else None)


@pytest.mark.parametrize("name,label", sorted(EXPECTED))
def test_eviction_rule_from_schema_files(name, label):
    column, unit, strict = EXPECTED[(name, label)]
    rule = _rule(name, label)
    assert (rule.column_name, rule.evictable) == (column, column is not None)
    if column:
        assert (rule.unit, rule.strict) == (unit, strict)
    else:
        assert "never evict" in rule.rule or "no event-time column" in rule.rule


def test_timeout_rule_ignores_unset_timeouts():
    assert _rule("pandas_state_timeout", "default").unset == -1


def test_never_evicted_stores_say_why():
    assert _rule("join_stream_stream", "left-keyToNumValues").rule.endswith("removes rows of left-keyWithIndexToValue")
    assert _rule("tws_pandas", "count").rule.startswith("state variable: the watermark never evicts it")


@pytest.mark.parametrize("name", FIXTURES)
def test_discovered_stores_are_the_readers(name):
    """Every store fixture.json read with Spark's reader is selectable, under the same name and operator."""
    facts = fixture_facts(name)
    ops = {o.operator_id: o for o in all_operators(open_checkpoint(str(fixture_checkpoint(name))))}
    assert sorted(ops) == sorted(int(k) for k in facts["state"])
    for op_id, stores in facts["state"].items():
        op = ops[int(op_id)]
        assert set(stores) <= {s.name for s in op.selectable}
        assert {s.num_partitions for s in op.selectable} == {len(next(iter(stores.values()))["rows_per_partition"])}
    meta = {o["operator_id"]: shown_name(facts, o) for o in facts["operators"]}
    assert {i: o.operator_name for i, o in ops.items()} == meta


def test_join_views_are_its_sides_and_tws_views_its_variables():
    join = all_operators(open_checkpoint(str(fixture_checkpoint("join_stream_stream"))))[0]
    assert [(s.name, dict(s.options)) for s in join.views] == [
        ("left", {"operatorId": "0", "joinSide": "left"}), ("right", {"operatorId": "0", "joinSide": "right"})]
    tws = all_operators(open_checkpoint(str(fixture_checkpoint("tws_pandas"))))[0]
    assert [s.name for s in tws.views] == list(fixture_facts("tws_pandas")["state"]["0"])
    timers = [s for s in tws.views if s.name == "$eventTimers_keyToTimestamp"][0]
    assert timers.options == {"operatorId": "0", "readRegisteredTimers": "true"}


def test_spark35_operator_is_inferred_from_state_and_schema():
    (op,) = all_operators(open_checkpoint(str(fixture_checkpoint("agg_spark35"))))
    assert op.operator_name == "stateStoreSave"
    assert all(s.inferred_name for s in op.views)
    assert not (fixture_checkpoint("agg_spark35") / "state" / "0" / "_metadata" / "metadata").exists()


@pytest.mark.parametrize("name", FIXTURES)
def test_default_target_is_the_next_batch(name):
    facts = fixture_facts(name)
    tgt = target(open_checkpoint(str(fixture_checkpoint(name))))
    assert (tgt.batch, tgt.state_batch_id, tgt.watermark_ms, tgt.watermark_from) == (
        facts["last_committed_batch"] + 1, facts["last_committed_batch"], facts["next_watermark_ms"], "next batch")


def test_batch_target_uses_that_batchs_watermark():
    facts = fixture_facts("agg_window_hdfs")
    ckpt = open_checkpoint(str(fixture_checkpoint("agg_window_hdfs")))
    for b in facts["batches"][1:]:
        tgt = target(ckpt, b["batch"])
        assert (tgt.state_batch_id, tgt.watermark_ms, tgt.watermark_from) == (b["batch"] - 1, b["watermark_ms"], f"batch {b['batch']}")
    assert target(ckpt, 3, 42).watermark_ms == 42


@pytest.mark.parametrize("batch", [0, 99])
def test_batch_without_state_is_refused(batch):
    with pytest.raises(CheckpointError, match="has no state to read"):
        target(open_checkpoint(str(fixture_checkpoint("agg_window_hdfs"))), batch)


# -- CLI errors that never start Spark ---------------------------------------------------------------

AGG = fixture_checkpoint("agg_window_hdfs")


@pytest.mark.parametrize("args,message", [
    (["--operator", "7"], "Error: state: no stateful operator 7 in this checkpoint (hint: operators present: 0"),
    (["--store", "nope"], "Error: state: no store 'nope' in any operator (hint: stores there: default)"),
    (["--join-side", "left"], "Error: state: no join side 'left' in any operator (hint: join sides there: none)"),
    (["--operator", "0", "--state-var", "count"], "Error: state: no state variable 'count' in operator 0"),
    (["--batch", "0"], "Error: batch 0 has no state to read"),
    (["--watermark", "yesterday"], "Error: cannot read 'yesterday' as a time"),
])
def test_bad_requests_fail_before_spark(args, message):
    result = run_cli("state", AGG, *args, exit_code=2)
    assert result.stdout == ""
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1


def test_join_store_names_are_checked_by_kind():
    result = run_cli("state", fixture_checkpoint("join_stream_stream"), "--store", "left", exit_code=2)
    assert "no store 'left'" in result.stderr
    assert "stores there: left-keyToNumValues, left-keyWithIndexToValue, right-keyToNumValues, right-keyWithIndexToValue" in result.stderr


@pytest.mark.parametrize("args,message", [
    (["--store", "default", "--join-side", "left"], "use only one of --store, --join-side and --state-var"),
    (["--format", "parquet"], "--format parquet writes the rows of --older-than-watermark to --output FILE"),
    (["--limit", "3"], "--limit applies to --older-than-watermark"),
])
def test_usage_errors(args, message):
    assert message in run_cli("state", AGG, *args, exit_code=2).stderr


def _wmcheck(args: list[str], env: dict[str, str] | None = None, prelude: str = "") -> subprocess.CompletedProcess:
    code = f"import sys\n{prelude}\nfrom wmcheck.cli.main import main\nsys.argv = ['wmcheck', *sys.argv[1:]]\nmain()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, timeout=120)


def test_missing_java_is_one_line():
    done = _wmcheck(["state", str(AGG), "--engine", "spark"], env={"JAVA_HOME": "/nonexistent"})
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == ("Error: no Java found (JAVA_HOME=/nonexistent): Spark needs Java 17 or newer (hint: install one "
                           "(e.g. apt-get install openjdk-17-jre-headless) and set JAVA_HOME or put java on PATH)\n")


def test_missing_pyspark_is_one_line():
    done = _wmcheck(["state", str(AGG), "--older-than-watermark", "--engine", "spark"], prelude="sys.modules['pyspark'] = None")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "Error: pyspark is not installed (hint: pip install 'wmcheck[spark]' (pyspark 4.0 or newer))\n"


def test_help_and_package_import_do_not_import_pyspark():
    code = ("import sys, wmcheck.statestore as s\nfrom click.testing import CliRunner\nfrom wmcheck.cli.main import cli\n"
            "assert CliRunner().invoke(cli, ['state', '--help']).exit_code == 0\n"
            "assert callable(s.read_state) and callable(s.older_than_watermark)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert (done.returncode, done.stdout) == (0, "[]\n"), done.stderr
