"""What kind of stateful operator a ``state/<op>/`` directory belongs to (no I/O here).

Spark >= 4.0 records the operator name in ``state/<op>/_metadata``; older checkpoints do not, so
the name Spark would have recorded is inferred from the store names and the default store's schema.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wmcheck.statestore.formats.schema import ColumnFamilySchema

JOIN_SIDES = ("left", "right")
SPARK_OPERATOR_NAMES = frozenset({
    "stateStoreSave", "dedupe", "dedupeWithinWatermark", "symmetricHashJoin", "flatMapGroupsWithState",
    "applyInPandasWithState", "sessionWindowStateStoreSaveExec", "transformWithStateExec",
    "transformWithStateInPandasExec", "transformWithStateInPySparkExec", "StatefulStreamlineAggregate", "globalLimit"})
"""Every name Spark 4.3 gives a stateful operator in its metadata (``StatefulOperatorsUtils``, and the streaming limit's
own ``globalLimit``): on restart it compares the metadata's names with the query's operators' exactly."""


GROUP_STATE = frozenset({"flatMapGroupsWithState", "applyInPandasWithState"})
"""(flat)MapGroupsWithState and its Python form: a user function over each group's state, with an optional timeout."""


def is_group_state(operator_name: str | None) -> bool:
    return operator_name in GROUP_STATE


def is_join(operator_name: str | None, stores: tuple[str, ...]) -> bool:
    return operator_name == "symmetricHashJoin" or any(s.startswith(("left-", "right-")) for s in stores)


def is_transform_with_state(operator_name: str | None) -> bool:
    return bool(operator_name and operator_name.startswith("transformWithState"))


def infer_operator_name(stores: tuple[str, ...], default_schema: ColumnFamilySchema | None) -> str | None:
    """The operator name Spark >= 4.0 would have recorded, from the store names and the default
    store's key/value schema (None when there is no schema to tell)."""
    if is_join(None, stores):
        return "symmetricHashJoin"
    if default_schema is None:
        return None
    key = {f.name for f in default_schema.key_schema.fields}
    value = {f.name for f in default_schema.value_schema.fields}
    if "groupState" in value:
        return "flatMapGroupsWithState"
    if value == {"expiresAtMicros"}:
        return "dedupeWithinWatermark"
    if value == {"__dummy__"}:
        return "dedupe"
    if "sessionStartTime" in key:
        return "sessionWindowStateStoreSaveExec"
    return "stateStoreSave"
