"""Tables that fit people: the width a table is wrapped to (the terminal's, ``COLUMNS``, or none with ``--wide``),
its cells never blank, and the widths its widest columns wrap at."""
from __future__ import annotations

import json
import os
import shutil
import sys
from typing import Any, Sequence, TextIO

import click


def cell(value: Any) -> str:
    """A value as one table/CSV cell."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return "; ".join(cell(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def terminal_width(stream: TextIO | None) -> int | None:
    """The width to fit tables to: ``COLUMNS`` when set, else the terminal's when writing to one (None: a file or
    a pipe, lines as long as they are)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if stream is None and sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return None


WIDE_KEY = "wmcheck.wide"
"""``--wide`` was given: tables keep their lines as long as they are."""


def wide_requested() -> bool:
    """``--wide`` (kept in the command line's root context as it is parsed)."""
    ctx = click.get_current_context(silent=True)
    return ctx is not None and bool(ctx.find_root().meta.get(WIDE_KEY))


UNKNOWN = "unknown"
"""A table's cell whose value is not known (JSON and CSV: null and empty)."""


def table_cell(value: Any) -> str:
    """A value as a table cell: never blank (``unknown``; an empty list: ``none``)."""
    if isinstance(value, (list, tuple)) and not value:
        return "none"
    return cell(value) or UNKNOWN


MIN_WRAPPED = 24
"""The narrowest a wrapped column gets, however narrow the terminal."""


def fitted_widths(cells: Sequence[Sequence[str]], columns: Sequence[str], width: int) -> list[int | None] | None:
    """The widths to wrap columns at so that a table fits ``width``: the widest columns share what the narrow
    ones leave (one cap for all of them); None when the table fits as it is."""
    # tabulate pads each header by 2 ("simple" format)
    natural = [max([len(h) + 2] + [max(map(len, row[i].split("\n"))) for row in cells]) for i, h in enumerate(columns)]
    room = width - 2 * (len(columns) - 1)
    if sum(natural) <= room:
        return None
    cap = max(natural)
    while cap > MIN_WRAPPED and sum(min(w, cap) for w in natural) > room:
        cap -= 1
    return [cap if w > cap else None for w in natural]
