"""What Spark's state reader can read in a checkpoint: operators, stores, join sides, state variables.

Built from the checkpoint model (``state/<op>/_metadata`` when Spark >= 4.0 wrote it, else the
store directories) and the state schema files; no Spark. Checkpoints written by Spark < 4.0 have
no operator metadata: their operator name is inferred from the stores and schemas (say so).
"""
from __future__ import annotations

from dataclasses import field
from typing import Any, Mapping

from wmcheck.checkpoint.errors import CheckpointError
from wmcheck.checkpoint.model import Checkpoint, Operator
from wmcheck.checkpoint.operator_kinds import JOIN_SIDES, is_join, is_transform_with_state
from wmcheck.checkpoint.records import dataclass
from wmcheck.statestore.formats.files import DEFAULT_STORE

STATE = "state"
KINDS = {"store": ("storeName",), "join_side": ("joinSide",), "state_var": ("stateVarName", "readRegisteredTimers")}


@dataclass(frozen=True)
class Store:
    """One thing the state reader reads: a store, a join side or a transformWithState variable."""

    operator_id: int
    operator_name: str | None
    name: str
    options: Mapping[str, str]
    """Reader options selecting it (besides the path and ``batchId``)."""
    num_partitions: int | None
    schema_store: str
    """The store whose schema file describes its rows."""
    inferred_name: bool = False
    """``operator_name`` was inferred: the checkpoint has no operator metadata (Spark < 4.0)."""


@dataclass(frozen=True)
class OperatorStores:
    operator_id: int
    operator_name: str | None
    views: tuple[Store, ...]
    """What a user reads by default: each store, or each join side, or each state variable."""
    internal: tuple[Store, ...] = field(default=())
    """Further stores selectable by name (a join's four internal stores)."""

    @property
    def selectable(self) -> tuple[Store, ...]:
        return self.views + self.internal


def _tws_views(op: Operator, make) -> tuple[Store, ...]:
    variables = (getattr(op.metadata, "properties", None) or {}).get("stateVariables") or []
    views = []
    for var in variables:
        name = var.get("stateName")
        if not isinstance(name, str):
            continue
        timers = var.get("stateVariableType") == "TimerState"
        views.append(make(name, {"readRegisteredTimers": "true"} if timers else {"stateVarName": name}))
    return tuple(views)


def operator_stores(ckpt: Checkpoint, op: Operator) -> OperatorStores:
    """The readable stores of one operator."""
    name, inferred = op.name, op.name_inferred

    def make(label: str, options: dict[str, str], schema_store: str = DEFAULT_STORE) -> Store:
        return Store(op.operator_id, name, label, {"operatorId": str(op.operator_id), **options},
                     op.num_partitions, schema_store, inferred)

    if is_transform_with_state(name):
        return OperatorStores(op.operator_id, name, _tws_views(op, make))
    if is_join(name, op.stores):
        sides = tuple(make(side, {"joinSide": side}, f"{side}-keyWithIndexToValue") for side in JOIN_SIDES)
        return OperatorStores(op.operator_id, name, sides, tuple(make(s, {"storeName": s}, s) for s in op.stores))
    return OperatorStores(op.operator_id, name, tuple(make(s, {"storeName": s}, s) for s in op.stores))


def all_operators(ckpt: Checkpoint) -> list[OperatorStores]:
    return [operator_stores(ckpt, op) for op in ckpt.operators]


def select(ckpt: Checkpoint, operator: int | None = None, store: str | None = None, kind: str | None = None) -> list[Store]:
    """The stores to read: every operator's views, one operator's, or one named store.

    ``store`` is a store name, a join side (``left``/``right``) or a transformWithState variable;
    ``kind`` (a key of ``KINDS``) insists on one of these.
    """
    if ckpt.state_layout.unreadable:  # its stores would read as missing partitions
        raise ckpt.state_layout.unreadable[0]
    operators = all_operators(ckpt)
    if not operators:
        raise CheckpointError("the checkpoint has no state: no stateful operator wrote under state/",
                              hint="wmcheck state reads stateful queries (aggregations, dedup, joins, [flatMap]GroupsWithState, transformWithState)")
    if operator is not None:
        operators = [o for o in operators if o.operator_id == operator]
        if not operators:
            known = ", ".join(str(o.operator_id) for o in all_operators(ckpt))
            raise CheckpointError(f"no stateful operator {operator} in this checkpoint", path=STATE,
                                  hint=f"operators present: {known} (see wmcheck state CKPT without --operator)", param="operator")
    if store is None:
        return [s for o in operators for s in o.views]
    options = KINDS[kind] if kind else tuple(o for opts in KINDS.values() for o in opts)
    candidates = [s for o in operators for s in o.selectable if any(k in s.options for k in options)]
    found = [s for s in candidates if s.name == store]
    if not found:
        what = {"store": "store", "join_side": "join side", "state_var": "state variable"}.get(kind or "", "store, join side or state variable")
        where = f"operator {operator}" if operator is not None else "any operator"
        names = ", ".join(dict.fromkeys(s.name for s in candidates)) or "none"
        raise CheckpointError(f"no {what} {store!r} in {where}", path=STATE, hint=f"{what}s there: {names}", param=kind or "store")
    return found


def only_one(reads: list[Any], operator: int, evictable_only: bool) -> Any:
    """The one read of ``reads`` (of either engine), or the one with an event-time column when ``evictable_only``."""
    candidates = [r for r in reads if r.rule.evictable] if evictable_only and len(reads) > 1 else reads
    if len(candidates) != 1:
        names = ", ".join(r.store.name for r in reads)
        raise CheckpointError(f"operator {operator} has several stores: {names}", hint="pass store=<one of them>")
    return candidates[0]
