"""Spark 3.5: the restart oracle's cases applied to their fixtures' twins written by pyspark 3.5.9 (``agg_spark35``,
``agg_window_rocksdb_spark35``, ...; ``TWINS35``) and restarted by pyspark 3.5.9, all in one child process of its own
environment; and ``wmcheck repartition`` under Spark < 4.2.

The environment is ``tests/requirements-spark35.txt`` plus wmcheck (``pip install --no-deps -e .``), which
.ci/run makes as ``.venv-spark35``; ``WMCHECK_SPARK35_PYTHON`` names its python (default: the repository's
``.venv-spark35``). Without it these tests skip, and fail under CI.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from wmcheck.checkpoint.checks.definition import ERROR

from conftest import FIXTURES, ROOT
from oracle_cases import AGG35, CASES, HELD_AT, OK, SPARK35, TWINS35, Case, documented, query_id, reference, run_oracle
from restart_oracle import observed

CASES35 = [dataclasses.replace(c, fixture=SPARK35[c.key].fixture or TWINS35[c.fixture],
                               breaks=SPARK35[c.key].breaks or c.breaks, fix=SPARK35[c.key].fixed_by or c.fix, remedy=None)
           for c in CASES if c.key in SPARK35]


@pytest.fixture(scope="module")
def python35() -> str:
    path = os.environ.get("WMCHECK_SPARK35_PYTHON") or str(ROOT / ".venv-spark35" / "bin" / "python")
    if not os.access(path, os.X_OK):
        message = f"no pyspark 3.5 environment at {path} (WMCHECK_SPARK35_PYTHON; .ci/run makes .venv-spark35)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="module")
def oracle35(python35, tmp_path_factory):
    return run_oracle(CASES35, tmp_path_factory.mktemp("oracle35"), python35, fixed=lambda c: SPARK35[c.key].fix)


def test_every_spark35_case_restarts_a_checkpoint_spark35_wrote():
    """Each SPARK35 entry is a case, on its fixture's twin, or, for a fixture without one, on the 3.5 fixture it names
    with the damage made there."""
    assert sorted(c.key for c in CASES35) == sorted(SPARK35)
    for case in CASES:
        if case.key in SPARK35:
            entry = SPARK35[case.key]
            assert (case.fixture in TWINS35) != bool(entry.fixture and entry.breaks), case.key
    assert all(json.loads((FIXTURES / c.fixture / "fixture.json").read_text())["spark_version"] == "3.5.9"
               for c in CASES35)


@pytest.mark.spark
@pytest.mark.oracle
@pytest.mark.parametrize("case", CASES35, ids=[f"{c.code}-{c.key}" for c in CASES35])
def test_check_says_what_spark35_does(oracle35, case: Case):
    """Spark 3.5 does what SPARK35 says; check reports the code (SPARK35's where a 3.5 checkpoint shows less) on the
    3.5 checkpoint; where 3.5 differs from 4.3 the message says what Spark 4 does, and what 3.5 does."""
    found, outcomes, _ = oracle35
    outcome, expected = outcomes[f"{case.key}:broken"], SPARK35[case.key]
    assert observed(outcome, reference(outcomes, case)) == expected.spark, (case.key, outcome.error, outcome.read_error)
    if expected.error:
        assert outcome.error and re.search(expected.error, outcome.error), outcome.error
    mine = [f for f in found[case.key, "broken"] if f.code == (expected.code or case.code)]
    assert mine, [(f.code, f.path) for f in found[case.key, "broken"]]
    if expected.spark != case.spark:
        assert all("Spark 4" in f.message and "Spark 3.5 " in f.message for f in mine), mine
    if expected.spark == OK:  # every error check reports says what Spark 3.5 does
        assert all("Spark 3.5 " in f.message for f in found[case.key, "broken"] if f.severity == ERROR), found[case.key, "broken"]


@pytest.mark.spark
@pytest.mark.oracle
@pytest.mark.parametrize("case", [c for c in CASES35 if SPARK35[c.key].fix], ids=lambda c: f"{c.code}-{c.key}")
def test_the_fix_makes_the_spark35_restart_work(oracle35, case: Case):
    _, outcomes, _ = oracle35
    outcome = outcomes[f"{case.key}:fixed"]
    assert observed(outcome, reference(outcomes, case)) == "ok", (outcome.error, outcome.read_error)


@pytest.mark.spark
@pytest.mark.oracle
def test_spark35_restarts_without_metadata_under_a_new_query_id(oracle35):
    """WM007 under Spark 3.5: no refusal; the restart runs the new batches and writes a new metadata file with
    another query id."""
    _, outcomes, roots = oracle35
    assert outcomes["metadata-removed:broken"].batches == (13, 14)
    assert query_id(roots["metadata-removed:broken"]) != query_id(FIXTURES / AGG35)


@pytest.mark.spark
@pytest.mark.oracle
def test_spark35_restart_keeps_the_watermark_held_by_the_idle_input(oracle35):
    """WM038 under Spark 3.5: restarted with new data on the other input only, the batch runs at the held watermark
    and emits no window."""
    _, outcomes, _ = oracle35
    held = outcomes["input-without-new-data:broken"]
    assert (held.error, held.batches, held.watermarks, held.rows) == (None, (11,), (HELD_AT,), ())


@pytest.mark.spark
@pytest.mark.oracle
def test_spark35_aggregation_after_applyinpandaswithstate_and_withwatermark_emits(oracle35):
    """WM042 under Spark 3.5 (``fmgws_then_agg_spark35``): check warns that the aggregation after applyInPandasWithState
    runs with watermark 0 unless a withWatermark after it gives it one; this query calls withWatermark again, and the
    restart emits the windows the new rows close, like the control run."""
    found, outcomes, _ = oracle35
    ran = outcomes["operators-after-applyinpandaswithstate:broken"]
    assert (ran.error, ran.batches, ran.watermarks) == (None, (9, 10), ("2024-01-01T00:01:10.000Z", "2024-01-01T00:02:04.000Z"))
    new_rows = ("row", "2", "2", "Row(end='2024-01-01T00:01:50.000Z', start='2024-01-01T00:01:40.000Z')")  # a@101 b@105
    assert ran.rows is not None and new_rows in ran.rows
    assert [(f.code, f.path) for f in found["operators-after-applyinpandaswithstate", "broken"]] == [("WM042", "state/1")]


@pytest.mark.spark
@pytest.mark.oracle
def test_docs_table_says_what_spark35_did(oracle35):
    """The Spark 3.5 column: the observed outcome for every code with a 3.5 case (its first word, or a later clause
    '; ok: ...' for a code whose cases do different things; "the same" only when 3.5 fails with 4.3's error, or does
    the same), "not restarted" or "n/a: ..." for the others."""
    _, outcomes, _ = oracle35
    docs = documented()
    for case in CASES35:
        what = observed(outcomes[f"{case.key}:broken"], reference(outcomes, case))
        column = docs[case.code][2]
        assert column.startswith(what) or f"; {what}: " in column, (case.code, what, column)
        if "the same" in column:
            assert case.spark == what and (not case.error or re.search(case.error, outcomes[f"{case.key}:broken"].error))
    tested = {c.code for c in CASES35}
    for code, (_, _, column) in docs.items():
        if code not in tested:
            assert column == "not restarted" or column.startswith("n/a: "), (code, column)


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_repartition_under_spark35_says_so_in_one_line_and_writes_nothing(python35, tmp_path):
    """wmcheck run by the pyspark 3.5 environment's python: the dry run warns that --execute would refuse;
    --execute exits 2 with one line naming the installed version, and no file changed."""
    root = tmp_path / "dedup_rocksdb_p3"
    shutil.copytree(FIXTURES / "dedup_rocksdb_p3", root)
    before = tree(root)
    args = [python35, "-m", "wmcheck.cli", "repartition", str(root / "checkpoint"), "--partitions", "5",
            "--file-sink", str(root / "output"), "--idle", "0"]
    dry = subprocess.run([*args, "--format", "json"], capture_output=True, text=True, timeout=120)
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["warnings"][-1] == (
        "--execute would refuse: pyspark 3.5.9 is installed: Spark's offline state repartition needs pyspark 4.2 or newer")
    done = subprocess.run([*args, "--execute"], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("Error: pyspark 3.5.9 is installed: Spark's offline state repartition needs pyspark 4.2 or "
                           "newer (hint: pip install 'pyspark>=4.2')\n")
    assert tree(root) == before
