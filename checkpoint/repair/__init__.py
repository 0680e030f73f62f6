"""Safe checkpoint repair: ``rewind``, ``set-watermark``, ``relocate``, ``repartition``, ``reset-offsets``, ``undo``
and ``backups`` (see docs/repair.md; Spark's repartition runs with a :class:`wmcheck.statestore.repartition.SparkRepartitioner`).

``run(location, RewindRequest(to_batch=7), RunOptions(execute=True))`` plans (and applies) a repair.
"""
from .api import list_backups, run, run_fix, undo_repair
from .execute import InjectedFailure
from .repartition import RepartitionRequest
from .requests import RelocateRequest, RepairRequest, RewindRequest, RunOptions, SetWatermarkRequest, UndoRequest
from .reset_request import ResetOffsetsRequest
from .results import BackupRow, RepairResult, Restored, Resumed, StoreCount, UndoResult, Verification

__all__ = ["BackupRow", "InjectedFailure", "RelocateRequest", "RepairRequest", "RepairResult", "RepartitionRequest",
           "ResetOffsetsRequest",
           "Restored", "Resumed", "RewindRequest", "RunOptions", "SetWatermarkRequest", "StoreCount", "UndoRequest", "UndoResult",
           "Verification", "list_backups", "run", "run_fix", "undo_repair"]
