"""wmcheck's deferred ``@dataclass`` (checkpoint/records.py) behaves as the standard library's: each class below is
defined twice, once by each decorator, and every operation is compared."""
from __future__ import annotations

import copy
import dataclasses
import pickle
import subprocess
import sys
from dataclasses import InitVar, field
from typing import Any, ClassVar

import pytest

from wmcheck.checkpoint import records


def define(decorator: Any) -> dict[str, type]:
    """The same classes under ``decorator``."""

    @decorator(frozen=True)
    class Point:
        x: int
        y: int = 2
        tags: tuple[str, ...] = field(default=(), compare=False, repr=False)
        LIMIT: ClassVar[int] = 9

    @decorator(frozen=True)
    class Labelled(Point):
        label: str = "p"
        note: str = field(default="", hash=False)

    @decorator(frozen=True, eq=False)
    class Identity:
        name: str

    @decorator(frozen=True)
    class OwnEq:
        value: int

        def __eq__(self, other: object) -> bool:
            return isinstance(other, OwnEq) and other.value % 10 == self.value % 10

    @decorator(frozen=True)
    class Posted:
        raw: str
        scale: InitVar[int] = 1
        parsed: int = field(init=False, default=0)
        items: list[int] = field(default_factory=list)

        def __post_init__(self, scale: int) -> None:
            object.__setattr__(self, "parsed", int(self.raw) * scale)

    @decorator
    class Mutable:
        count: int = 0

    @decorator(frozen=True)
    class Node:
        children: list[Any] = field(default_factory=list)

    class Plain(Point):
        pass

    return {c.__name__: c for c in (Point, Labelled, Identity, OwnEq, Posted, Mutable, Node, Plain)}


def both() -> tuple[dict[str, type], dict[str, type]]:
    return define(dataclasses.dataclass), define(records._dataclass)


def test_a_class_is_made_only_when_first_used() -> None:
    _, ours = both()
    assert records._OPTIONS in ours["Point"].__dict__
    ours["Point"](1)
    assert records._OPTIONS not in ours["Point"].__dict__
    assert records._OPTIONS in ours["Labelled"].__dict__  # a subclass waits for its own first use


@pytest.mark.parametrize("name,args,kwargs", [
    ("Point", (1,), {}), ("Point", (1, 3), {"tags": ("a",)}), ("Labelled", (1, 2), {"label": "q", "note": "n"}),
    ("Identity", ("i",), {}), ("OwnEq", (13,), {}), ("Posted", ("4",), {"scale": 3}), ("Mutable", (), {"count": 5}),
    ("Plain", (7,), {}),
])
def test_instances_behave_as_the_standard_librarys(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    theirs, ours = both()
    a, b = theirs[name](*args, **kwargs), ours[name](*args, **kwargs)
    a2, b2 = theirs[name](*args, **kwargs), ours[name](*args, **kwargs)
    assert repr(a) == repr(b)
    assert (a == a2) == (b == b2)
    assert (a != a2) == (b != b2)
    assert (a == "other") == (b == "other")
    assert [f.name for f in dataclasses.fields(a)] == [f.name for f in dataclasses.fields(b)]
    assert dataclasses.asdict(a) == dataclasses.asdict(b)
    assert dataclasses.is_dataclass(b) and dataclasses.is_dataclass(type(b))
    hashable = type(a).__hash__ is not None
    assert (type(b).__hash__ is not None) == hashable
    if hashable:
        try:
            same = hash(a) == hash(a2)
        except TypeError:  # a field's value is unhashable
            with pytest.raises(TypeError):
                hash(b)
        else:
            assert same == (hash(b) == hash(b2))
    else:
        with pytest.raises(TypeError):
            hash(b)
    frozen = type(a).__dataclass_params__.frozen  # type: ignore[attr-defined]
    if frozen:
        with pytest.raises(dataclasses.FrozenInstanceError):
            b.x = 5  # type: ignore[attr-defined]
        with pytest.raises(dataclasses.FrozenInstanceError):
            del b.x  # type: ignore[attr-defined]
    else:
        b.count = 6  # type: ignore[attr-defined]
        assert b.count == 6  # type: ignore[attr-defined]
    assert copy.deepcopy(b) == b if type(b).__eq__ is not object.__eq__ else True


def test_fields_eq_hash_and_repr_follow_the_field_flags() -> None:
    _, ours = both()
    point = ours["Point"]
    assert point(1, tags=("a",)) == point(1, tags=("b",))  # compare=False
    assert repr(point(1, tags=("a",))) == "define.<locals>.Point(x=1, y=2)"  # repr=False
    labelled = ours["Labelled"]
    assert hash(labelled(1, note="a")) == hash(labelled(1, note="b"))  # hash=False
    assert labelled(1, note="a") != labelled(1, note="b")  # but compared
    assert point(1) != labelled(1)  # another class is never equal
    assert point.LIMIT == 9 and "LIMIT" not in [f.name for f in dataclasses.fields(point)]
    own = ours["OwnEq"]
    assert own(13) == own(3) and hash(own(13)) != hash(own(3))  # its own __eq__, the fields' hash (as stdlib)
    assert ours["Identity"]("i") != ours["Identity"]("i")
    posted = ours["Posted"]("4", scale=3)
    assert posted.parsed == 12 and posted.items == [] and posted.items is not ours["Posted"]("1").items


def test_fields_replace_and_is_dataclass_before_any_instance() -> None:
    _, ours = both()
    assert [f.name for f in dataclasses.fields(ours["Labelled"])] == ["x", "y", "tags", "label", "note"]
    assert dataclasses.is_dataclass(ours["Point"])
    moved = dataclasses.replace(ours["Point"](1), y=5)
    assert (moved.x, moved.y) == (1, 5)  # type: ignore[attr-defined]


def test_a_recursive_repr_stops() -> None:
    theirs, ours = both()
    for classes in (theirs, ours):
        node = classes["Node"]()
        node.children.append(node)
        assert repr(node) == f"{type(node).__qualname__}(children=[...])"


def test_an_instance_unpickled_where_its_class_was_never_made() -> None:
    """A worker process unpickles instances without calling ``__init__``: comparing, hashing and showing them make
    the class there."""
    from wmcheck.checkpoint.checks.definition import Instruction

    made = Instruction("restore offsets/5")
    code = ("import pickle, sys; obj = pickle.loads(sys.stdin.buffer.read()); other = pickle.loads(pickle.dumps(obj));"
            "print(obj == other, repr(obj) == repr(other), hash(obj) == hash(other))")
    done = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(made), capture_output=True, check=True)
    assert done.stdout.decode().split() == ["True", "True", "True"]


def test_options_it_does_not_defer_are_the_standard_librarys() -> None:
    @records._dataclass(frozen=True, slots=True)
    class Slotted:
        a: int

    assert Slotted.__slots__ == ("a",) and records._OPTIONS not in Slotted.__dict__
