"""What ``pip install .`` installs: every module and data file of cli/, checkpoint/ and statestore/ under
``wmcheck`` (api/ as ``wmcheck`` itself; C sources built, with their stubs), a ``py.typed`` in every package, every package found without a list (a new subpackage too), and nothing else at the top level (the
editable install used by the tests hides such gaps)."""
from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import zipfile

from conftest import ROOT

SOURCES = {"api": "wmcheck", "cli": "wmcheck/cli", "checkpoint": "wmcheck/checkpoint", "statestore": "wmcheck/statestore"}


def packages(paths: list[str]) -> set[str]:
    """The packages (directories with an ``__init__.py``) among ``paths``, dotted."""
    return {path.rpartition("/")[0].replace("/", ".") for path in paths if path.endswith("/__init__.py")}


def test_wheel_holds_every_module_data_file_and_package(tmp_path):
    tracked = subprocess.run(["git", "ls-files", *SOURCES], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    source = tmp_path / "src"  # the tracked files alone: a build/ left in the checkout would hide gaps
    for path in [*tracked, "pyproject.toml", "setup.py", "README.md"]:
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / path, source / path)
    added = "checkpoint/repair/added/__init__.py"  # a subpackage nothing names: discovered like the others
    (source / added).parent.mkdir()
    (source / added).write_text("")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(source)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    (wheel,) = tmp_path.glob("wmcheck-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = {SOURCES[path.split("/")[0]] + path[len(path.split("/")[0]):] for path in tracked if not path.endswith(".c")}
    assert wanted and wanted <= names, sorted(wanted - names)
    assert {n.split("/")[0] for n in names} == {"wmcheck", "-".join(wheel.name.split("-")[:2]) + ".dist-info"}
    assert [n for n in names if n.startswith("wmcheck/statestore/rocksdb/sst_walk.") and n.endswith(".so")]  # the C walk, built
    installed = {"wmcheck" if name == "api" else "wmcheck." + name for name in packages([*tracked, added])}
    assert packages(sorted(names)) == installed
    assert packages(tracked) == {"api", "checkpoint", "checkpoint.checks", "checkpoint.fs", "checkpoint.repair", "checkpoint.sinks", "checkpoint.sources",
                                 "cli",
                                 "statestore", "statestore.compat"}
    assert "wmcheck.checkpoint.repair.added" in packages(sorted(names))
    typed = {p for p in packages(sorted(names)) if p.replace(".", "/") + "/py.typed" in names}
    assert typed == installed - {"wmcheck.checkpoint.repair.added"}  # every package of the source is typed (PEP 561)



def test_each_optional_module_names_an_extra_that_installs_it():
    """Every ``optional_module(NAME, ..., EXTRA)`` of the source names an extra of pyproject.toml whose requirements
    give that module's distribution (the error's ``pip install 'wmcheck[EXTRA]'`` must work), and the test extra
    holds it too."""
    text = (ROOT / "pyproject.toml").read_text()  # no tomllib before Python 3.11
    section = text[text.index("[project.optional-dependencies]"):].split("\n[", 1)[0]
    extras = {name: re.findall(r'"([^"]+)"', reqs) for name, reqs in re.findall(r'(?m)^(\w+) = \[((?:"[^"]*"|[^]"])*)\]', section)}
    assert {"delta", "kafka", "test"} <= set(extras)
    distribution = {"deltalake": "deltalake", "confluent_kafka": "confluent-kafka"}
    used = set()
    for path in [p for top in SOURCES for p in (ROOT / top).rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "optional_module":
                used.add((node.args[0].value, node.args[2].value))
    assert used == {("deltalake", "delta"), ("confluent_kafka", "kafka")}
    for module, extra in used:
        names = {re.split(r"[<>=\[ ]", req)[0] for req in extras[extra]}
        assert distribution[module] in names and distribution[module] in {
            re.split(r"[<>=\[ ]", req)[0] for req in extras["test"]}, (module, extra)
