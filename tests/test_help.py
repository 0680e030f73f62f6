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
