"""The library names its parameters, the command line its flags: messages in checkpoint/ and statestore/ hold no
``--flag`` (only whole ``wmcheck`` command lines they recommend do), they name parameters by placeholders, and the
one table in cli/flags.py spells every placeholder as a flag that a wmcheck command takes."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import click
import pytest

from wmcheck.checkpoint.batch_inputs import replay_range
from wmcheck.checkpoint.errors import CheckpointError, RefusedError, arg, python_spelling, spelled
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.repair.targets import parse_idle
from wmcheck.checkpoint.validate import check_location
from wmcheck.cli.flags import FLAGS, cli_spelling, for_cli
from wmcheck.cli.main import COMMANDS, cli
from wmcheck.statestore.spark.late_rule import parse_window
from wmcheck.statestore.spark.sinks import ParquetSink

from conftest import ROOT, fixture_checkpoint, fixture_facts, run_cli

LIBRARY = ("checkpoint", "statestore")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]*")


def texts(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of every string constant and f-string (its values as ``{}``), docstrings left out."""
    docs, parts = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):  # docstrings, attribute docs
            docs.add(id(node.value))
        elif isinstance(node, ast.JoinedStr):
            parts |= {id(value) for value in node.values}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            out.append((node.lineno, "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs | parts:
            out.append((node.lineno, node.value))
    return out


def library_files() -> list[Path]:
    return [path for top in LIBRARY for path in sorted((ROOT / top).rglob("*.py"))]


def flags_outside_commands(text: str) -> list[str]:
    """The ``--flags`` in ``text`` that are not part of a ``wmcheck COMMAND ...`` (or another tool's: ``hadoop``)
    command line before them."""
    return [m[0] for m in FLAG.finditer(text) if not any(tool in text[:m.start()] for tool in ("wmcheck ", "hadoop "))]


def test_library_messages_name_no_flag():
    files = library_files()
    assert len(files) > 80
    found = [f"{path.relative_to(ROOT)}:{line}: {text!r}" for path in files for line, text in texts(ast.parse(path.read_text()))
             if flags_outside_commands(text)]
    assert found == []


def test_the_rule_sees_flags_and_passes_command_lines():
    tree = ast.parse('"""--docstring"""\nA = "use --engine spark"\nB = f"wmcheck rewind CKPT --to-batch {n}"\n'
                     'C = f"--from {a} is after {b}"')
    assert [flags_outside_commands(text) for _, text in texts(tree)] == [["--engine"], [], ["--from"]]


def placeholder_names() -> set[str]:
    names = set()
    for path in library_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "arg":
                assert isinstance(node.args[0], ast.Constant), f"{path}:{node.lineno}: arg() takes a literal name"
                names.add(node.args[0].value)
            elif isinstance(node, ast.keyword) and node.arg == "param" and isinstance(node.value, ast.Constant):
                names.add(node.value.value)
    return names


def command_flags() -> set[str]:
    flags = set()
    for name in COMMANDS:
        command = cli.get_command(click.Context(cli), name)
        assert command is not None
        flags |= {opt for param in command.params if isinstance(param, click.Option) for opt in param.opts}
    return flags


def test_every_placeholder_has_a_flag_that_a_command_takes():
    assert placeholder_names() == set(FLAGS)
    assert set(FLAGS.values()) <= command_flags()


def test_spellings():
    text = f"{arg('shift')} must be negative (hint: e.g. {arg('shift', -3)}; {arg('debug')} shows more)"
    assert spelled(text) == "shift must be negative (hint: e.g. shift=-3; the chained exception (__cause__) shows more)"
    assert for_cli(text) == "--shift must be negative (hint: e.g. --shift -3; --debug shows more)"
    assert spelled(text, python_spelling) == spelled(text) and cli_spelling("start", "4") == "--from 4"
    assert spelled("{{not a placeholder}} {x}") == "{{not a placeholder}} {x}"


def test_library_errors_name_parameters_and_the_cli_their_flags(tmp_path):
    name = "agg_window_hdfs"
    ckpt = open_checkpoint(str(fixture_checkpoint(name)))
    last = fixture_facts(name)["last_committed_batch"]
    with pytest.raises(CheckpointError) as info:
        replay_range(ckpt, 5, 3)
    assert (str(info.value), info.value.param) == (f"start=5 is after end=3 (hint: batches go up to {last})", "start")
    with pytest.raises(CheckpointError) as info:
        replay_range(ckpt, 0, last + 5)
    assert (str(info.value), info.value.param) == (
        f"batch {last + 5} does not exist: the last committed batch is {last} (hint: use end={last} or less)", "end")
    with pytest.raises(CheckpointError) as info:
        parse_idle("-5 minutes")
    assert (str(info.value), info.value.param) == (
        "idle_ms must not be negative, got '-5 minutes' (hint: e.g. idle_ms='10 minutes')", "idle_ms")
    with pytest.raises(CheckpointError) as info:
        parse_window("10 seconds,20 seconds")
    assert (str(info.value), info.value.param) == (
        "window='10 seconds,20 seconds': need 0 < slide <= duration (hint: as Spark's window() requires)", "window")
    (tmp_path / "file").write_text("")
    with pytest.raises(RefusedError) as info:
        ParquetSink(str(tmp_path / "file"))
    assert (str(info.value), info.value.param) == (f"output {tmp_path / 'file'} is a file (hint: pass a directory)", "output")
    out = run_cli("replay", fixture_checkpoint(name), "--plan", "--from", "5", "--to", "3", exit_code=2).output
    assert out == f"Error: --from 5 is after --to 3 (hint: batches go up to {last})\n"
    out = run_cli("rewind", fixture_checkpoint(name), "--to-batch", "3", "--idle", "-5 minutes", exit_code=2).output
    assert out == "Error: --idle must not be negative, got '-5 minutes' (hint: e.g. --idle '10 minutes')\n"


def test_findings_from_errors_keep_placeholders_for_the_command_line():
    """A checkpoint that cannot be opened is a WM000 finding whose message names ``fs_options`` by placeholder:
    the Python API spells it as the parameter, `wmcheck check` as the flag."""
    (finding,) = check_location("s3://bucket/ckpt", fs_options={"no_such_option": "1"})
    assert finding.code == "WM000" and arg("fs_options", "KEY=VALUE") in finding.message
    assert spelled(finding.message).endswith("(hint: pass them as fs_options=KEY=VALUE (docs/remote.md lists what each does))")
    out = run_cli("check", "s3://bucket/ckpt", "--fs-option", "no_such_option=1", exit_code=2).output
    assert "pass them as --fs-option KEY=VALUE (docs/remote.md" in out and "{{" not in out
