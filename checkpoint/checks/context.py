"""What the checks look at, read once: listings, every log file (checksums verified as it is read),
parsed through the model's cache, and the files that failed to parse."""
from __future__ import annotations

import posixpath
from datetime import timezone, tzinfo
from typing import Any, Callable, Iterable

from ..checksums import sidecar_target, verify_hadoop_crc, verify_spark_checksum
from ..commits import CommitEntry
from ..errors import CheckpointError
from ..file_logs import FileLog, log_file_batch, parse_file_log
from ..fs import FileSystem
from ..model import COMMITS, OFFSETS, SOURCES, Checkpoint, Operator
from ..offsets import OffsetSeq
from ..state_schema import StateSchemaFile, parse_state_schema
from ..state_files import DEFAULT_STORE, StateFile, StateLayout, StorePartition, is_crc, is_temp
from .registry import Issue

SINK_LOG = "_spark_metadata"


def sidecars(path: str) -> tuple[str, str]:
    """The Hadoop (``.name.crc``) and Spark (``name.crc``) checksum files of ``path``."""
    folder, name = posixpath.split(path)
    return posixpath.join(folder, f".{name}.crc"), posixpath.join(folder, f"{name}.crc")


def crc_target(path: str) -> str:
    """The file a checksum sidecar covers."""
    folder, name = posixpath.split(path)
    name = name[:-len(".crc")]
    return posixpath.join(folder, name[1:] if name.startswith(".") else name)


def error_text(exc: CheckpointError) -> str:
    """A parser's message without the path (findings carry it separately)."""
    where = f"line {exc.line}: " if exc.line is not None else f"byte {exc.byte}: " if exc.byte is not None else ""
    return f"{where}{exc.message}" + (f" (hint: {exc.hint})" if exc.hint else "")


def with_conf(seq: OffsetSeq) -> OffsetSeq:
    """``seq`` once its metadata line parsed in full (the parser reads the conf lazily)."""
    if seq.metadata is not None:
        seq.metadata.conf  # noqa: B018 - raises MalformedFileError for a broken metadata line
    return seq


def schema_paths(layout: StateLayout) -> list[str]:
    """State schema files: ``_stateSchema/`` (v3) and ``<partition>/[<store>/]_metadata/schema`` (v1, v2)."""
    out = [f.path for op in layout.operators for f in op.schema_files]
    for op in layout.operators:
        for part in op.partitions:
            out += [f.path for f in part.other_files if f.path.endswith("/_metadata/schema")]
    return out


def state_paths(layout: StateLayout) -> Iterable[str]:
    """Every file path under ``state/`` (the layout classifies each one exactly once)."""
    for op in layout.operators:
        yield from (f.path for f in (*op.metadata_files, *op.schema_files))
        for part in op.partitions:
            yield from (f.path for f in (*part.files, *part.sst_files, *part.other_files))
    yield from (f.path for f in (*layout.temp_files, *layout.crc_files, *layout.unknown_files))


class Tree:
    """The files of one root (the checkpoint or the file sink) and how their paths are shown."""

    def __init__(self, fs: FileSystem, shown: Callable[[str], str]) -> None:
        self.fs = fs
        self.shown = shown
        self.entries: set[str] = set()
        self.mismatches: list[Issue] = []

    def list(self, folder: str) -> list[str]:
        """Names in ``folder`` (remembered in ``entries``, so sidecar lookups need no I/O)."""
        names = self.fs.names(folder)
        self.entries.update(posixpath.join(folder, n) if folder else n for n in names)
        return names

    def read_verified(self, paths: Iterable[str]) -> dict[str, bytes]:
        """Read ``paths`` and their checksum sidecars in one round; record files their sidecars do not match."""
        paths = list(paths)
        extra = [s for p in paths for s in sidecars(p) if s in self.entries]
        data = self.fs.read_many(paths + extra)
        for path in paths:
            problems = [verify_sidecar(data[path], s, data.pop(s)) for s in sidecars(path) if s in data]
            problems = [p for p in problems if p]
            if problems:
                self.mismatches.append((self.shown(path), "; ".join(problems) + (
                    ": Spark fails to read it (ChecksumException). Restore the file from a backup (wmcheck undo), "
                    "or delete the checksum file if the file was changed on purpose"
                )))
        return data


def verify_sidecar(data: bytes, sidecar: str, checksum: bytes) -> str | None:
    """Why ``checksum`` (the bytes of a Hadoop or Spark checksum file) does not match ``data``; None when it does."""
    verify = verify_hadoop_crc if sidecar_target(sidecar)[0] == "hadoop" else verify_spark_checksum
    name = posixpath.basename(sidecar)
    try:
        result = verify(checksum, data, sidecar)
    except CheckpointError as exc:
        return f"its checksum file {name} cannot be read ({error_text(exc)})"
    return None if result else f"does not match its checksum file {name} ({result.problem})"


class Context:
    """One checkpoint (and optionally its file sink) as the checks see it."""

    def __init__(self, ckpt: Checkpoint, sink: FileSystem | None = None, sink_shown: str = "", tz: tzinfo = timezone.utc) -> None:
        self.ckpt = ckpt
        self.tz = tz
        self.tree = Tree(ckpt.fs, lambda p: p)
        self.sink = Tree(sink, lambda p: posixpath.join(sink_shown, p)) if sink is not None else None
        self.failures: dict[str, CheckpointError] = {}
        self.offsets: dict[int, OffsetSeq] = {}
        self.commits: dict[int, CommitEntry] = {}
        self.source_logs: dict[int, dict[str, FileLog]] = {}
        self.sink_logs: dict[str, FileLog] = {}
        self.memo: dict[str, Any] = {}
        self._load()

    # -- loading -------------------------------------------------------------------------------

    def _attempt(self, path: str, parse: Callable[[], object]) -> object | None:
        try:
            return parse()
        except CheckpointError as exc:
            self.failures[path] = exc
            return None

    def _load(self) -> None:
        ckpt, tree = self.ckpt, self.tree
        root = tree.list("")
        offsets = [n for n in tree.list(OFFSETS) if n.isdigit()]
        commits = [n for n in tree.list(COMMITS) if n.isdigit()]
        sources = {i: [n for n in tree.list(f"{SOURCES}/{i}") if log_file_batch(n)] for i in ckpt.source_dirs}
        tree.entries.update(state_paths(ckpt.state_layout))
        op_meta = [f.path for op in ckpt.state_layout.operators for f in op.metadata_files]
        schemas = schema_paths(ckpt.state_layout)
        paths = (["metadata"] if "metadata" in root else []) + [f"{OFFSETS}/{n}" for n in offsets]
        paths += [f"{COMMITS}/{n}" for n in commits] + op_meta + schemas
        paths += [f"{SOURCES}/{i}/{n}" for i, names in sources.items() for n in names]
        ckpt.remember(tree.read_verified(paths))
        self.query_metadata = self._attempt("metadata", lambda: ckpt.query_metadata) if "metadata" in root else None
        for batch in ckpt.offset_ids:
            seq = self._attempt(f"{OFFSETS}/{batch}", lambda: with_conf(ckpt.offsets(batch)))
            if seq is not None:
                self.offsets[batch] = seq
        for batch in ckpt.commit_ids:
            entry = self._attempt(f"{COMMITS}/{batch}", lambda: ckpt.commit(batch))
            if entry is not None:
                self.commits[batch] = entry
        for i, names in sources.items():
            logs = {f"{SOURCES}/{i}/{n}": self._attempt(f"{SOURCES}/{i}/{n}", lambda p=f"{SOURCES}/{i}/{n}": ckpt.source_log(p)) for n in names}
            self.source_logs[i] = {p: log for p, log in logs.items() if log is not None}
        parsed = {p: self._attempt(p, lambda p=p: ckpt.parse(p, parse_state_schema)) for p in schemas}
        self.schemas: dict[str, StateSchemaFile] = {p: v for p, v in parsed.items() if v is not None}
        self.operators = self._operators()
        if self.sink is not None:
            self._load_sink()

    def _load_sink(self) -> None:
        sink = self.sink
        names = [n for n in sink.list(SINK_LOG) if log_file_batch(n)]
        data = sink.read_verified(f"{SINK_LOG}/{n}" for n in names)
        for path, raw in data.items():
            shown = sink.shown(path)
            log = self._attempt(shown, lambda: parse_file_log(raw, shown))
            if log is not None:
                self.sink_logs[path] = log

    # -- derived facts -----------------------------------------------------------------------------

    @property
    def trees(self) -> list[Tree]:
        """The checkpoint, and the file sink when given."""
        return [self.tree] + ([self.sink] if self.sink is not None else [])

    def _operators(self) -> list[Operator]:
        """The stateful operators; without their metadata when it does not parse (reported as WM001)."""
        try:
            return self.ckpt.operators
        except CheckpointError as exc:
            self.failures.setdefault(exc.path or "state", exc)
        return [
            Operator(op.operator_id, None, tuple(op.stores), None, op.partitions, None)
            for op in self.ckpt.state_layout.operators
        ]

    @property
    def unique_ids_known(self) -> bool:
        """Whether every commit parsed, so checkpoint v2 unique ids can be trusted."""
        return not any(p.startswith(f"{COMMITS}/") for p in self.failures)

    def conf(self, key: str) -> str | None:
        """A pinned conf as the last parsed offsets file records it."""
        for batch in sorted(self.offsets, reverse=True):
            meta = self.offsets[batch].metadata
            if meta is not None:
                value = meta.conf.get(key)
                return None if value is None else str(value)
        return None

    def state_dir(self, op: Operator, partition: int, store: str) -> str:
        """``state/<op>/<partition>[/<store>]``, as Spark lays it out."""
        base = f"state/{op.operator_id}/{partition}"
        return base if store == DEFAULT_STORE else f"{base}/{store}"

    def verify_state_files(self, files: list[StateFile]) -> None:
        """Verify the checksum sidecars of state files Spark reads (their bytes are not kept)."""
        self.tree.read_verified(f.path for f in files if any(s in self.tree.entries for s in sidecars(f.path)))
