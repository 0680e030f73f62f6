"""Safe checkpoint repair: ``rewind``, ``set-watermark``, ``undo`` and ``backups`` (see docs/repair.md)."""
from .api import list_backups, rewind, set_watermark, undo_repair
from .execute import InjectedFailure

__all__ = ["InjectedFailure", "list_backups", "rewind", "set_watermark", "undo_repair"]
