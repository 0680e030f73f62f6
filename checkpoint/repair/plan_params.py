"""What a plan records besides its steps, typed: the parameters of its request (one class per command) and where
the checkpoint stands before and after it, with their JSON form (the plan's ``request``, ``before`` and ``after``;
docs/repair.md). A field whose ``metadata`` says ``optional`` is left out of the JSON when it is None; ``json``
renames its key.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import field
from typing import Any, ClassVar, TypeVar

from wmcheck.checkpoint.records import dataclass

OPTIONAL: Mapping[str, Any] = {"optional": True}
T = TypeVar("T", bound="Document")


class Document:
    """A frozen dataclass with a JSON form: its fields in order, optional ones only when set."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if value is None and f.metadata.get("optional"):
                continue
            out[f.metadata.get("json", f.name)] = _json_value(value)
        return out

    @classmethod
    def from_json(cls: type[T], obj: Any) -> T:
        """The document of ``obj`` (a JSON object), every field checked against its type; ValueError otherwise."""
        if not isinstance(obj, Mapping):
            raise ValueError(f"expected an object, found {type(obj).__name__}")
        values = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            key = f.metadata.get("json", f.name)
            if key not in obj:
                if f.default is dataclasses.MISSING:
                    raise ValueError(f"{key} is missing")
                continue
            values[f.name] = _checked(key, obj[key], str(f.type))
        return cls(**values)


def _json_value(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    return value


def _checked(key: str, value: Any, annotation: str) -> Any:
    """``value`` if it has the type ``annotation`` names (as these classes write them); ValueError otherwise."""
    for kind in (k.strip() for k in annotation.split("|")):
        if kind == "None" and value is None:
            return None
        if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
            return value
        if kind == "bool" and isinstance(value, bool):
            return value
        if kind == "str" and isinstance(value, str):
            return value
        if kind == "tuple[str, ...]" and isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value)
        if kind == "Mapping[str, str]" and isinstance(value, dict) and all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            return dict(value)
    raise ValueError(f"{key} is not {annotation}: {value!r}")


@dataclass(frozen=True)
class Position(Document):
    """Where the checkpoint stands before or after a repair."""

    last_batch: int | None
    last_committed_batch: int | None
    next_batch: int | None = field(default=None, metadata=OPTIONAL)
    watermark_ms: int | None = None
    next_state_version: int | None = field(default=None, metadata=OPTIONAL)
    """After a rewind: the state version the next batch loads."""
    next_batch_partitions: int | None = field(default=None, metadata=OPTIONAL)
    """After a repartition: the partition count the next batch runs with."""
    schema_locations: tuple[str, ...] | None = field(default=None, metadata=OPTIONAL)
    """Relocate: the old checkpoint locations the operator metadata names."""


class Params(Document):
    """The parameters of one repair's request, as its plan records them."""

    command: ClassVar[str]

    def label(self) -> str:
        """The request in a few words (``wmcheck backups``' target column)."""
        raise NotImplementedError


@dataclass(frozen=True)
class RewindParams(Params):
    command: ClassVar[str] = "rewind"
    batch: int
    keep_next_offsets: bool = False
    keep_source_log: bool = False

    def label(self) -> str:
        return f"batch {self.batch}"


@dataclass(frozen=True)
class WatermarkParams(Params):
    command: ClassVar[str] = "set-watermark"
    watermark_ms: int
    allow_raise: bool = False
    window_ms: int | None = None

    def label(self) -> str:
        return f"watermark {self.watermark_ms}"


@dataclass(frozen=True)
class RelocateParams(Params):
    command: ClassVar[str] = "relocate"
    path_map: Mapping[str, str] | None = field(default=None, metadata=OPTIONAL)

    def label(self) -> str:
        return "this location"


@dataclass(frozen=True)
class RepartitionParams(Params):
    command: ClassVar[str] = "repartition"
    partitions: int | None
    from_: int | None = field(default=None, metadata={"json": "from"})
    """The partition count before."""
    batch: int | None = None
    """The repartition batch Spark writes (None: only the sink log entries of repartitions Spark made)."""

    def label(self) -> str:
        return f"{self.from_} -> {self.partitions} partitions (batch {self.batch})"


@dataclass(frozen=True)
class ResetParams(Params):
    command: ClassVar[str] = "reset-offsets"
    source_id: str
    offsets: str
    """The new offsets of the partitions reset, as Spark's Kafka offsets JSON ({topic: {partition: offset}})."""
    batch: int
    """The batch written, whose end offsets the next batch starts from."""

    def label(self) -> str:
        return f"source {self.source_id} to {self.offsets} (batch {self.batch})"


PARAMS: Mapping[str, type[Params]] = {p.command: p for p in (RewindParams, WatermarkParams, RelocateParams,
                                                             RepartitionParams, ResetParams)}
"""Each command's parameters class."""


def params_from_json(command: str, obj: Any) -> Params:
    """The parameters of a ``command`` plan from their JSON form; ValueError for an unknown command or a bad field."""
    kind = PARAMS.get(command)
    if kind is None:
        raise ValueError(f"unknown command {command!r}")
    return kind.from_json(obj)
