"""What the Delta tests share: the Delta environment (``tests/requirements-delta.txt`` plus wmcheck, which .ci/run
makes as ``.venv-delta``; ``WMCHECK_DELTA_PYTHON`` names its python, default the repository's ``.venv-delta``; the jars
of ``tests/jvm/fetch-delta.sh``, ``WMCHECK_DELTA_JARS``, default the machine's jar cache), the restarts run in it (one
child process for a module's jobs: tests/delta_restarts.py for the Delta sink, tests/delta_source_restarts.py for the
Delta source) and the copies of a Delta fixture they restart. Without the environment a test skips, and fails under
CI."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import FIXTURES, ROOT, fixture_facts, run_cli

sys.path.insert(0, str(FIXTURES))
import queries  # noqa: E402


def delta_python() -> str:
    """The Delta environment's python; skips the test without it (fails it under CI)."""
    python = os.environ.get("WMCHECK_DELTA_PYTHON") or str(ROOT / ".venv-delta" / "bin" / "python")
    missing = None
    if not os.access(python, os.X_OK):
        missing = f"no Delta environment at {python} (WMCHECK_DELTA_PYTHON; .ci/run makes .venv-delta)"
    elif not all((Path(queries.delta_jars_dir()) / jar).is_file() for jar in queries.DELTA_JARS):
        missing = f"no Delta jars in {queries.delta_jars_dir()} (WMCHECK_DELTA_JARS; tests/jvm/fetch-delta.sh)"
    if missing:
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    return python


def restart(child: str, jobs: list[dict[str, Any]], timeout: int = 900) -> dict[str, Any]:
    """Run the restart child ``child`` (``delta_restarts.py``, ``delta_source_restarts.py``) on ``jobs`` in the Delta
    environment: its one JSON document."""
    python = delta_python()
    done = subprocess.run([python, str(ROOT / "tests" / child), json.dumps(jobs)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYSPARK_PYTHON": python})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def relocated_copy(name: str, root: Path, *relocate: str | Path) -> Path:
    """A copy of fixture ``name`` at ``root`` whose logs name its own files (``relocate --path-map``, with the extra
    ``relocate`` arguments: a file sink's ``--file-sink PATH``); returns ``root``."""
    shutil.copytree(FIXTURES / name, root)
    run_cli("relocate", root / "checkpoint", "--path-map", f"{fixture_facts(name)['root']}={root}", *relocate,
            "--execute", "--idle", "0")
    return root
