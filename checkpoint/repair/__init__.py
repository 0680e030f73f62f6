"""Safe checkpoint repair: ``rewind``, ``set-watermark``, ``relocate``, ``repartition``, ``reset-offsets``, ``undo``
and ``backups`` (see docs/repair.md; Spark's repartition runs with a :class:`wmcheck.statestore.spark.repartition.SparkRepartitioner`).

``run(location, RewindRequest(to_batch=7), RunOptions(execute=True))`` plans (and applies) a repair.

The names below are imported on first use: check's findings name repair requests as their fixes, and importing
one of them must not import every planner.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import list_backups, run, run_fix, undo_repair
    from .execute import InjectedFailure
    from .repartition import RepartitionRequest
    from .requests import RelocateRequest, RepairRequest, RewindRequest, RunOptions, SetWatermarkRequest, UndoRequest
    from .reset_request import ResetOffsetsRequest
    from .results import BackupRow, RepairResult, Restored, Resumed, StoreCount, UndoResult, Verification

_HOMES = {
    "api": ("list_backups", "run", "run_fix", "undo_repair"),
    "execute": ("InjectedFailure",),
    "repartition": ("RepartitionRequest",),
    "requests": ("RelocateRequest", "RepairRequest", "RewindRequest", "RunOptions", "SetWatermarkRequest",
                 "UndoRequest"),
    "reset_request": ("ResetOffsetsRequest",),
    "results": ("BackupRow", "RepairResult", "Restored", "Resumed", "StoreCount", "UndoResult", "Verification"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = ["BackupRow", "InjectedFailure", "RelocateRequest", "RepairRequest", "RepairResult", "RepartitionRequest",
           "ResetOffsetsRequest", "Restored", "Resumed", "RewindRequest", "RunOptions", "SetWatermarkRequest",
           "StoreCount", "UndoRequest", "UndoResult", "Verification", "list_backups", "run", "run_fix", "undo_repair"]


def __getattr__(name: str) -> Any:
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
