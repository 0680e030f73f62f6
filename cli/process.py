"""Settings of the whole process that outlast a command: made only when wmcheck is the process (its
console script), never when a caller runs a command in its own process."""
from __future__ import annotations

import contextlib
import sys
from typing import Any, Iterator


class _Hidden:
    """A module finder that reports the given top-level modules as not installed."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


_PROCESS = {"own": False}


def own_process() -> None:
    """Called by the console script: wmcheck is the whole process, so commands may make settings that outlast them."""
    _PROCESS["own"] = True


@contextlib.contextmanager
def lean_pyarrow() -> Iterator[None]:
    """Run with numpy and pandas unimportable (those not imported yet) when wmcheck owns the process:
    pyarrow imports numpy with itself (0.15 s) and pandas on its first conversion of Python values (0.3 s)
    to recognise their objects; the python state engine hands it none. pyarrow then goes without them
    for the rest of the process, so a caller's process (wmcheck called in-process) is left alone."""
    if not _PROCESS["own"]:
        yield
        return
    finder = _Hidden(("numpy", "pandas"))
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
