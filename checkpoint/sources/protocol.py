"""What every kind of streaming source tells: :class:`SourceKind`, the one protocol of :mod:`.file`, :mod:`.kafka`,
:mod:`.delta` and :mod:`.other`, listed in :mod:`.registry`; and what one source read in one batch (:class:`SourceInput`).

A kind recognises its offsets in ``offsets/N`` by their shape and describes them (show, batches), says what a batch read
(``replay --plan``), what a rewind moves back for it, and how the plan's views show its input. The defaults are those of
a source wmcheck knows nothing more of than its offset."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from wmcheck.checkpoint.logs.textlog import dump_json
from wmcheck.checkpoint.records import dataclass

if TYPE_CHECKING:
    from typing import Protocol, TypeVar

    from wmcheck.checkpoint.fs import FileSystem
    from wmcheck.checkpoint.logs.file_logs import FileLog
    from wmcheck.checkpoint.logs.metadata_log import MetadataLog
    from wmcheck.checkpoint.logs.offsets import OffsetSeq
    from wmcheck.checkpoint.logs.source_offsets import SourceOffset

    from .delta_files import DeltaSourceLog

    T = TypeVar("T")

    class CheckpointReads(Protocol):
        """What a source kind reads of the checkpoint (:class:`~wmcheck.checkpoint.model.Checkpoint`, a layer above)."""

        @property
        def fs(self) -> FileSystem: ...

        @property
        def source_dirs(self) -> list[int]: ...

        @property
        def last_readable_batch(self) -> int | None: ...

        def metadata_log(self, directory: str) -> MetadataLog: ...

        def file_log(self, path: str) -> FileLog: ...

        def parse(self, path: str, parser: Callable[[bytes, str], T]) -> T: ...

        def offsets(self, batch: int) -> OffsetSeq: ...


@dataclass(frozen=True)
class InputFile:
    """One file a batch read: ``path`` as the source log records it, ``location`` as handed to Spark."""

    path: str
    location: str
    log_batch: int
    size: int | None = None
    exists: bool | None = None
    partition: Mapping[str, str | None] = field(default_factory=dict)
    """A Delta source's file of a partitioned table: its partition values as the log writes them (the file holds
    no partition column); else empty."""


@dataclass(frozen=True)
class SourceInput:
    """What one source contributed to one batch: the offset range and what it resolves to."""

    source_id: str
    kind: str
    start: SourceOffset | None
    end: SourceOffset
    files: tuple[InputFile, ...] = ()
    log_batches: tuple[int, ...] = ()
    starting_offsets: dict[str, dict[str, int]] | None = None
    ending_offsets: dict[str, dict[str, int]] | None = None
    records: int | None = None
    replayable: bool = True
    note: str | None = None
    table_schema: str | None = None
    """A Delta source's table schema (``metaData.schemaString``; None: not read), which types its partition values."""

    @property
    def missing(self) -> list[InputFile]:
        return [f for f in self.files if f.exists is False]

    @property
    def total_bytes(self) -> int | None:
        """The bytes of the files read (None unless every file's size is known)."""
        sizes = [f.size for f in self.files if f.size is not None]
        return sum(sizes) if len(sizes) == len(self.files) else None

    @property
    def starting_offsets_json(self) -> str | None:
        """A Kafka source's start as Spark's ``startingOffsets`` option takes it."""
        return dump_json(self.starting_offsets) if self.starting_offsets else None

    @property
    def ending_offsets_json(self) -> str | None:
        return dump_json(self.ending_offsets) if self.ending_offsets is not None else None

    @property
    def start_version(self) -> dict[str, Any] | None:
        """A Delta source's start position (reservoir version, index)."""
        return self.start.source.version(self.start) if self.start is not None else None

    @property
    def end_version(self) -> dict[str, Any] | None:
        return self.end.source.version(self.end)


@dataclass(frozen=True)
class InputRequest:
    """How a batch's input is looked up: logged paths mapped to where the files are now, their sizes asked or not (with
    the file system's options), and the Delta source's table, whose log gives a Delta source's files."""

    path_map: Mapping[str, str]
    sizes: bool = True
    fs_options: Mapping[str, str] | None = None
    delta_source: DeltaSourceLog | None = None


@dataclass(frozen=True)
class LiveCheck:
    """What ``wmcheck check`` verifies of a kind's offsets against the live system they point into: the codes, the
    system as the note says it, and the option (a library parameter) that names it; without the option a check of a
    checkpoint with such a source says what was not verified (:meth:`note`)."""

    codes: str
    compared: str
    system: str
    option: str
    """The option's placeholder with an example (``arg("bootstrap_server", "HOST:PORT")``)."""

    def note(self) -> str:
        return f"{self.codes} compare {self.compared}: not verified without {self.system} (pass {self.option})"


def article(kind: str) -> str:
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


def not_rebuilt(kind: str, src: SourceOffset, prev: SourceOffset | None, shown: str = "") -> SourceInput:
    """The input of a source whose offsets wmcheck cannot turn into what the batch read."""
    return SourceInput(src.source_id, kind, prev, src, replayable=False,
                       note=f"{article(kind)} offset{shown}: wmcheck cannot rebuild this source's input")


class SourceKind(ABC):
    """One kind of source, as its offsets in ``offsets/N`` show it."""

    name: str
    """The kind as outputs name it (``"kind"`` in JSON)."""
    recognised: bool = True
    """Whether the kind is told by the offset's shape (a source's own JSON may change shape from batch to batch)."""
    file_log_dir: bool = True
    """Whether ``sources/<i>/`` of a source of this kind can be a file-source log (a Kafka source keeps its initial
    offsets there)."""
    restarts_from_offsets: bool = True
    """Whether a rewind moves it back only by its offsets (a file source's log is rewound with it; no offset: nothing)."""
    position: str = "offset"
    """What a rewind's plan calls its position."""
    live: LiveCheck | None = None
    """What ``check`` verifies of its offsets against the live system (the Kafka broker, the Delta table); None: none."""

    @abstractmethod
    def matches(self, src: SourceOffset) -> bool:
        """Whether ``src`` is an offset of this kind (asked in the registry's order)."""

    def resolve(self, ckpt: CheckpointReads, src: SourceOffset) -> SourceKind:
        """The kind of ``src`` in ``ckpt``, where the checkpoint tells more than the offset's shape."""
        return self

    def log_offset(self, src: SourceOffset) -> int | None:
        """The file-source log batch the offset points at."""
        return None

    def kafka_offsets(self, src: SourceOffset) -> dict[str, dict[int, int]] | None:
        """``{topic: {partition: offset}}`` of a Kafka offset."""
        return None

    def version(self, src: SourceOffset) -> dict[str, Any] | None:
        """A table source's position at ``src`` (a Delta source's reservoir version and index)."""
        return None

    def summary(self, src: SourceOffset) -> str:
        """A short human description of the offset."""
        if src.raw is None:
            return "-"
        return src.raw if len(src.raw) <= 60 else src.raw[:57] + "..."

    def location(self, ckpt: CheckpointReads, src: SourceOffset) -> str | None:
        """Where the source reads from, as far as the checkpoint says."""
        return None

    def cannot_read(self, after: SourceOffset) -> bool:
        """Whether this kind's source fails to read ``after`` as its next offset."""
        return False

    def batch_input(self, ckpt: CheckpointReads, batch: int, src: SourceOffset, prev: SourceOffset | None,
                    request: InputRequest) -> SourceInput:
        """What the source read in batch ``batch``, which ended it at ``src`` (``prev``: where the batch before did)."""
        return not_rebuilt(self.name, src, prev)

    def rewind_position(self, src: SourceOffset) -> str:
        """Where a source continues from at offset ``src``."""
        return src.raw or ""

    def rewind_positions(self, old: SourceOffset | None, new: SourceOffset | None
                         ) -> list[tuple[str, str | None, str | None]]:
        """(what, before, after) of each position a rewind moves from ``old`` to ``new``."""
        at = [s.source.rewind_position(s) if s is not None and s.raw is not None else None for s in (old, new)]
        return [(self.position, at[0], at[1])]

    def input_text(self, src: SourceInput) -> str | None:
        """The range a batch read, in one cell."""
        return f"{src.start.raw if src.start else None} -> {src.end.raw}"

    def input_fields(self, src: SourceInput, plain: Callable[[Any], Any]) -> dict[str, Any]:
        """The JSON fields of this kind's input, beyond those of every kind (``plain``: a dataclass as JSON)."""
        return {}

    def input_counts(self, src: SourceInput) -> tuple[int | None, int | None, int | None]:
        """(files, bytes, missing files) the plan's table shows of the input."""
        return None, None, None
