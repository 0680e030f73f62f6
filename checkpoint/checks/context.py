"""What the checks look at, read once: listings, every log file parsed through the model's cache (with the
checksums of the files Spark reads on restart verified on the way), and the files that failed to parse."""
from __future__ import annotations

import posixpath
from datetime import timezone, tzinfo
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, TypeVar

from wmcheck.checkpoint.logs.commits import CommitEntry
from wmcheck.checkpoint.logs.file_logs import FileLog, parse_file_log
from wmcheck.checkpoint.logs.metadata_log import COMMIT_LOG, FILE_SOURCE_LOG, OFFSET_LOG, LogKind, MetadataLog
from wmcheck.checkpoint.logs.offsets import FAST_METADATA, BatchMetadata, OffsetSeq
from wmcheck.checkpoint.watermarks.progress import QueryProgress
from wmcheck.statestore.formats.files import StateFile, StateLayout
from wmcheck.statestore.formats.schema import StateSchemaFile, parse_state_schema

from ..checksums import verify_hadoop_crc, verify_spark_checksum
from ..errors import CheckpointError
from ..fs import FileSystem
from ..layout import COMMITS, OFFSETS, SINK_LOG, sidecars
from ..model import Checkpoint, Operator
from ..repair.requests import RewindRequest

if TYPE_CHECKING:  # what a check run is given for a Delta table or a broker: imported by who gives it
    from ..sinks.delta import DeltaTableLog
    from ..sources.delta_table import DeltaSourceTable
    from ..sources.kafka_topics import KafkaTopics

T = TypeVar("T")
V1_METADATA = "/_metadata/metadata"
"""How a v1 operator metadata file's path ends (``state/<op>/_metadata/metadata``)."""
STALL_BATCHES = 5
"""Data batches a stalled watermark may span before WM038 warns (``--stall-batches``)."""


def error_text(exc: CheckpointError, hint: bool = True) -> str:
    """A parser's message without the path (findings carry it separately); without its ``hint`` where the finding
    says what the file's position means."""
    where = f"line {exc.line}: " if exc.line is not None else f"byte {exc.byte}: " if exc.byte is not None else ""
    return f"{where}{exc.message}" + (f" (hint: {exc.hint})" if exc.hint and hint else "")


def conf_of(meta: BatchMetadata | None, parsed: dict[str, Mapping[str, Any]]) -> Mapping[str, Any]:
    """The pinned conf of a batch; metadata lines that differ only in watermark and timestamp share one parse
    (which also validates the rest of the line, since the offsets parser reads it lazily)."""
    if meta is None:
        return {}
    head = FAST_METADATA.match(meta.text)
    key = meta.text[head.end():] if head else meta.text
    if key not in parsed:
        parsed[key] = meta.conf
    return parsed[key]


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
            yield from (f.path for f in part.files)
            yield from (f.path for f in (*part.sst_files, *part.other_files))
    for files in (layout.temp_files, layout.crc_files, layout.unknown_files):
        yield from (f.path for f in files)


class Tree:
    """The files of one root (the checkpoint or the file sink) and how their paths are shown."""

    def __init__(self, fs: FileSystem, shown: Callable[[str], str]) -> None:
        self.fs = fs
        self.shown = shown
        self.entries: set[str] = set()
        self.logs: dict[str, MetadataLog] = {}
        self.mismatches: dict[str, list[tuple[str, str]]] = {"hadoop": [], "spark": []}

    def names(self, folder: str) -> list[str]:
        """Names in ``folder`` (remembered in ``entries``, so later lookups need no I/O)."""
        names = self.fs.names(folder)
        prefix = f"{folder}/" if folder else ""
        self.entries.update(prefix + n for n in names)
        return names

    def read(self, paths: Iterable[str], verify: Iterable[str] = ()) -> dict[str, bytes]:
        """Read ``paths`` and, in the same round, the checksum sidecars of those in ``verify``; record the files
        whose sidecars do not match."""
        checked = [(p, [(k, s) for k, s in zip(("hadoop", "spark"), sidecars(p)) if s in self.entries]) for p in verify]
        data = self._read_all(list(dict.fromkeys([*paths, *(p for p, _ in checked), *(s for _, f in checked for _, s in f)])))
        for path, found in checked:
            if path not in data:
                continue
            for kind, sidecar in found:
                if sidecar not in data:
                    continue
                problem = verify_sidecar(data[path], kind, sidecar, data.pop(sidecar))
                if problem:
                    self.mismatches[kind].append((self.shown(path), problem))
        return data

    def _read_all(self, paths: list[str]) -> dict[str, bytes]:
        """The files that can be read: one unreadable file (no permission, a directory in its place) is left
        out here and reported by the check that parses it, the others are checked as usual."""
        try:
            return self.fs.read_many(paths)
        except CheckpointError:
            out = {}
            for path in paths:
                try:
                    out[path] = self.fs.read(path)
                except CheckpointError:
                    continue
            return out

    def log(self, folder: str) -> MetadataLog:
        """A file log folder (listed once, through :meth:`names`)."""
        if folder not in self.logs:
            self.logs[folder] = MetadataLog(folder, tuple(self.names(folder)))
        return self.logs[folder]


def verify_sidecar(data: bytes, kind: str, sidecar: str, checksum: bytes) -> str | None:
    """Why ``checksum`` (the bytes of a ``hadoop`` or ``spark`` checksum file) does not match ``data``; None when it does."""
    verify = verify_hadoop_crc if kind == "hadoop" else verify_spark_checksum
    name = posixpath.basename(sidecar)
    try:
        result = verify(checksum, data, sidecar)
    except CheckpointError as exc:
        return f"its checksum file {name} cannot be read ({error_text(exc)})"
    return None if result else f"does not match its checksum file {name} ({result.problem})"


class Context:
    """One checkpoint (and optionally its file sink) as the checks see it."""

    def __init__(self, ckpt: Checkpoint, sink: FileSystem | None = None, sink_shown: str = "", tz: tzinfo = timezone.utc,
                 stall_batches: int = STALL_BATCHES, progress: QueryProgress | None = None, content: bool = True,
                 state_progress: Callable[[int, int], None] | None = None, operator_lag_ms: int | None = None,
                 kafka: KafkaTopics | None = None, delta: DeltaTableLog | None = None, delta_shown: str = "",
                 delta_sources: tuple[DeltaSourceTable, ...] = (), delta_app_id: str | None = None) -> None:
        self.ckpt = ckpt
        self.kafka = kafka
        self.delta_sources = delta_sources
        """The query's Delta source tables now, each matched to its source (``check --delta-source``; empty: not checked)."""
        self.delta = delta
        """The query's Delta sink table, its log read (``check --delta-sink``; None: not checked)."""
        self.delta_shown = delta_shown
        self.delta_app_id = delta_app_id
        """The ``txn`` app id the Delta sink's writer uses (``--delta-txn-app-id``; None: the query id)."""
        """How findings name the table (relative to the checkpoint where it can be)."""
        """The broker the Kafka sources' offsets are compared with (``check --bootstrap-server``; None: not compared)."""
        self.content = content
        """Decode the state files the next batch loads (``check --no-content``: names only)."""
        self.state_progress = state_progress
        """Called with (store partitions verified, total) while state contents are decoded."""
        self.notes: list[str] = []
        """What the checks could not look at (e.g. state contents without the packages to decode them)."""
        self.tz = tz
        self.stall_batches = stall_batches
        self.progress = progress
        self.operator_lag_ms = operator_lag_ms
        """How far an operator's own eviction watermark may lag the global one before WM042 warns (None: the query's
        watermark delay)."""
        self.tree = Tree(ckpt.fs, lambda p: p)
        self.sink = Tree(sink, lambda p: posixpath.join(sink_shown, p)) if sink is not None else None
        self.sink_location = sink.uri() if sink is not None else None
        self.failures: dict[str, CheckpointError] = {}
        self.unread_metadata: dict[str, CheckpointError] = {}
        """v1 operator metadata files that do not parse (Spark skips its operator check then: WM045)."""
        self.offsets: dict[int, OffsetSeq] = {}  # parsed ones, by batch in order (so are confs and commits)
        self.confs: dict[int, Mapping[str, Any]] = {}
        self.commits: dict[int, CommitEntry] = {}
        self._shared: dict[tuple[Any, ...], Any] = {}
        self._load()

    # -- loading -------------------------------------------------------------------------------

    def _attempt(self, path: str, parse: Callable[..., T], *args: Any) -> T | None:
        """``parse(*args)``, or None with the failure recorded under ``path``."""
        try:
            return parse(*args)
        except CheckpointError as exc:
            self.failures[path] = exc
            return None

    def _parsed(self, kind: LogKind[T], files: Mapping[int, str]) -> dict[int, T]:
        """A log's files parsed (once, by the checkpoint), those that do not parse recorded as failures."""
        parsed, failed = self.ckpt.parse_log(kind, files)
        self.failures.update(failed)
        return parsed

    def _load(self) -> None:
        """Read every log file once, verifying the checksums of those Spark reads on restart, and parse them."""
        ckpt, tree = self.ckpt, self.tree
        root = tree.names("")
        tree.names(OFFSETS), tree.names(COMMITS)  # their files are known without another listing
        offsets = {b: OFFSET_LOG.path(b) for b in ckpt.offset_ids}
        commits = {b: COMMIT_LOG.path(b) for b in ckpt.commit_ids}
        restart = [offsets[b] for b in ckpt.offset_ids[-2:]] + [commits[b] for b in ckpt.commit_ids[-1:]]
        ckpt.remember(tree.read([*offsets.values(), *commits.values()], restart))  # the offsets say which sources/ are file logs
        sources = [tree.log(FILE_SOURCE_LOG.folder(i)) for i in ckpt.source_dirs]
        layout = ckpt.state_layout
        tree.entries.update(state_paths(layout))
        state_meta = [f.path for op in layout.operators for f in op.metadata_files] + schema_paths(layout)
        restart = (["metadata"] if "metadata" in root else []) + state_meta + [p for log in sources for p in log.restart_files]
        ckpt.remember(tree.read([p for log in sources for p in log.files.values()], restart))
        self.query_metadata = self._attempt("metadata", lambda: ckpt.query_metadata) if "metadata" in root else None
        parsed_confs: dict[str, Mapping[str, Any]] = {}
        for batch, seq in self._parsed(OFFSET_LOG, offsets).items():
            conf = self._attempt(offsets[batch], conf_of, seq.metadata, parsed_confs)
            if conf is not None:
                self.offsets[batch], self.confs[batch] = seq, conf
        self.commits.update(self._parsed(COMMIT_LOG, commits))
        for log in sources:
            self._parsed(FILE_SOURCE_LOG, log.files)
        parsed = {p: self._attempt(p, ckpt.parse, p, parse_state_schema) for p in schema_paths(layout)}
        self.schemas: dict[str, StateSchemaFile] = {p: v for p, v in parsed.items() if v is not None}
        self.operators = self._operators()
        self.sink_logs: dict[str, FileLog] = {}  # the sink log files Spark reads: from the latest compact file on
        self.sink_log_files: dict[str, FileLog] = {}  # every sink log file that parses, by its path in the sink
        if self.sink is not None:
            sink_log = self.sink.log(SINK_LOG)
            read = set(sink_log.restart_files)
            got = self.sink.read([f.path for f in sink_log.log_files], sink_log.restart_files)
            for path in (f.path for f in sink_log.log_files if f.path not in got):  # a directory in its place
                self._attempt(self.sink.shown(path), self.sink.fs.read, path)
            for path, raw in got.items():
                shown = self.sink.shown(path)
                entries = self._attempt(shown, parse_file_log, raw, shown)
                if entries is not None:
                    self.sink_log_files[path] = entries
                    if path in read:
                        self.sink_logs[path] = entries

    # -- derived facts -----------------------------------------------------------------------------

    @property
    def trees(self) -> list[Tree]:
        """The checkpoint, and the file sink when given."""
        return [self.tree] + ([self.sink] if self.sink is not None else [])

    def _operators(self) -> list[Operator]:
        """The stateful operators; without their metadata when it does not parse (reported as WM001, or as WM045 for
        v1 metadata, which Spark reads only for a check it skips when it cannot)."""
        try:
            operators = self.ckpt.operators
        except CheckpointError as exc:
            path = exc.path or "state"
            (self.unread_metadata if path.endswith(V1_METADATA) else self.failures).setdefault(path, exc)
            return [Operator(op.operator_id, None, tuple(op.stores), None, op.partitions, None)
                    for op in self.ckpt.state_layout.operators]
        self.unread_metadata.update(self.ckpt.unread_operator_metadata)  # read without them, as Spark runs them
        return operators

    @property
    def unique_ids_known(self) -> bool:
        """Whether every commit parsed, so checkpoint v2 unique ids can be trusted."""
        return not any(p.startswith(COMMIT_LOG.directory + "/") for p in self.failures)

    def once(self, compute: Callable[..., T], *args: Any) -> T:
        """``compute(self, *args)``, computed once per check run: what several checks share (a typed service function
        with its own name and return type, never a key into a dict of anything)."""
        key = (compute, *args)
        if key not in self._shared:
            self._shared[key] = compute(self, *args)
        value: T = self._shared[key]
        return value

    def conf(self, key: str) -> str | None:
        """A pinned conf as the last parsed offsets file with metadata records it."""
        batch = max((b for b, s in self.offsets.items() if s.metadata is not None), default=None)
        value = None if batch is None else self.confs[batch].get(key)
        return None if value is None else str(value)

    def read_state(self, paths: list[str]) -> dict[str, bytes]:
        """The bytes of state files Spark reads, their checksum sidecars verified in the same round."""
        return self.tree.read(paths, [p for p in paths if any(s in self.tree.entries for s in sidecars(p))])

    def spark_checksum_problem(self, path: str) -> str | None:
        """Why a state file read through :meth:`read_state` does not match its Spark checksum file, if it does not."""
        return self._sidecar_problem(path, "spark")

    def hadoop_checksum_problem(self, path: str) -> str | None:
        """Why a state file read through :meth:`read_state` does not match its Hadoop sidecar, if it does not."""
        return self._sidecar_problem(path, "hadoop")

    def _sidecar_problem(self, path: str, kind: str) -> str | None:
        shown = self.tree.shown(path)
        return next((problem for where, problem in self.tree.mismatches[kind] if where == shown), None)

    def rewind(self, batch: int, delta_sink: str | None = None) -> RewindRequest:
        """The rewind to ``batch``, with the file sink when one is checked (else the sink stays ahead: WM024); with
        ``delta_sink``, the txn app id it is checked by."""
        return RewindRequest(to_batch=batch, file_sink=self.sink_location, delta_sink=delta_sink,
                             delta_txn_app_id=self.delta_app_id if delta_sink is not None else None)

    def verify_state_files(self, files: list[StateFile]) -> None:
        """Verify the checksum sidecars of state files Spark reads (their bytes are not kept)."""
        self.tree.read((), [f.path for f in files if any(s in self.tree.entries for s in sidecars(f.path))])
