"""The new query's logical plan, walked as Spark numbers its sources (pre-order, left to right), through py4j."""
from __future__ import annotations

from typing import Any


def plan_nodes(plan: Any) -> list[Any]:
    """Every node of a logical plan, pre-order, left to right (the order Spark numbers sources in)."""
    out, stack = [], [plan]
    while stack:
        node = stack.pop()
        out.append(node)
        children = node.children()
        stack += [children.apply(i) for i in reversed(range(children.size()))]
    return out


STREAMING_RELATIONS = ("StreamingRelation", "StreamingRelationV2", "StreamingExecutionRelation")


def relations(plan: Any) -> list[str]:
    """The output attributes of every streaming relation of a plan, in the order Spark numbers its sources."""
    return [str(n.output().toString()) for n in plan_nodes(plan) if n.nodeName() in STREAMING_RELATIONS]
