"""Run the benchmarks against wmcheck as an install has it: its bytecode compiled."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def compile_wmcheck() -> None:
    """Write wmcheck's bytecode (pip does on install; an editable checkout run with PYTHONDONTWRITEBYTECODE
    compiles every module on every run)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", *(str(ROOT / d) for d in ("cli", "checkpoint", "statestore"))],
                   check=True, env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"})
