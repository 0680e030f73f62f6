"""What ``wmcheck state`` reads, worked out once before anything is read: the selected stores, each store's target
(its operator's own watermark at the batch), the engine that reads them and, for the python engine, each store's
file plan. The engines read a :class:`StatePlan`; the output renders what they read."""
from __future__ import annotations

from typing import TYPE_CHECKING, Literal, get_args

from wmcheck.checkpoint.errors import CheckpointError, UnsupportedError
from wmcheck.checkpoint.model import Checkpoint
from wmcheck.checkpoint.records import dataclass
from wmcheck.checkpoint.watermarks.operators import operator_watermarks

from .discovery import Store, select
from .targets import Target, require_known, store_target, target

if TYPE_CHECKING:
    from wmcheck.checkpoint.watermarks.progress import QueryProgress
    from wmcheck.statestore.engine.presentation import StorePlan

EngineChoice = Literal["auto", "python", "spark"]
"""An engine to read state with (``auto``: python where it reads every store, else Spark)."""
ENGINES: tuple[EngineChoice, ...] = get_args(EngineChoice)
EngineName = Literal["python", "spark"]
"""The engine that reads state: Python (the files, no JVM) or Spark's state reader."""


@dataclass(frozen=True)
class StatePlan:
    """The stores to read at one batch, each with its target, and the engine that reads them."""

    ckpt: Checkpoint
    target: Target
    """The batch's target (the global watermark)."""
    stores: tuple[Store, ...]
    targets: tuple[Target, ...]
    """Each store's target: its operator's own eviction watermark."""
    engine: EngineName
    note: str | None = None
    """Why ``auto`` reads with Spark (the python engine's first unsupported store)."""
    store_plans: tuple["StorePlan", ...] = ()
    """The python engine's plan of each store (empty for Spark's)."""


def _engine(ckpt: Checkpoint, stores: list[Store],
            engine: EngineChoice) -> tuple[EngineName, str | None, tuple["StorePlan", ...]]:
    """``(engine, note, store plans)``: ``auto`` takes python when it plans every store, else Spark with the reason."""
    if engine not in ENGINES:
        raise CheckpointError(f"unknown state engine {engine!r}", hint=f"use one of {', '.join(ENGINES)}")
    if engine == "spark":
        return "spark", None, ()
    from wmcheck.statestore.engine.presentation import plan_store

    try:
        return "python", None, tuple(plan_store(ckpt, s) for s in stores)
    except UnsupportedError as exc:
        if engine == "python":
            raise
        return "spark", f"reading with Spark: {exc.message}", ()


def plan_state(ckpt: Checkpoint, operator: int | None = None, selection: str | None = None, kind: str | None = None,
               batch: int | None = None, watermark_ms: int | None = None, progress: "QueryProgress | None" = None,
               engine: EngineChoice = "auto", older: bool = False) -> StatePlan:
    """The plan of one ``wmcheck state``: the stores ``selection`` names (a store, join side or state variable;
    ``kind`` insists on one), each judged by its operator's own eviction watermark at ``batch`` (``watermark_ms``: a
    what-if global watermark; ``progress``: the event log, where the plan decides it). An unknown operator or store,
    and with ``older`` an operator whose own watermark is unknown, fail here, before a state file (or a JVM) is
    touched."""
    stores = select(ckpt, operator, selection, kind)
    tgt = target(ckpt, batch, watermark_ms)
    model = operator_watermarks(ckpt, progress, [tgt.batch])  # the event log's plans decide where they print it
    targets = [store_target(tgt, s, model) for s in stores]
    if older:
        require_known(stores, targets)
    name, note, plans = _engine(ckpt, stores, engine)
    return StatePlan(ckpt, tgt, tuple(stores), tuple(targets), name, note, plans)
