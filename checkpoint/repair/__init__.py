"""Safe checkpoint repair: ``rewind``, ``set-watermark``, ``relocate``, ``repartition``, ``undo`` and ``backups``
(see docs/repair.md; running Spark's repartition is :mod:`wmcheck.statestore.repartition`).

``run(location, RewindRequest(to_batch=7), RunOptions(execute=True))`` plans (and applies) a repair.
"""
from .api import list_backups, run, undo_repair
from .execute import InjectedFailure
from .repartition import RepartitionRequest
from .requests import RelocateRequest, RepairRequest, RewindRequest, RunOptions, SetWatermarkRequest
from .results import BackupRow, RepairResult, Restored, Resumed, UndoResult

__all__ = ["BackupRow", "InjectedFailure", "RelocateRequest", "RepairRequest", "RepairResult", "RepartitionRequest",
           "Restored", "Resumed", "RewindRequest", "RunOptions", "SetWatermarkRequest", "UndoResult", "list_backups", "run",
           "undo_repair"]
