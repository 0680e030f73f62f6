"""``fs_options`` (the command line's ``--fs-option KEY=VALUE``): each store's constructor options, typed.

Each store module lists the options of its ``pyarrow.fs`` constructor it accepts; values arrive as text and
are converted here. ``timeout`` belongs to wmcheck and every remote store: how long any one call may wait."""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Callable, Mapping

from wmcheck.checkpoint.records import dataclass

from ..errors import CheckpointError, arg

DEFAULT_TIMEOUT = 30.0
"""Seconds a remote store may take to connect or to answer one call."""


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    raise ValueError("expected true or false")


def _seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError("expected a number of seconds above 0")
    return value


def _duration(text: str) -> timedelta:
    return timedelta(seconds=_seconds(text))


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text)


KINDS: dict[str, tuple[Callable[[str], Any], str]] = {
    "str": (str, "text"),
    "bool": (_bool, "true or false"),
    "int": (int, "an integer"),
    "seconds": (_seconds, "seconds"),
    "duration": (_duration, "seconds"),
    "instant": (_instant, "an ISO date-time"),
}


@dataclass(frozen=True)
class Option:
    """One constructor option: its name (the keyword pyarrow takes), kind (a key of ``KINDS``), what it does and
    an example value."""

    name: str
    kind: str
    help: str
    example: str

    def convert(self, text: str, store: str) -> Any:
        parse, expected = KINDS[self.kind]
        try:
            return parse(text)
        except ValueError:
            raise CheckpointError(f"{store} option {self.name} takes {expected}, got {text!r}",
                                  hint=f"e.g. {arg('fs_options', self.name + '=' + self.example)}",
                                  param="fs_options") from None


TIMEOUT = Option("timeout", "seconds", "seconds to connect and for each call to answer (default 30)", "60")


def store_options(given: Mapping[str, str], known: tuple[Option, ...], store: str) -> tuple[dict[str, Any], float]:
    """The constructor keywords ``given`` names for a store whose options are ``known``, and the timeout.
    An unknown name is refused with the valid ones."""
    table = {o.name: o for o in (*known, TIMEOUT)}
    unknown = sorted(set(given) - set(table))
    if unknown:
        raise CheckpointError(
            f"unknown {store} option {', '.join(unknown)}: valid are {', '.join(sorted(table))}",
            hint=f"pass them as {arg('fs_options', 'KEY=VALUE')} (docs/remote.md lists what each does)", param="fs_options")
    values = {key: table[key].convert(text, store) for key, text in given.items()}
    timeout = values.pop("timeout", DEFAULT_TIMEOUT)
    return values, timeout
