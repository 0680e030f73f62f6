"""The registry of repairs: every request ``run``, ``undo`` and ``backups`` know, listed here by command
(importing a request module adds nothing anywhere; a command missing from this list cannot be undone)."""
from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from .repartition import RepartitionRequest
from .requests import RelocateRequest, RepairRequest, RewindRequest, SetWatermarkRequest
from .reset_request import ResetOffsetsRequest

LISTED: tuple[type[RepairRequest], ...] = (RewindRequest, SetWatermarkRequest, RelocateRequest, RepartitionRequest,
                                           ResetOffsetsRequest)

REQUESTS: Mapping[str, type[RepairRequest]] = MappingProxyType({r.command: r for r in LISTED})
"""Every repair's request class by command name (read-only)."""
