"""The rule every command applies to a range of batch ids."""
from __future__ import annotations

from .errors import CheckpointError, arg


def check_span(start: int | None, end: int | None, last: int | None, last_what: str = "batch", beyond: bool = True) -> None:
    """The rule every command applies to a range of batch ids ``start..end`` (either may be open): ids start at 0,
    ``start`` is not after ``end``, and neither is beyond ``last`` (the last ``last_what``: ``batch``, ``committed
    batch``; ``beyond=False``: the caller checks that itself). Violations are errors on the parameter at fault,
    never an empty result."""
    bounds = ((start, "start", arg("start", start), arg("start", 0), arg("start", last)),
              (end, "end", arg("end", end), arg("end", 0), arg("end", last)))
    for batch, param, given, first, _ in bounds:
        if batch is not None and batch < 0:
            raise CheckpointError(f"{given}: batch ids start at 0", hint=f"use {first} or more", param=param)
    if start is not None and end is not None and start > end:
        raise CheckpointError(f"{arg('start', start)} is after {arg('end', end)}",
                              hint=f"batches go up to {last}" if last is not None else None, param="start")
    for batch, param, _, _, at_most in bounds if beyond else ():
        if batch is not None and last is not None and batch > last:
            raise CheckpointError(f"batch {batch} does not exist: the last {last_what} is {last}",
                                  hint=f"use {at_most} or less", param=param)
