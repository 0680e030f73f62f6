"""A repair plan: the exact file changes of a rewind or set-watermark, frozen, and its JSON contract.

A plan is made without changing anything and is applied step by step in list order by
:mod:`.execute`. Every step names one file, relative to one of two roots (``checkpoint`` or the file
``sink``), and says what it expects to find there, so a saved plan can be checked against the
files before it is applied, and a killed run can tell which steps are done:

* ``remove``: the file (``size`` and ``mtime_ms`` as listed) is moved into the backup.
* ``write``: the file (``sha256`` of its current bytes, None when it does not exist yet) gets
  ``data``; with ``crc`` its Hadoop sidecar ``.<name>.crc`` is regenerated (``crc_sha256`` is the
  current sidecar's hash, None when there is none).
"""
from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import field
from typing import TYPE_CHECKING, Any, Literal, Mapping, TypeVar, get_args

from wmcheck.checkpoint.records import dataclass

from ..errors import CheckpointError, MalformedFileError, arg
from ..fs import clean_relative
from ..layout import OWN_DIR, hadoop_sidecar
from ..sinks import SinkEffect
from .plan_params import Params, Position, params_from_json

if TYPE_CHECKING:
    from ..fs import FileSystem

PLAN_FORMAT = "wmcheck-plan"
PLAN_VERSION = 1
Action = Literal["remove", "write"]
Root = Literal["checkpoint", "sink"]
ACTIONS: tuple[Action, ...] = get_args(Action)
ROOTS: tuple[Root, ...] = get_args(Root)
P = TypeVar("P", bound=Params)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Step:
    """One file change; see the module docstring for what each field means per action."""

    action: Action
    root: Root
    path: str
    phase: str
    reason: str
    size: int | None = None
    mtime_ms: int | None = None
    sha256: str | None = None
    data: bytes | None = None
    crc: bool = False
    crc_sha256: str | None = None

    @property
    def new_sha256(self) -> str | None:
        return sha256(self.data) if self.data is not None else None

    @property
    def sidecar(self) -> str:
        return hadoop_sidecar(self.path)

    def key(self) -> tuple:
        """What must match between a saved plan and the files now (data compared by hash)."""
        return (self.action, self.root, self.path, self.size, self.mtime_ms, self.sha256, self.new_sha256,
                self.crc, self.crc_sha256)

    def to_json(self, index: int) -> dict[str, Any]:
        out: dict[str, Any] = {"step": index, "action": self.action, "root": self.root, "path": self.path,
                               "phase": self.phase, "reason": self.reason, "size": self.size}
        if self.action == "remove":
            out["mtime_ms"] = self.mtime_ms
        else:
            out.update(sha256=self.sha256, new_size=len(self.data or b""), new_sha256=self.new_sha256,
                       crc=self.crc, crc_sha256=self.crc_sha256,
                       data_base64=base64.b64encode(self.data or b"").decode("ascii"))
        return out


def rewrite_step(fs: "FileSystem", path: str, data: bytes, phase: str, reason: str, root: Root = "checkpoint") -> Step:
    """A step that gives a file of ``root`` new bytes, regenerating its Hadoop sidecar when it has one."""
    original = fs.read(path)
    crc = fs.info(hadoop_sidecar(path))
    crc_hash = sha256(fs.read(crc.path)) if crc else None
    return Step("write", root, path, phase, reason, len(original), None, sha256(original), data, crc is not None, crc_hash)


@dataclass(frozen=True)
class SourcePosition:
    """Where one source (or one Kafka topic partition) continues from, before and after a repair: ``position``
    names what is counted (``log batch``, ``TOPIC/PARTITION``, ``version``, ``offset``); None: no offset."""

    source_id: str
    kind: str
    position: str
    before: str | None
    after: str | None

    def to_json(self) -> dict[str, Any]:
        return {"source_id": self.source_id, "kind": self.kind, "position": self.position, "before": self.before,
                "after": self.after}


@dataclass(frozen=True)
class SparkWrite:
    """A file the repair's Spark job writes (wmcheck writes none of them): ``path`` may hold a ``*`` where Spark
    picks the name; ``crc``: with its Hadoop checksum ``.NAME.crc``; ``optional``: only where there is something to
    write (a partition's SST files, when it holds rows)."""

    path: str
    phase: str
    reason: str
    crc: bool = True
    optional: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "phase": self.phase, "reason": self.reason, "crc": self.crc,
                "optional": self.optional}

    @classmethod
    def from_json(cls, obj: Any) -> "SparkWrite":
        return cls(str(obj["path"]), str(obj["phase"]), str(obj["reason"]), bool(obj.get("crc", True)),
                   bool(obj.get("optional", False)))


@dataclass(frozen=True)
class Plan:
    """Everything one repair changes, and what the checkpoint looks like before and after."""

    command: str
    checkpoint: str
    file_sink: str | None
    request: Params
    before: Position
    after: Position
    steps: tuple[Step, ...]
    warnings: tuple[str, ...] = ()
    created_ms: int = 0
    notes: tuple[str, ...] = field(default=())
    sources: tuple[SourcePosition, ...] = ()
    """Where each source continues from before and after (a rewind moves them back)."""
    sinks: tuple[SinkEffect, ...] = ()
    """What each sink named (``--delta-sink``) does with the batches the repair makes the query run again."""
    spark_writes: tuple[SparkWrite, ...] = ()
    """What Spark writes before the steps run (``repartition``: its batch L+1)."""

    def count(self, action: Action) -> int:
        """How many steps do ``action``."""
        return sum(1 for s in self.steps if s.action == action)

    def counts(self) -> dict[str, int]:
        return {a: self.count(a) for a in ACTIONS}

    def params(self, kind: type[P]) -> P:
        """The request's parameters, of the class of this plan's command."""
        if not isinstance(self.request, kind):
            raise MalformedFileError(f"a {self.command} plan holds no {kind.command} parameters")
        return self.request

    def same_changes(self, other: "Plan") -> bool:
        """True when ``other`` makes exactly the same changes to exactly the same files."""
        return (self.command, self.request, [s.key() for s in self.steps], [s.restore for s in self.sinks]) == (
            other.command, other.request, [s.key() for s in other.steps], [s.restore for s in other.sinks])

    def to_json(self) -> dict[str, Any]:
        return {
            "format": PLAN_FORMAT,
            "version": PLAN_VERSION,
            "command": self.command,
            "checkpoint": self.checkpoint,
            "file_sink": self.file_sink,
            "request": self.request.to_json(),
            "before": self.before.to_json(),
            "after": self.after.to_json(),
            "counts": self.counts(),
            "warnings": list(self.warnings),
            "notes": list(self.notes),
            "sources": [s.to_json() for s in self.sources],
            "sinks": [s.to_json() for s in self.sinks],
            "spark_writes": [w.to_json() for w in self.spark_writes],
            "created_ms": self.created_ms,
            "steps": [s.to_json(i) for i, s in enumerate(self.steps)],
        }


def dumps(plan: Plan) -> str:
    return json.dumps(plan.to_json(), indent=1, ensure_ascii=False)


def _bad(path: str, what: str) -> MalformedFileError:
    return MalformedFileError(f"not a wmcheck plan: {what}", path=path,
                              hint=f"pass a file written by {arg('plan_out')} (and not edited since)")


def plan_from_json(obj: Any, path: str) -> Plan:
    """Read a plan back from its JSON form (as written by ``--plan-out``), validating every step."""
    if not isinstance(obj, dict) or obj.get("format") != PLAN_FORMAT:
        raise _bad(path, f'expected a JSON object with "format": "{PLAN_FORMAT}"')
    if obj.get("version") != PLAN_VERSION:
        raise _bad(path, f"plan version {obj.get('version')!r} is not {PLAN_VERSION}")
    try:
        steps = tuple(_step_from_json(s, path) for s in obj["steps"])
        command = str(obj["command"])
        return Plan(
            command=command, checkpoint=str(obj["checkpoint"]), file_sink=_optional_text(obj.get("file_sink")),
            request=params_from_json(command, obj["request"]), before=Position.from_json(obj["before"]),
            after=Position.from_json(obj["after"]), steps=steps,
            warnings=tuple(obj.get("warnings", ())), created_ms=int(obj.get("created_ms", 0)),
            notes=tuple(obj.get("notes", ())),
            sources=tuple(SourcePosition(str(s["source_id"]), str(s["kind"]), str(s["position"]), s["before"], s["after"])
                          for s in obj.get("sources", ())),
            sinks=tuple(SinkEffect.from_json(s) for s in obj.get("sinks", ())),
            spark_writes=tuple(SparkWrite.from_json(w) for w in obj.get("spark_writes", ())),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise _bad(path, f"missing or invalid field ({exc})") from None


def _step_from_json(obj: Mapping[str, Any], path: str) -> Step:
    action, root, rel = obj["action"], obj["root"], obj["path"]
    if action not in ACTIONS or root not in ROOTS:
        raise _bad(path, f"step {obj.get('step')}: unknown action {action!r} or root {root!r}")
    if not _plain(rel) or rel.split("/")[0] == OWN_DIR:
        raise _bad(path, f"step {obj.get('step')}: path {rel!r} is not a plain path inside the {root}")
    data = None
    if action == "write":
        data = base64.b64decode(obj["data_base64"], validate=True)
        if sha256(data) != obj["new_sha256"]:
            raise _bad(path, f"step {obj.get('step')}: data does not match new_sha256")
    return Step(action, root, rel, str(obj["phase"]), str(obj["reason"]), obj.get("size"), obj.get("mtime_ms"),
                obj.get("sha256"), data, bool(obj.get("crc", False)), obj.get("crc_sha256"))


def _optional_text(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"expected a location, found {value!r}")


def _plain(path: object) -> bool:
    try:
        return isinstance(path, str) and clean_relative(path) == path != ""
    except CheckpointError:
        return False


def load_plan(text: str, path: str) -> Plan:
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise _bad(path, f"invalid JSON ({exc})") from None
    return plan_from_json(obj, path)
