"""docs/architecture.md names every package of the source, and only packages that exist."""
from __future__ import annotations

import re

from conftest import ROOT

TOPS = ("api", "cli", "checkpoint", "statestore")


def packages() -> set[str]:
    return {str(p.parent.relative_to(ROOT)) + "/" for top in TOPS for p in (ROOT / top).rglob("__init__.py")}


def test_the_map_names_every_package_and_no_other():
    text = (ROOT / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"^\| `([a-z_/]+/)` \|", text, re.M))
    assert named == packages()


def test_no_source_module_is_over_450_lines():
    """Small modules: a module that grows past 450 lines is split by what it holds."""
    long = {str(p.relative_to(ROOT)): n for top in ("cli", "checkpoint", "statestore", "api")
            for p in (ROOT / top).rglob("*.py") if (n := len(p.read_text().splitlines())) > 450}
    assert long == {}
