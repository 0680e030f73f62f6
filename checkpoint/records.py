"""wmcheck's ``@dataclass``: the standard library's, with its methods made when a class is first used, not when its
module is imported.

``dataclasses.dataclass`` writes and compiles six methods per frozen class as its module is imported; wmcheck defines
about 200 such classes, and creating them was 40% of ``wmcheck show``'s CPU time although a run uses half of them
(``bench/bench_cli.py``). This decorator records the options and defers the work to the first call of ``__init__``
(or of ``__eq__``, ``__hash__``, ``__repr__``, ``__setattr__`` on an instance made without it, as unpickling does) or
to the first look at the class's fields (``dataclasses.fields``, ``replace``, ``asdict``, ``is_dataclass``). Then
``dataclasses.dataclass`` makes ``__init__`` (and a frozen class's ``__setattr__`` and ``__delattr__``) as it always
does, and ``__eq__``, ``__hash__`` and ``__repr__`` are plain functions over the fields, with the standard library's
semantics (the same class only, the fields' ``compare``, ``hash`` and ``repr`` flags, a frozen class hashable unless
it says otherwise). Type checkers see ``dataclasses.dataclass`` itself."""
from __future__ import annotations

import dataclasses
import reprlib
from typing import TYPE_CHECKING, Any, Callable

__all__ = ["dataclass"]

_FIELDS = "__dataclass_fields__"
_OPTIONS = "__wmcheck_dataclass__"
_DEFERRED = ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__")
_SUPPORTED = frozenset({"frozen", "eq", "repr", "init"})


class _Fields:
    """The class's ``__dataclass_fields__`` until it is made: looking at it makes the class."""

    def __init__(self, owner: type) -> None:
        self.owner = owner

    def __get__(self, obj: object, objtype: type | None = None) -> Any:
        return _make(self.owner).__dict__[_FIELDS]


def _make(cls: type) -> type:
    """Make the deferred dataclass ``cls`` (its bases first); a class already made is returned as it is."""
    options = cls.__dict__.get(_OPTIONS)
    if options is None:
        return cls
    for name, value in list(cls.__dict__.items()):
        if getattr(value, "__wmcheck_deferred__", None) is cls or isinstance(value, _Fields):
            delattr(cls, name)
    delattr(cls, _OPTIONS)
    for base in cls.__mro__[1:-1]:
        _make(base)
    eq, frozen = options.get("eq", True), options.get("frozen", False)
    dataclasses.dataclass(cls, **{**options, "eq": False, "repr": False})
    fields = dataclasses.fields(cls)
    own = cls.__dict__
    made: dict[str, Any] = {}
    if options.get("repr", True) and "__repr__" not in own:
        made["__repr__"] = _repr(tuple(f.name for f in fields if f.repr))
    if eq:
        if "__eq__" not in own:
            made["__eq__"] = _eq(_values(tuple(f.name for f in fields if f.compare)))
        explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
        if not explicit_hash:
            hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
            made["__hash__"] = _hash(_values(hashed)) if frozen else None
    for name, method in made.items():
        setattr(cls, name, method)
    return cls


def _values(names: tuple[str, ...]) -> Callable[[object], tuple[Any, ...]]:
    return lambda obj: tuple(getattr(obj, name) for name in names)


def _repr(names: tuple[str, ...]) -> Callable[[object], str]:
    @reprlib.recursive_repr()
    def __repr__(self: object) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{type(self).__qualname__}({shown})"

    return __repr__


def _eq(values: Callable[[object], tuple[Any, ...]]) -> Callable[[object, object], Any]:
    def __eq__(self: object, other: object) -> Any:
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    return __eq__


def _hash(values: Callable[[object], tuple[Any, ...]]) -> Callable[[object], int]:
    return lambda self: hash(values(self))


def _deferred(owner: type, name: str) -> Callable[..., Any]:
    """A method that makes ``owner`` and calls the method of ``name`` it then has."""

    def method(self: object, *args: Any, **kwargs: Any) -> Any:
        _make(owner)
        made = getattr(owner, name)
        if made is None:
            raise TypeError(f"unhashable type: {owner.__name__!r}")
        return made(self, *args, **kwargs)

    method.__name__ = name
    method.__wmcheck_deferred__ = owner  # type: ignore[attr-defined]
    return method


def _defer(cls: type, options: dict[str, Any]) -> type:
    if not options.keys() <= _SUPPORTED:  # slots=True makes a new class, order=True more methods: made at once
        return dataclasses.dataclass(cls, **options)
    for name in _DEFERRED:
        if name not in cls.__dict__:
            setattr(cls, name, _deferred(cls, name))
    setattr(cls, _OPTIONS, options)
    setattr(cls, _FIELDS, _Fields(cls))
    return cls


def _dataclass(cls: type | None = None, /, **options: Any) -> Any:
    if cls is None:
        return lambda c: _defer(c, options)
    return _defer(cls, options)


if TYPE_CHECKING:
    from dataclasses import dataclass as dataclass
else:
    dataclass = _dataclass
