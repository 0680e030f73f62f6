"""Every check code against real Spark: each case breaks a copy of a real fixture the way the code describes,
``wmcheck check`` reports the code, the fixture's own query restarts from it (all cases in one Spark child
process), and the code's severity follows what Spark did; the printed fix, applied to another broken copy,
makes the restart give the reference output. (Spark 3.5: tests/test_spark35.py.)"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from wmcheck.checkpoint.checks.definition import Instruction
from wmcheck.checkpoint.checks.recommend import recommended_repair
from wmcheck.checkpoint.checks.registry import CHECKS, ERROR, OPEN_FAILED
from wmcheck.checkpoint.validate import check_location

from oracle_cases import (
    CASES,
    ENCODING,
    FAILS,
    HELD_AT,
    OK,
    SILENT,
    WRONG,
    C,
    docs_fix_lines,
    documented,
    documented_fixes,
    every_conf,
    finding_fix,
    findings,
    placeholder_line,
    reference,
    run_oracle,
)
from restart_oracle import observed, prepare, restart_all
from state_damage import FORMAT_FIXTURES, sweep, verdict

SWEEP = sweep()

pytestmark = [pytest.mark.spark, pytest.mark.oracle]


def selected(items: list) -> list:
    """The cases the selected tests of this module need (``-k`` on a case restarts only it and the cases of its code
    and fixture; a test marked ``oracle_cases(KEY, ...)`` those; any other test of the table every case of CASES;
    a damage test only its own)."""
    mine = [i for i in items if i.module.__name__ == __name__ and "oracle" in getattr(i, "fixturenames", ())]
    wanted = {id(i.callspec.params["case"]) for i in mine if hasattr(i, "callspec") and "case" in i.callspec.params}
    for item in mine:
        if hasattr(item, "callspec"):
            continue
        marker = item.get_closest_marker("oracle_cases")
        wanted |= {id(c) for c in CASES if marker is None or c.key in marker.args}
    chosen = [c for c in CASES + SWEEP + SILENT if id(c) in wanted]
    related = {(c.code, c.fixture) for c in chosen if c in CASES}
    return [c for c in CASES + SWEEP + SILENT if id(c) in wanted or c in CASES and (c.code, c.fixture) in related]


@pytest.fixture(scope="session")
def oracle(request, tmp_path_factory):
    return run_oracle(selected(request.session.items), tmp_path_factory.mktemp("oracle"))


@pytest.mark.parametrize("case", CASES, ids=[f"{c.code}-{c.key}" for c in CASES])
def test_check_says_what_spark_does(oracle, case):
    found, outcomes, _ = oracle
    outcome = outcomes[f"{case.key}:broken"]
    what = observed(outcome, reference(outcomes, case))
    assert what == case.spark, (case.key, outcome.error, outcome.read_error)
    if case.spark == FAILS and case.error:
        assert outcome.error and re.search(case.error, outcome.error), outcome.error
    mine = [f for f in found[case.key, "broken"] if f.code == case.code]
    assert mine, [(f.code, f.path) for f in found[case.key, "broken"]]
    assert (CHECKS[case.code].severity == ERROR) == (what in (FAILS, WRONG)), (case.code, what)
    if what == OK:
        assert all(f.severity != ERROR for f in found[case.key, "broken"]), found[case.key, "broken"]


@pytest.mark.parametrize("case", [c for c in CASES if c.fixed], ids=[f"{c.code}-{c.key}" for c in CASES if c.fixed])
def test_the_fix_makes_the_restart_work(oracle, case):
    """The finding's fix, applied to another broken copy (its wmcheck command run as check prints it, or its
    instruction carried out), makes the restart give the reference output: nothing lost, nothing twice."""
    found, outcomes, _ = oracle
    outcome = outcomes[f"{case.key}:fixed"]
    assert observed(outcome, reference(outcomes, case)) == OK, (outcome.error, outcome.read_error)
    assert not [f for f in found[case.key, "fixed"] if f.severity == ERROR]
    fix = finding_fix(found[case.key, "before-fixed"], case.code)
    if case.repair and CHECKS[case.code].severity == ERROR:  # the fix run is the one check recommends
        assert recommended_repair(found[case.key, "before-fixed"]) == fix


@pytest.mark.parametrize("case", CASES, ids=[f"{c.code}-{c.key}" for c in CASES])
def test_every_wmcheck_fix_is_run_and_every_instruction_carried_out(oracle, case):
    """A case whose finding's fix is a wmcheck command restarts after running it, or another case of the same code
    and fixture runs the same command line (a file of the same chain damaged another way); one whose fix is an
    instruction carries it out when the code is an error (a warning's instruction is advice about another risk;
    WM000's is to pass the right location; a copy only mounted read-only is, made writable, the reference copy)."""
    found, _, _ = oracle
    fix = finding_fix(found[case.key, "broken"], case.code)
    command = fix is not None and not isinstance(fix, Instruction)
    if command and not case.repair:
        line = placeholder_line(fix)
        assert [c for c in CASES if c.repair and (c.code, c.fixture) == (case.code, case.fixture)
                and placeholder_line(finding_fix(found[c.key, "broken"], c.code)) == line], (case.key, line)
    assert command or not case.repair, (case.key, fix)
    exempt = case.code == OPEN_FAILED or case.read_only
    if case.fix is not None or (CHECKS[case.code].severity == ERROR and not command and not exempt):
        assert isinstance(fix, Instruction) and case.fix is not None, (case.key, fix)


@pytest.mark.parametrize("case", SILENT, ids=[c.key for c in SILENT])
def test_check_reports_no_error_where_spark_restarts_as_the_control_run_does(oracle, case):
    found, outcomes, _ = oracle
    outcome = outcomes[f"{case.key}:broken"]
    assert observed(outcome, reference(outcomes, case)) == OK, (case.key, outcome.error, outcome.read_error)
    assert not [f for f in found[case.key, "broken"] if f.severity == ERROR], found[case.key, "broken"]


def test_docs_table_lists_every_code_with_its_severity():
    assert {code: sev for code, (sev, _, _) in documented().items()} == {c.code: c.severity for c in CHECKS.values()}


TESTED_ELSEWHERE = {  # fix lines of docs/check.md run by other Spark tests, which assert check prints them so
    "wmcheck relocate CKPT": "WM027: tests/test_repair_spark.py",
    "wmcheck rewind CKPT --to-batch 8 --file-sink SINK": "WM035: tests/test_repartition_spark.py",
    "wmcheck repartition CKPT --file-sink SINK": "WM036: tests/test_repartition_spark.py",
    "wmcheck rewind CKPT --to-batch 8 --delta-sink TABLE": "WM087: tests/test_delta_check.py",
    "wmcheck rewind CKPT --to-batch 8 --delta-sink PATH --execute": "WM086: tests/test_delta_check.py",
}


def test_every_fix_line_in_the_docs_is_one_a_test_runs(oracle):
    """The table names, for each code, the command line check printed for its cases (that the oracle ran); every
    wmcheck command line docs/check.md gives as a fix is one of those, or one another Spark test runs."""
    found, _, _ = oracle
    ran = {case.key: placeholder_line(finding_fix(found[case.key, "before-fixed"], case.code))
           for case in CASES if case.repair}
    columns = documented_fixes()
    for case in CASES:
        if case.repair:
            assert f"`{ran[case.key]}`" in columns[case.code], (case.key, ran[case.key], columns[case.code])
    assert docs_fix_lines() - set(ran.values()) - set(TESTED_ELSEWHERE) == set()


def test_docs_table_says_what_the_oracle_saw(oracle):
    """Each case's outcome is the row's first word, or one of its later clauses ('; wrong: ...') for a code whose
    cases do different things."""
    _, outcomes, _ = oracle
    docs = documented()
    for case in CASES:
        what = observed(outcomes[f"{case.key}:broken"], reference(outcomes, case))
        assert docs[case.code][1].startswith(what) or f"; {what}: " in docs[case.code][1], (case.code, what, docs[case.code][1])
        assert (docs[case.code][0] == ERROR) == (what in (FAILS, WRONG)), (case.code, what)


def after(roots: dict, key: str) -> list:
    """The findings on a copy after Spark restarted it (restart key ``CASE:VARIANT``)."""
    return findings(next(c for c in CASES if c.key == key.split(":")[0]), roots[key])


@pytest.mark.oracle_cases("schemas-of-another-copy")
def test_a_copy_naming_another_checkpoints_schemas_keeps_naming_them_after_a_restart(oracle):
    """WM028: Spark restarts the copy from the other checkpoint's schema files and names them again in the operator
    metadata of the batch it ran, so the copy goes on depending on that location (removed: WM027, Spark fails to
    restart, tests/test_repair_spark.py)."""
    _, outcomes, roots = oracle
    assert outcomes["schemas-of-another-copy:broken"].batches == (9, 10)
    assert [(f.code, f.path) for f in after(roots, "schemas-of-another-copy:broken")] == [
        ("WM028", f"state/0/_metadata/v2/{b}") for b in (0, 4, 9)]
    assert not after(roots, "schemas-of-another-copy:fixed")


@pytest.mark.oracle_cases("input-without-new-data")
def test_restart_alone_keeps_the_watermark_held_and_data_on_the_idle_input_moves_it(oracle):
    """WM038: restarted with new data on the other input only, the batch runs at the held watermark and no window
    is emitted; with data on the idle input too (the message's advice) the watermark moves and windows come out."""
    _, outcomes, roots = oracle
    held, fed = outcomes["input-without-new-data:broken"], outcomes["input-without-new-data:remedied"]
    assert (held.error, held.batches, held.watermarks, held.rows) == (None, (11,), (HELD_AT,), ())
    assert [f.code for f in after(roots, "input-without-new-data:broken")] == ["WM038"]
    assert (fed.error, fed.batches, fed.watermarks) == (None, (11, 12), (HELD_AT, "2024-01-01T00:02:04.000Z"))
    assert len(fed.rows) == 10 and ("a", "3", "6", "Row(end='2024-01-01T00:00:10.000Z', start='2024-01-01T00:00:00.000Z')") in fed.rows
    assert not after(roots, "input-without-new-data:remedied")


@pytest.mark.parametrize("case", SWEEP, ids=[c.key for c in SWEEP])
def test_check_says_what_spark_does_with_a_damaged_state_file(oracle, case):
    """A file of the next version's load chain cut to 20 bytes, zeroed or garbled (tests/state_damage.py): check
    reports WM039 exactly when Spark's restart fails, and Spark's output is the control run's otherwise."""
    found, outcomes, _ = oracle
    outcome = outcomes[f"{case.key}:broken"]
    what = observed(outcome, reference(outcomes, case))
    assert what == verdict(found[case.key, "broken"]), (case.key, what, outcome.error and outcome.error[:500],
                                                        [(f.code, f.path) for f in found[case.key, "broken"]])
    if what == OK:
        assert all(f.severity != ERROR for f in found[case.key, "broken"])


def test_the_sweep_covers_every_state_format():
    assert {c.fixture for c in SWEEP} == set(FORMAT_FIXTURES)


@pytest.mark.oracle_cases("operators-after-applyinpandaswithstate")
def test_operators_after_applyinpandaswithstate_keep_watermark_0_after_a_restart(oracle):
    """WM042: restarted with new data, the aggregation after applyInPandasWithState and transformWithState still runs
    with watermark 0: the global watermark moves, nothing is emitted, and the finding stays."""
    _, outcomes, roots = oracle
    ran = outcomes["operators-after-applyinpandaswithstate:broken"]
    assert ran.error is None and ran.batches and ran.rows == ()
    assert [(f.code, f.path) for f in after(roots, "operators-after-applyinpandaswithstate:broken")] == [("WM042", "state/2")]


@pytest.mark.oracle_cases("source-log-last-file-deleted")
def test_the_last_source_log_file_deleted_by_hand_is_fixed_by_one_rewind_that_removes_its_sidecar(oracle):
    """sources/0/9.compact deleted, its sidecar left: the log does not reach the offsets (WM022) and the sidecar is
    the next file Spark writes there (WM029); the one recommended rewind removes the sidecar with what it rewinds,
    and the restart writes sources/0/9.compact again (before this, it failed on .9.compact.crc)."""
    found, outcomes, _ = oracle
    broken = found["source-log-last-file-deleted", "broken"]
    assert {(f.code, f.path) for f in broken if f.severity == ERROR} == {
        ("WM022", "sources/0/9"), ("WM029", "sources/0/.9.compact.crc")}
    assert recommended_repair(broken) == finding_fix(broken, "WM022") == finding_fix(broken, "WM029")
    assert outcomes["source-log-last-file-deleted:fixed"].batches == (11, 12, 13)


@pytest.mark.oracle_cases("rocksdb-zip-ahead-without-changelog")
def test_a_stale_rocksdb_zip_without_changelogs_is_written_over_before_a_load_reads_it(oracle):
    """WM017, not WM041: tws_pandas (RocksDB without changelog checkpointing, next version 9) with a stale 11.zip (a
    copy of 2.zip, whose sessions and timers were long emitted): the first restart runs batches 9 and 10 and the
    commit of version 11 uploads Spark's own 11.zip over the stale one; the second restart loads version 11 from it
    and its output is the control run's."""
    _, outcomes, roots = oracle
    ran = outcomes["rocksdb-zip-ahead-without-changelog:broken"]
    assert ran.error is None and ran.batches[:2] == (9, 10) and 11 in ran.batches, ran.batches
    state = roots["rocksdb-zip-ahead-without-changelog:broken"] / "checkpoint/state/0/0"
    assert (state / "11.zip").read_bytes() != (state / "2.zip").read_bytes()


@pytest.mark.oracle_cases("sink-log-zero-padded-name")
def test_a_sink_log_file_named_past_the_latest_batch_makes_the_sink_skip_that_batch(oracle):
    """WM001's word for _spark_metadata/013 beside _spark_metadata/12: Spark runs and commits batch 13, and the sink,
    taking 13 as its latest batch, writes no log file of its own for it (its output is in no log)."""
    _, outcomes, roots = oracle
    ran = outcomes["sink-log-zero-padded-name:broken"]
    assert ran.error is None and 13 in ran.batches, (ran.error, ran.batches)
    root = roots["sink-log-zero-padded-name:broken"]
    assert (root / "checkpoint/commits/13").exists() and not (root / "output/_spark_metadata/13").exists()


TWS_AVRO = "avro_tws"


def test_avro_state_read_as_unsafe_rows_fails_or_kills_the_driver(tmp_path):
    """WM074 on Avro transformWithState state (``avro_tws``) with unsaferow pinned in every offsets file: the restart
    reads the Avro bytes as UnsafeRows and either the query fails (its Python worker's EOFError) or the driver's JVM
    dies (a SIGSEGV, so in a Spark child of its own: the child loses its gateway), as the bytes read past the rows
    decide; the fix, avro set back in every offsets file, restarts as the control run does."""
    broken, fixed = prepare(TWS_AVRO, tmp_path / "broken"), prepare(TWS_AVRO, tmp_path / "fixed")
    for root in (broken, fixed):
        every_conf(ENCODING, "unsaferow")(root)
    found = [f for f in check_location(str(broken / C), str(broken / "output")) if f.severity == ERROR]
    assert [f.code for f in found] == ["WM074"]
    assert isinstance(found[0].fix, Instruction) and 'encodingFormat to "avro" in every offsets file' in found[0].fix.text
    every_conf(ENCODING, "avro")(fixed)
    assert not [f for f in check_location(str(fixed / C), str(fixed / "output")) if f.severity == ERROR]
    before = set(Path.cwd().glob("hs_err_pid*.log"))
    try:
        outcome = restart_all({"broken": (TWS_AVRO, broken)})["broken"]
        assert outcome.error is not None and "EOFError" in outcome.error, outcome
    except AssertionError as exc:
        assert "the restart oracle failed" in str(exc), exc  # the JVM died
    finally:  # the dead JVM's report
        for report in set(Path.cwd().glob("hs_err_pid*.log")) - before:
            report.unlink()
    outcomes = restart_all({"ref": (TWS_AVRO, prepare(TWS_AVRO, tmp_path / "ref")), "fixed": (TWS_AVRO, fixed)})
    assert observed(outcomes["fixed"], outcomes["ref"]) == OK
