"""``wmcheck --help`` and the README's table of commands come from one table (cli/commands.py) and agree."""
from __future__ import annotations

import re

from click.testing import CliRunner

from wmcheck.cli.commands import COMMANDS
from wmcheck.cli.main import cli

from conftest import ROOT


def readme_rows() -> dict[str, str]:
    """Each command named in the README's table of commands -> its "needs Spark" cell."""
    text = (ROOT / "README.md").read_text()
    table = text.split("| command | what it answers | needs Spark |", 1)[1].split("\n\n", 1)[0]
    out = {}
    for line in table.strip().splitlines()[1:]:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        names = re.findall(r"`(?:wmcheck )?([a-z-]+)", cells[0])
        out.update((name, cells[-1]) for name in names)
    return out


def test_the_readme_lists_every_command_with_what_it_needs():
    rows = readme_rows()
    assert set(rows) == set(COMMANDS)
    assert {name: c.spark for name, c in COMMANDS.items()} == rows


def test_help_lists_every_command_with_its_summary():
    out = CliRunner().invoke(cli, ["--help"], terminal_width=200).output
    for name, command in COMMANDS.items():
        assert re.search(rf"^  {name} +{re.escape(command.summary)}$", out, re.M), name
        assert ("needs Spark" in command.summary) == command.spark.startswith("yes"), name
    assert "pyspark" not in out


def test_shell_completion_as_the_readme_documents_it():
    """Each line of the README's completion block prints a script; completing a command and an option works."""
    import os
    import subprocess
    import sys

    readme = (ROOT / "README.md").read_text()
    shells = re.findall(r"_WMCHECK_COMPLETE=(\w+)_source wmcheck", readme)
    assert shells == ["bash", "zsh", "fish"]
    entry = [sys.executable, "-c", "from wmcheck.cli.main import main; main()"]
    for shell in shells:
        script = subprocess.run(entry, env={**os.environ, "_WMCHECK_COMPLETE": f"{shell}_source"}, capture_output=True,
                                text=True, timeout=60).stdout
        assert "_WMCHECK_COMPLETE" in script and "complete" in script, shell
    for words, cword, wanted in (("wmcheck sh", "1", "plain,show"), ("wmcheck rewind --to-b", "2", "plain,--to-batch")):
        done = subprocess.run(entry, env={**os.environ, "_WMCHECK_COMPLETE": "bash_complete", "COMP_WORDS": words,
                                          "COMP_CWORD": cword}, capture_output=True, text=True, timeout=60)
        assert done.stdout.splitlines() == [wanted], done.stdout


def test_the_directory_above_a_checkpoint_is_answered_with_it(tmp_path):
    import shutil

    from conftest import FIXTURES, run_cli

    shutil.copytree(FIXTURES / "agg_window_hdfs", tmp_path / "q1")
    hint = f"(hint: did you mean {tmp_path / 'q1' / 'checkpoint'}? It holds offsets/ and commits/)"
    for command in (["show"], ["batches"], ["rewind", "--to-batch", "3"], ["state"], ["timeline", "--output", str(tmp_path / "t.png")]):
        out = run_cli(command[0], tmp_path / "q1", *command[1:], exit_code=2).output
        assert out == f"Error: not a Structured Streaming checkpoint: no offsets/, commits/ or metadata in {tmp_path / 'q1'} {hint}\n", command
    assert hint in run_cli("check", tmp_path / "q1", exit_code=2).output


def test_a_directory_inside_a_checkpoint_is_answered_with_the_checkpoint():
    from conftest import fixture_checkpoint, run_cli

    ckpt = fixture_checkpoint("agg_window_hdfs")
    for inside in ("state/0/1", "offsets"):
        hint = f"(hint: did you mean {ckpt}? It is the checkpoint that {inside}/ belongs to)"
        for command in (["show"], ["batches"], ["state"]):
            out = run_cli(command[0], ckpt / inside, *command[1:], exit_code=2).output
            assert out == (f"Error: not a Structured Streaming checkpoint: no offsets/, commits/ or metadata in "
                           f"{ckpt / inside} {hint}\n"), command


def test_bare_wmcheck_and_wmcheck_help_print_the_help_and_exit_0():
    import subprocess
    import sys

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "wmcheck.cli", *args], capture_output=True, text=True, timeout=60)

    full = run("--help")
    assert full.stdout.startswith("Usage: wmcheck [OPTIONS] COMMAND [ARGS]...\n\n  Inspect, validate")
    assert "'wmcheck help COMMAND' or 'wmcheck COMMAND --help' shows a command's" in full.stdout
    for args in ((), ("help",)):
        done = run(*args)
        assert (done.returncode, done.stdout, done.stderr) == (0, full.stdout, ""), args


def test_help_of_a_command_as_git_does():
    from conftest import run_cli

    for name in [*COMMANDS, "help"]:
        assert run_cli("help", name).output == run_cli(name, "--help").output, name
    assert run_cli("help", "shwo", exit_code=2).output == "Error: No such command 'shwo'. (hint: see wmcheck --help)\n"


def test_the_version_with_either_option():
    from importlib.metadata import version

    from conftest import run_cli

    for option in ("--version", "-V"):
        assert run_cli(option).output == f"wmcheck, version {version('wmcheck')}\n"
