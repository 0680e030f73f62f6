"""What ``pip install .`` installs: every module and data file of cli/, checkpoint/ and statestore/ under
``wmcheck``, and nothing else at the top level (the editable install used by the tests hides such gaps)."""
from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

import pytest

from conftest import ROOT

SOURCES = {"cli": "wmcheck/cli", "checkpoint": "wmcheck/checkpoint", "statestore": "wmcheck/statestore"}


def test_wheel_holds_every_module_and_data_file(tmp_path):
    tracked = subprocess.run(["git", "ls-files", *SOURCES], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    source = tmp_path / "src"  # the tracked files alone: a build/ left in the checkout would hide gaps
    for path in [*tracked, "pyproject.toml", "README.md"]:
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / path, source / path)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(source)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    (wheel,) = tmp_path.glob("wmcheck-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = {SOURCES[path.split("/")[0]] + path[len(path.split("/")[0]):] for path in tracked}
    assert wanted and wanted <= names, sorted(wanted - names)
    assert {n.split("/")[0] for n in names} == {"wmcheck", wheel.name.split("-py3")[0] + ".dist-info"}


def test_package_list_names_every_package_directory():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    found = {"wmcheck." + str(init.parent.relative_to(ROOT)).replace("/", ".")
             for top in SOURCES for init in (ROOT / top).rglob("__init__.py")}
    assert sorted(listed) == sorted(found)
