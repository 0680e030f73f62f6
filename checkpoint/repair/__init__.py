"""Safe checkpoint repair: ``rewind``, ``set-watermark``, ``relocate``, ``undo`` and ``backups`` (see docs/repair.md)."""
from .api import list_backups, relocate, rewind, set_watermark, undo_repair
from .execute import InjectedFailure

__all__ = ["InjectedFailure", "list_backups", "relocate", "rewind", "set_watermark", "undo_repair"]
