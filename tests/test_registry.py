"""The registry of checks is one explicit list: importing a check module registers nothing, every check defined
in the check modules is listed, and the list cannot be changed at run time."""
from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import pytest

from wmcheck.checkpoint import checks
from wmcheck.checkpoint.checks.definition import ERROR, Check
from wmcheck.checkpoint.checks.registry import CHECKS, LISTED, by_code


def defined_checks() -> set[Check]:
    found = set()
    for info in pkgutil.iter_modules(checks.__path__):
        module = importlib.import_module(f"{checks.__name__}.{info.name}")
        if info.name != "registry":
            found |= {value for value in vars(module).values() if isinstance(value, Check)}
    return found


def test_every_defined_check_is_listed_once_in_code_order():
    assert defined_checks() == set(LISTED) - {CHECKS["WM000"]}
    assert list(CHECKS) == sorted(c.code for c in LISTED) and len(CHECKS) == len(LISTED) == 92
    assert CHECKS["WM016"].severity == ERROR and CHECKS["WM016"].title == "state the next batch loads cannot be rebuilt"


def test_the_registry_is_read_only_and_rejects_a_code_twice():
    with pytest.raises(TypeError):
        CHECKS["WM099"] = CHECKS["WM001"]
    with pytest.raises(ValueError, match="listed twice: WM001"):
        by_code((CHECKS["WM001"], CHECKS["WM002"], CHECKS["WM001"]))
    with pytest.raises(ValueError, match="unknown severity 'fatal'"):
        Check("WM099", "fatal", "nothing", None)


def test_importing_a_check_module_imports_no_registry():
    code = ("import sys, wmcheck.checkpoint.checks.logs, wmcheck.checkpoint.checks.state; "
            "print('wmcheck.checkpoint.checks.registry' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
