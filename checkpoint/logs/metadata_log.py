"""A metadata log directory (``offsets/``, ``commits/``, ``sources/<i>/``, a sink's ``_spark_metadata/``) as
Spark's ``HDFSMetadataLog`` and ``CompactibleFileStreamLog`` see it, built from one directory listing:
batch id <-> file (``N`` or ``N.compact``), the latest batch, the compact files, which file holds a batch, the
compact interval Spark derives, and the Hadoop checksum files left without their log file."""
from __future__ import annotations

from dataclasses import field
from functools import cached_property
from typing import Iterable, Mapping, TypeVar

from wmcheck.checkpoint.fs import FileInfo, FileSystem
from wmcheck.checkpoint.layout import COMMITS, COMPACT_SUFFIX, CRC_SUFFIX, OFFSETS, log_file_batch
from wmcheck.checkpoint.logs.commits import CommitEntry, parse_commit
from wmcheck.checkpoint.logs.log_kinds import FILE_SINK_LOG as FILE_SINK_LOG
from wmcheck.checkpoint.logs.log_kinds import FILE_SOURCE_LOG as FILE_SOURCE_LOG
from wmcheck.checkpoint.logs.log_kinds import LogKind
from wmcheck.checkpoint.logs.offsets import OffsetSeq, parse_offsets
from wmcheck.checkpoint.records import dataclass

T = TypeVar("T")

DEFAULT_COMPACT_INTERVAL = 10
"""Spark's default ``spark.sql.streaming.fileSource.log.compactInterval`` (and ``fileSink.log.compactInterval``)."""


def is_compaction_batch(batch: int, interval: int) -> bool:
    """Spark's ``CompactibleFileStreamLog.isCompactionBatch``: batch N is written as ``N.compact`` (holding every
    entry up to N) when ``(N + 1) % interval == 0``."""
    return (batch + 1) % interval == 0


def next_compaction(batch: int, interval: int) -> int:
    """The first batch after ``batch`` that compacts the log."""
    return next(b for b in range(batch + 1, batch + interval + 1) if is_compaction_batch(b, interval))


def derive_interval(latest_compact: int, default: int = DEFAULT_COMPACT_INTERVAL) -> int:
    """Spark's ``CompactibleFileStreamLog.deriveCompactInterval`` when only one compact file exists: the default
    if ``latest_compact + 1`` is a multiple of it, else the smallest divisor of ``latest_compact + 1`` from the
    default on."""
    n = latest_compact + 1
    if n <= default:
        return n
    return next((d for d in range(default, n // 2 + 1) if n % d == 0), n)


OFFSET_LOG: LogKind[OffsetSeq] = LogKind("offsets", OFFSETS, parse_offsets)
COMMIT_LOG: LogKind[CommitEntry] = LogKind("commits", COMMITS, parse_commit)


@dataclass(frozen=True)
class LogFile:
    """One log file: ``N`` or ``N.compact``."""

    batch: int
    compact: bool
    path: str


@dataclass(frozen=True)
class MetadataLog:
    """One log directory as listed; ``infos`` (path -> size and time) when it was listed with them."""

    directory: str
    names: tuple[str, ...]
    infos: Mapping[str, FileInfo] = field(default_factory=dict)

    @classmethod
    def listed(cls, fs: FileSystem, directory: str) -> MetadataLog:
        """List ``directory`` once, with sizes and times (an absent directory is an empty log)."""
        infos = {i.path: i for i in fs.list_dir(directory) if not i.is_dir}
        return cls(directory, tuple(i.name for i in infos.values()), infos)

    @classmethod
    def of_names(cls, directory: str, names: Iterable[str]) -> MetadataLog:
        return cls(directory, tuple(names))

    def path(self, name: str) -> str:
        return f"{self.directory}/{name}" if self.directory else name

    @cached_property
    def log_files(self) -> tuple[LogFile, ...]:
        """Every log file, by batch (``N`` before ``N.compact`` when a directory holds both)."""
        parsed = ((log_file_batch(n), n) for n in self.names)
        return tuple(LogFile(b, c, self.path(n)) for (b, c), n in sorted((p, n) for p, n in parsed if p))

    @cached_property
    def files(self) -> dict[int, str]:
        """Batch id -> the path of its file."""
        return {f.batch: f.path for f in self.log_files}

    @property
    def batch_ids(self) -> list[int]:
        return list(self.files)

    @property
    def latest(self) -> int | None:
        """The latest batch id (what ``getLatest`` returns), None for an empty log."""
        return self.log_files[-1].batch if self.log_files else None

    @cached_property
    def compacts(self) -> list[int]:
        """Batch ids with a compact file, ascending."""
        return sorted({f.batch for f in self.log_files if f.compact})

    @cached_property
    def forms(self) -> dict[int, set[bool]]:
        """Batch id -> which of its files exist: ``True`` for ``N.compact``, ``False`` for ``N``."""
        out: dict[int, set[bool]] = {}
        for f in self.log_files:
            out.setdefault(f.batch, set()).add(f.compact)
        return out

    @property
    def restart_files(self) -> list[str]:
        """The files Spark reads on restart: the latest compact file and every file after it."""
        start = max((i for i, f in enumerate(self.log_files) if f.compact), default=0)
        return [f.path for f in self.log_files[start:]]

    def holder(self, batch: int) -> str | None:
        """The file that holds log batch ``batch``: its own ``N``, else the first compact file at or after it."""
        own = self.files.get(batch)
        if own is not None and not own.endswith(COMPACT_SUFFIX):
            return own
        later = next((c for c in self.compacts if c >= batch), None)
        return None if later is None else self.files[later]

    def info(self, batch: int) -> FileInfo:
        """Size and time of a batch's file (a log made by :meth:`listed`)."""
        return self.infos[self.files[batch]]

    @cached_property
    def interval(self) -> tuple[int, str] | None:
        """The compact interval Spark derives on restart from the compact files present, and how; None without
        compact files."""
        compacts = self.compacts
        if len(compacts) >= 2:
            return compacts[-1] - compacts[-2], f"the distance between {compacts[-2]}.compact and {compacts[-1]}.compact"
        if compacts:
            return (derive_interval(compacts[0]),
                    f"derived from {compacts[0]}.compact with the default interval {DEFAULT_COMPACT_INTERVAL}")
        return None

    def covered(self, batch: int) -> bool:
        """Whether log batch ``batch`` can be read: its own file, or a later compact file holding it."""
        return batch in self.files or any(c >= batch for c in self.compacts)

    def name_of(self, batch: int) -> str:
        """The file Spark writes for log batch ``batch``: ``N.compact`` on a compaction batch of the derived interval
        (Spark's default without compact files), else ``N``."""
        interval = (self.interval or (DEFAULT_COMPACT_INTERVAL, ""))[0]
        return f"{batch}{COMPACT_SUFFIX}" if is_compaction_batch(batch, interval) else str(batch)

    @cached_property
    def orphaned_sidecars(self) -> tuple[tuple[int, str], ...]:
        """(batch, path) of every Hadoop checksum file (``.N.crc``, ``.N.compact.crc``) whose log file is not there:
        Hadoop's checksummed rename refuses it when Spark writes that file again."""
        names = set(self.names)
        out = []
        for name in sorted(self.names):
            target = name[1:-len(CRC_SUFFIX)] if name.startswith(".") and name.endswith(CRC_SUFFIX) else ""
            parsed = log_file_batch(target) if target else None
            if parsed is not None and target not in names:
                out.append((parsed[0], self.path(name)))
        return tuple(out)

    @property
    def has_crc(self) -> bool:
        """Whether the directory holds checksum files (so rewritten files get one too)."""
        return any(name.endswith(CRC_SUFFIX) for name in self.names)
