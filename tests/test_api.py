"""The public API: every command is a function of the top package first (``from wmcheck import check``), typed,
returning what the command prints; importing the package loads nothing else."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

import wmcheck
from wmcheck.cli.commands import COMMANDS
from wmcheck.cli.output import plain, repair_doc

from conftest import ROOT, age, fixture_checkpoint, run_cli

CKPT = str(fixture_checkpoint("agg_window_hdfs"))
# the function of the top package behind each command
FUNCTIONS = {"show": "show", "batches": "batches", "check": "check", "rewind": "rewind", "set-watermark": "set_watermark",
             "relocate": "relocate", "repartition": "repartition", "reset-offsets": "reset_offsets", "undo": "undo", "backups": "backups",
             "state": "state", "replay": "replay_plan", "timeline": "timeline", "compat": "compat"}


def test_every_command_is_a_function_of_the_top_package():
    assert set(FUNCTIONS) == set(COMMANDS)
    assert set(FUNCTIONS.values()) | {"open_checkpoint", "older_than_watermark", "replay_batches"} <= set(wmcheck.__all__)
    assert all(callable(getattr(wmcheck, name)) for name in wmcheck.__all__)


def test_importing_the_package_loads_only_its_errors():
    code = "import sys, wmcheck; print(sorted(m for m in sys.modules if m.startswith('wmcheck')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['wmcheck', 'wmcheck.checkpoint', 'wmcheck.checkpoint.errors']"


def test_every_package_is_typed():
    packages = [p.parent for top in ("api", "cli", "checkpoint", "statestore") for p in (ROOT / top).rglob("__init__.py")]
    assert len(packages) >= 7 and [p for p in packages if not (p / "py.typed").is_file()] == []


@pytest.mark.parametrize(("function", "args", "kwargs", "command"), [
    ("show", (CKPT,), {}, ["show", CKPT]),
    ("batches", (CKPT,), {"last": 3}, ["batches", CKPT, "--last", "3"]),
    ("check", (CKPT,), {"select": ["WM001", "WM011"]}, ["check", CKPT, "--select", "WM001,WM011"]),
    ("state", (CKPT,), {}, ["state", CKPT]),
    ("backups", (CKPT,), {}, ["backups", CKPT]),
])
def test_each_function_returns_what_its_command_prints(function, args, kwargs, command):
    got = getattr(wmcheck, function)(*args, **kwargs)
    assert plain(got) == json.loads(run_cli(*command, "--format", "json").stdout)


def test_repairs_are_dry_runs_unless_executed(copy_fixture):
    root = copy_fixture("agg_window_hdfs")
    age(root)  # a stopped query: the default idle_ms lets the repair run however recently the repo was checked out
    ckpt = str(root / "checkpoint")
    planned = wmcheck.rewind(ckpt, to_batch=5)
    shown = json.loads(run_cli("rewind", ckpt, "--to-batch", "5", "--format", "json").stdout)
    assert not planned.executed and repair_doc(planned)["steps"] == shown["steps"]
    done = wmcheck.rewind(ckpt, to_batch=5, execute=True, options=None, fs_options=None)
    assert done.executed and wmcheck.show(ckpt).last_committed_batch == 5
    assert [b.status for b in wmcheck.backups(ckpt)] == ["applied"]
    assert wmcheck.undo(ckpt, idle_ms=0).was == "applied"
    assert wmcheck.show(ckpt).last_committed_batch == 12


def test_errors_name_the_parameter_at_fault():
    with pytest.raises(wmcheck.CheckpointError) as info:
        wmcheck.rewind(CKPT, to_batch=-1)
    assert info.value.param == "to_batch" and str(info.value).startswith("to_batch=-1 names batch -1")
    with pytest.raises(wmcheck.NotACheckpointError, match="did you mean"):
        wmcheck.show(str(fixture_checkpoint("agg_window_hdfs").parent))
    with pytest.raises(wmcheck.NotACheckpointError) as info:
        wmcheck.show(str(fixture_checkpoint("agg_window_hdfs") / "sources" / "0"))
    assert info.value.suggested == str(fixture_checkpoint("agg_window_hdfs"))


def test_timeline_and_replay_plan(tmp_path):
    facts, fig = wmcheck.timeline(CKPT, output=str(tmp_path / "t.svg"))
    assert len(facts.batches) == 13 and (tmp_path / "t.svg").read_text().startswith("<?xml")
    plan = wmcheck.replay_plan(CKPT, 3, 4)
    assert [b.batch_id for b in plan.batches] == [3, 4]


@pytest.mark.parametrize(("args", "doc"), [
    (["rewind", CKPT, "--to-batch", "-1"], {"error": "--to-batch -1 names batch -1: batch ids start at 0",
                                            "hint": "the oldest batch this checkpoint can be rewound to is 0",
                                            "param": "--to-batch", "where": None, "exit_code": 2}),
    (["rewind", str(fixture_checkpoint("compaction")), "--to-batch", "10"], {
        "error": "cannot rewind to batch 10: offsets/9 no longer exists: Spark restarting with offsets/10 as the last "
                 "offsets file reads it as where batch 10 started, and fails ('batch 9 doesn't exist'); with "
                 "--keep-next-offsets it reads offsets/10 instead",
        "hint": "the oldest batch this checkpoint can be rewound to is 11", "param": "--to-batch", "where": None, "exit_code": 2}),
    (["rewind", str(fixture_checkpoint("compaction")), "--shift", "-13"], {
        "error": "--shift -13 names batch -1: batch ids start at 0", "param": "--shift", "where": None,
        "hint": "the oldest batch this checkpoint can be rewound to is 11", "exit_code": 2}),
    (["batches", CKPT, "--last", "-1"], {"error": "Invalid value for '--last': -1 is not in the range x>=0.",
                                         "hint": None, "param": "--last", "where": None, "exit_code": 2}),
    (["show", CKPT, "--tz", "nowhere"], {"error": "unknown time zone 'nowhere'", "param": "--tz", "where": None,
                                         "hint": "use UTC, local or an IANA name like Europe/Berlin", "exit_code": 2}),
])
def test_errors_are_json_objects_on_stdout_with_format_json(args, doc):
    result = run_cli(*args, "--format", "json", exit_code=2)
    assert json.loads(result.stdout) == doc and result.stderr == ""
    assert f"Error: {doc['error']}" in run_cli(*args, exit_code=2).stderr


def test_an_unreadable_file_in_json_names_where(copy_fixture):
    ckpt = copy_fixture("agg_window_hdfs") / "checkpoint"
    (ckpt / "offsets" / "12").write_bytes(b"v9\n{}")
    doc = json.loads(run_cli("show", ckpt, "--format", "json", exit_code=2).stdout)
    assert (doc["where"], doc["exit_code"]) == ("offsets/12", 2) and "written by a newer Spark" in doc["error"]


def test_no_module_of_the_library_imports_the_top_package():
    """The top package sits above every layer (tests/test_layers.py): it imports them, none imports it."""
    import ast

    found = [f"{path.relative_to(ROOT)}:{node.lineno}" for top in ("cli", "checkpoint", "statestore")
             for path in (ROOT / top).rglob("*.py") for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.ImportFrom) and node.module == "wmcheck" and node.level == 0
             or isinstance(node, ast.Import) and any(a.name == "wmcheck" for a in node.names)]
    assert found == []
