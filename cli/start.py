"""The console script's entry point: Ctrl-C is wmcheck's to handle before the command line's modules (click, the
commands) are imported, so an interrupt during start-up ends it as one at any later point does."""
from __future__ import annotations


def main() -> None:
    """``wmcheck``: take over Ctrl-C (exit 130, no traceback), then import and run the command line."""
    from .process import own_process

    own_process()
    from .main import main as run

    run()
