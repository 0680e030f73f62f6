"""The user's ``module:function``: found before Spark starts without running the module (a module may need a
session to import: a ``@udf`` at its top level), imported later, and what its import raises is one line that
names the line of the module."""
from __future__ import annotations

import pytest

from wmcheck.checkpoint.errors import CheckpointError
from wmcheck.cli.flags import cli_spelling
from wmcheck.statestore.spark.user_code import load_callable, locate_callable

EXAMPLE = "jobs.orders:new_query"


def test_a_module_is_found_without_running_it(tmp_path, monkeypatch):
    module = tmp_path / "needs_spark.py"
    module.write_text("import sys\nraise RuntimeError('no EVENTS set')\n\n\ndef new_query(spark):\n    return None\n")
    locate_callable(f"{module}:new_query", "query", EXAMPLE)  # not run: it would raise
    monkeypatch.syspath_prepend(str(tmp_path))
    locate_callable("needs_spark:new_query", "query", EXAMPLE)
    with pytest.raises(CheckpointError) as err:
        load_callable(f"{module}:new_query", "query", EXAMPLE)
    assert err.value.text(cli_spelling) == (f"--query: importing {module} raised RuntimeError: no EVENTS set (at {module}:2) "
                                            "(hint: --debug shows the traceback)")
    assert isinstance(err.value.__cause__, RuntimeError)


@pytest.mark.parametrize("spec, message", [
    ("no_such_module_here:new_query", "--query: cannot import no_such_module_here: No module named 'no_such_module_here' "
                                      "(hint: the module must be importable from the current directory or PYTHONPATH)"),
    ("./no/such/file.py:new_query", "--query: cannot import ./no/such/file.py: no file ./no/such/file.py "
                                    "(hint: the module must be importable from the current directory or PYTHONPATH)"),
    ("jobs.orders", "--query expects module:function, got 'jobs.orders' (hint: e.g. jobs.orders:new_query or "
                    "./orders.py:new_query)"),
])
def test_a_module_that_is_not_there_is_one_line_before_spark(spec, message):
    with pytest.raises(CheckpointError) as err:
        locate_callable(spec, "query", EXAMPLE)
    assert err.value.text(cli_spelling) == message
