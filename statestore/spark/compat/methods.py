"""Methods of a pyspark class replaced for as long as the user's function builds its query (its reader calls
answered by other sources, its writer's starts refused), and put back after."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator


@contextmanager
def replaced(cls: type, names: tuple[str, ...], make: Callable[[str], Callable]) -> Iterator[None]:
    """Each method ``name`` of ``names`` that ``cls`` has is ``make(name)`` inside the block."""
    saved: dict[str, Any] = {name: getattr(cls, name) for name in names if hasattr(cls, name)}
    try:
        for name in saved:
            setattr(cls, name, make(name))
        yield
    finally:
        for name, original in saved.items():
            setattr(cls, name, original)
