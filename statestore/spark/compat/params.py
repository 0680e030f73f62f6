"""The options compat's code and input come from, as placeholders of messages."""
from __future__ import annotations

from wmcheck.checkpoint.errors import arg


def named(param: str, value: str) -> str:
    """``arg(param, value)`` for the options compat's code and input come from (each placeholder's name is a literal,
    so that tests/test_messages.py finds every one a flag)."""
    return {"query": arg("query", value), "baseline": arg("baseline", value), "inputs": arg("inputs", value),
            "next_inputs": arg("next_inputs", value)}[param]
