"""The state store layout under ``state/``, built from a file listing (no I/O here).

``state/<op>/<partition>/[<store>/]`` holds the versioned files of :mod:`wmcheck.statestore.formats.registry` and the shared
files their full copies name (RocksDB ``SSTs/``). Batch N reads version N and writes version N+1;
version 0 is the empty state.
"""
from __future__ import annotations

import posixpath
from dataclasses import field
from typing import Callable, Iterable

from wmcheck.checkpoint.errors import CheckpointError
from wmcheck.checkpoint.fs import FileInfo
from wmcheck.checkpoint.layout import DEFAULT_STORE, STATE
from wmcheck.checkpoint.numbers import is_number
from wmcheck.checkpoint.records import dataclass
from wmcheck.statestore.formats.registry import (
    BASE_KINDS,
    BY_KIND,
    INCREMENT_KINDS,
    SHARED_DIRS,
    Kind,
    Provider,
    StateFormat,
    provider_of,
    version_file,
)


@dataclass(frozen=True)
class StateFile:
    """One versioned state file."""

    path: str
    version: int
    kind: Kind
    unique_id: str | None
    size: int
    mtime_ms: int

    @property
    def format(self) -> StateFormat:
        return BY_KIND[self.kind]


@dataclass(frozen=True)
class StorePartition:
    """The files of one store in one partition."""

    operator_id: int
    partition: int
    store: str
    directory: str
    files: tuple[StateFile, ...]
    sst_files: tuple[FileInfo, ...] = ()
    other_files: tuple[FileInfo, ...] = ()
    named_dirs: tuple[str, ...] = ()
    """Directories named as a state file is (``13.snapshot/``: a copy made into a directory)."""

    @property
    def versions(self) -> list[int]:
        return sorted({f.version for f in self.files})

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files) + sum(f.size for f in self.sst_files)

    @property
    def provider(self) -> Provider:
        """The provider whose formats the files are (HDFS for a partition without any)."""
        return provider_of({f.kind for f in self.files})

    def count(self, kind: str) -> int:
        return sum(1 for f in self.files if f.kind == kind)

    def can_load(self, version: int, unique_ids: dict[int, str] | None = None) -> bool:
        """Whether ``version`` can be rebuilt: a full copy at or before it, then every increment after.

        ``unique_ids`` (version -> id, checkpoint format v2) restricts each version to its file.
        """
        return self.restore_plan(version, unique_ids)[1] is None

    def restore_plan(self, version: int, unique_ids: dict[int, str] | None = None) -> tuple[list[StateFile], int | None]:
        """The files that rebuild ``version`` (full copy first, then increments) and the first version,
        walking down from ``version``, that has neither (None when ``version`` can be rebuilt)."""
        by_version: dict[int, list[StateFile]] = {}
        for f in self.files:
            if unique_ids is None or f.unique_id is None or unique_ids.get(f.version) in (None, f.unique_id):
                by_version.setdefault(f.version, []).append(f)
        chain: list[StateFile] = []
        v = version
        while v > 0:
            files = by_version.get(v, [])
            base = next((f for f in files if f.kind in BASE_KINDS), None)
            if base:
                return [base, *reversed(chain)], None
            step = next((f for f in files if f.kind in INCREMENT_KINDS), None)
            if step is None:
                return list(reversed(chain)), v
            chain.append(step)
            v -= 1
        return list(reversed(chain)), None

    def newest_loadable(self, version: int, unique_ids: dict[int, str] | None = None) -> int:
        """The newest version at or below ``version`` that can be rebuilt (0, the empty state, always can);
        linear in the number of files, whatever the version numbers."""
        kinds: dict[int, set[str]] = {}
        for f in self.files:
            if unique_ids is None or f.unique_id is None or unique_ids.get(f.version) in (None, f.unique_id):
                kinds.setdefault(f.version, set()).add(f.kind)
        best, loadable = 0, {0: True}
        for v in sorted(k for k in kinds if 0 < k <= version):
            ok = bool(kinds[v] & BASE_KINDS) or bool(kinds[v] & INCREMENT_KINDS) and loadable.get(v - 1, False)
            loadable[v] = ok
            if ok:
                best = v
        return best

    def oldest_loadable(self, up_to: int) -> int | None:
        """The smallest version ≤ ``up_to`` that can be rebuilt from the files present."""
        for v in range(0, up_to + 1):
            if self.can_load(v):
                return v
        return None


@dataclass(frozen=True)
class OperatorFiles:
    """Everything under ``state/<op>/``."""

    operator_id: int
    partitions: tuple[StorePartition, ...]
    metadata_files: tuple[FileInfo, ...] = ()
    schema_files: tuple[FileInfo, ...] = ()

    @property
    def stores(self) -> list[str]:
        return sorted({p.store for p in self.partitions}, key=lambda s: (s != DEFAULT_STORE, s))

    @property
    def partition_ids(self) -> list[int]:
        return sorted({p.partition for p in self.partitions})


def holding(partitions: Iterable[StorePartition], version: int) -> int | None:
    """How many partitions hold a file of state ``version``, when those are exactly partitions ``0..n-1`` (every
    commit writes one in each partition it runs); None for another pattern or none."""
    found = {p.partition for p in partitions if any(f.version == version for f in p.files)}
    return len(found) if found and found == set(range(len(found))) else None


@dataclass(frozen=True)
class StateLayout:
    """All operators, plus files that match no known pattern."""

    operators: tuple[OperatorFiles, ...]
    temp_files: tuple[FileInfo, ...] = ()
    crc_files: tuple[FileInfo, ...] = field(default=())
    unknown_files: tuple[FileInfo, ...] = ()
    unreadable: tuple[CheckpointError, ...] = ()
    """Why directories below ``state/`` could not be listed (permissions): what is in them is missing above, so
    what reads state (``wmcheck state``, ``check``) reports these instead; the logs are read without them."""


def is_temp(name: str) -> bool:
    """Leftovers of an interrupted atomic write (``.name.<uuid>.tmp``, ``.tmp`` in general)."""
    return name.endswith(".tmp") or ".tmp." in name


def is_crc(name: str) -> bool:
    """A checksum sidecar: Hadoop's ``.name.crc`` or Spark's ``name.crc``."""
    return name.endswith(".crc")


def _named_dir(groups: dict[tuple[int, int, str], dict[str, list]], parts: list[str], prefix: str) -> None:
    """Record a directory of a store partition (``op/partition[/store]/name``) named as a state file is."""
    if len(parts) not in (3, 4) or not all(is_number(p) for p in parts[:2]) or not version_file(parts[-1]):
        return
    if len(parts) == 4 and (parts[2] in SHARED_DIRS or parts[2] == "_metadata" or version_file(parts[2])):
        return
    store = parts[2] if len(parts) == 4 else DEFAULT_STORE
    directory = "/".join([prefix, *parts[:-1]])
    bucket = groups.setdefault((int(parts[0]), int(parts[1]), store),
                               {"files": [], "sst": [], "other": [], "dir": [directory], "named": []})
    bucket["named"].append(f"{directory}/{parts[-1]}")


def scan_state(files: Iterable[FileInfo], prefix: str = "state") -> StateLayout:
    """Classify a recursive listing of ``state/`` (paths relative to the checkpoint; directories in it are looked
    at only for :attr:`StorePartition.named_dirs`)."""
    groups: dict[tuple[int, int, str], dict[str, list]] = {}
    op_meta: dict[int, list[FileInfo]] = {}
    op_schema: dict[int, list[FileInfo]] = {}
    temp, crc, unknown = [], [], []
    for info in files:
        parts = info.path.split("/")
        if parts[0] == prefix:
            parts = parts[1:]
        name = parts[-1]
        if info.is_dir:
            _named_dir(groups, parts, prefix)
            continue
        if is_temp(name):
            temp.append(info)
            continue
        if is_crc(name):
            crc.append(info)
            continue
        if not parts or not is_number(parts[0]) or len(parts) < 3:
            unknown.append(info)
            continue
        op = int(parts[0])
        if parts[1] == "_metadata":
            op_meta.setdefault(op, []).append(info)
            continue
        if parts[1] == "_stateSchema":
            op_schema.setdefault(op, []).append(info)
            continue
        if not is_number(parts[1]):
            unknown.append(info)
            continue
        partition = int(parts[1])
        rest = parts[2:]
        store = DEFAULT_STORE
        if len(rest) >= 2 and rest[0] not in SHARED_DIRS and rest[0] != "_metadata" and not version_file(rest[0]):
            store, rest = rest[0], rest[1:]
        directory = "/".join([prefix, *parts[: len(parts) - len(rest)]])
        bucket = groups.setdefault((op, partition, store), {"files": [], "sst": [], "other": [], "dir": [directory],
                                                            "named": []})
        match = version_file(rest[-1]) if len(rest) == 1 else None
        if len(rest) >= 2 and version_file(rest[0]):
            bucket["named"].append(f"{directory}/{rest[0]}")  # the files in it: never listed by Spark's loader
        elif match:
            fmt, version, unique_id = match
            bucket["files"].append(StateFile(info.path, version, fmt.kind, unique_id, info.size, info.mtime_ms))
        elif rest[0] in SHARED_DIRS:
            bucket["sst"].append(info)
        else:
            bucket["other"].append(info)
    operators = []
    for op in sorted({k[0] for k in groups} | set(op_meta) | set(op_schema)):
        parts_ = tuple(
            StorePartition(
                op, part, store, b["dir"][0],
                tuple(sorted(b["files"], key=lambda f: (f.version, f.kind))),
                tuple(b["sst"]), tuple(b["other"]), tuple(sorted(set(b["named"]))),
            )
            for (o, part, store), b in sorted(groups.items())
            if o == op
        )
        operators.append(OperatorFiles(op, parts_, tuple(op_meta.get(op, ())), tuple(op_schema.get(op, ()))))
    return StateLayout(tuple(operators), tuple(temp), tuple(crc), tuple(unknown))


def schema_file_paths(layout: StateLayout, exists: Callable[[str], bool], operator_id: int, store: str) -> list[str]:
    """Schema files of a store, newest first: v3 ``_stateSchema/<store>/<batch>_<id>``, then v1/v2
    ``0/[<store>/]_metadata/schema`` where ``exists``."""
    op = next((o for o in layout.operators if o.operator_id == operator_id), None)
    v3 = [f for f in (op.schema_files if op else ()) if posixpath.basename(posixpath.dirname(f.path)) == store
          and is_number(f.name.split("_")[0])]
    v3.sort(key=lambda f: int(f.name.split("_")[0]), reverse=True)
    legacy = f"{STATE}/{operator_id}/0/" + ("" if store == DEFAULT_STORE else f"{store}/") + "_metadata/schema"
    return [f.path for f in v3] + ([legacy] if exists(legacy) else [])


def stray_schema_paths(layout: StateLayout, operator_id: int, store: str) -> list[str]:
    """v1/v2 schema files of a store in other partitions' directories than 0's, where Spark neither reads nor
    writes one (partition directories moved or swapped), by partition."""
    op = next((o for o in layout.operators if o.operator_id == operator_id), None)
    parts = sorted((p.partition, f.path) for p in (op.partitions if op else ()) if p.store == store and p.partition
                   for f in p.other_files if f.path == f"{p.directory}/_metadata/schema")
    return [path for _, path in parts]
