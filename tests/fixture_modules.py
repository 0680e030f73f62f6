"""The fixture generator's Python modules (fixtures/ is not a package), loaded by file for tests and the restart oracle."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def fixture_module(filename: str) -> ModuleType:
    """``fixtures/<filename>`` as a module."""
    spec = importlib.util.spec_from_file_location(f"fixture_{Path(filename).stem}", FIXTURES / filename)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
