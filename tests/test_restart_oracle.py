"""Every check code against real Spark: each case breaks a copy of a real fixture the way the code describes,
``wmcheck check`` reports the code, the fixture's own query restarts from it (all cases in one Spark child
process), and the code's severity follows what Spark did; the printed fix, applied to another broken copy,
makes the restart give the reference output."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from oracle_cases import CASES, FAILS, OK, WRONG, Case, backup
from restart_oracle import Outcome, prepare, restart_all

from wmcheck.checkpoint.checks.recommend import recommended_repair
from wmcheck.checkpoint.checks.registry import CHECKS, ERROR
from wmcheck.checkpoint.validate import check_location

pytestmark = [pytest.mark.spark, pytest.mark.oracle]


def findings(case: Case, root: Path) -> list:
    return check_location(str(root / "checkpoint"), str(root / "output") if case.sink else None)


def observed(outcome: Outcome, reference: Outcome) -> str:
    """What Spark did: failed, restarted with output other than the reference, or restarted correctly."""
    if outcome.failed:
        return FAILS
    return OK if outcome.rows == reference.rows and outcome.read_error is None else WRONG


@pytest.fixture(scope="session")
def oracle(tmp_path_factory):
    """Per case: the findings on the broken copy, the restart's outcome, and the fixed copy's findings and outcome."""
    base = tmp_path_factory.mktemp("oracle")
    restarts, found = {}, {}
    for fixture, extra in sorted({(c.fixture, c.extra_batches) for c in CASES}):
        restarts[f"ref:{fixture}:{extra}"] = (fixture, prepare(fixture, base / f"ref-{fixture}-{extra}", extra))
    for case in CASES:
        for variant in ("broken", "fixed") if case.fix else ("broken",):
            root = prepare(case.fixture, base / f"{case.key}-{variant}", case.extra_batches)
            shutil.copytree(root, backup(root))
            case.breaks(root)
            found[case.key, "broken" if variant == "broken" else "before-fix"] = findings(case, root)
            if variant == "fixed":
                case.fix(root)
                found[case.key, "fixed"] = findings(case, root)
            restarts[f"{case.key}:{variant}"] = (case.fixture, root)
    return found, restart_all(restarts)


def reference(outcomes: dict, case: Case) -> Outcome:
    ref = outcomes[f"ref:{case.fixture}:{case.extra_batches}"]
    assert not ref.failed and ref.rows, ref
    return ref


@pytest.mark.parametrize("case", CASES, ids=[f"{c.code}-{c.key}" for c in CASES])
def test_check_says_what_spark_does(oracle, case):
    found, outcomes = oracle
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


@pytest.mark.parametrize("case", [c for c in CASES if c.fix], ids=[f"{c.code}-{c.key}" for c in CASES if c.fix])
def test_the_printed_fix_makes_the_restart_work(oracle, case):
    found, outcomes = oracle
    outcome = outcomes[f"{case.key}:fixed"]
    assert observed(outcome, reference(outcomes, case)) == OK, (outcome.error, outcome.read_error)
    assert not [f for f in found[case.key, "fixed"] if f.severity == ERROR]
    command = getattr(case.fix, "command", None)
    if command is not None and CHECKS[case.code].severity == ERROR:  # the fix run is the one check recommends
        assert recommended_repair(found[case.key, "before-fix"], case.sink) == command


def documented() -> dict[str, tuple[str, str]]:
    """docs/check.md's table of what Spark does: code -> (severity, what Spark 4.3 does on restart)."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "check.md").read_text()
    table = text.split("## What Spark does, code by code", 1)[1].split("\n## ", 1)[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines() if line.startswith("| WM")]
    return {r[0]: (r[1], r[2]) for r in rows}


def test_docs_table_lists_every_code_with_its_severity():
    assert {code: sev for code, (sev, _) in documented().items()} == {c.code: c.severity for c in CHECKS.values()}


def test_docs_table_says_what_the_oracle_saw(oracle):
    _, outcomes = oracle
    docs = documented()
    for case in CASES:
        what = observed(outcomes[f"{case.key}:broken"], reference(outcomes, case))
        assert docs[case.code][1].startswith(what), (case.code, what, docs[case.code][1])
        assert (docs[case.code][0] == ERROR) == (what in (FAILS, WRONG)), (case.code, what)
