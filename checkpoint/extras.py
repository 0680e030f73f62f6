"""wmcheck's optional packages (its extras), imported when a command needs one: a missing one is one error line
naming the extra to install."""
from __future__ import annotations

import importlib
from typing import Any

from .errors import CheckpointError


def optional_module(name: str, needed_for: str, extra: str, what: str | None = None) -> Any:
    """The module ``name`` of the extra ``extra``; a CheckpointError saying what needs it (``what``: how the message
    names it, default the package's name) when it is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError:
        raise CheckpointError(f"{needed_for} needs {what or f'the {name} package'}, which is not installed",
                              hint=f"pip install 'wmcheck[{extra}]'") from None
