"""A metadata log directory (``offsets/``, ``commits/``, ``sources/<i>/``, a sink's ``_spark_metadata/``) as
Spark's ``HDFSMetadataLog`` and ``CompactibleFileStreamLog`` see it, built from one directory listing:
batch id <-> file (``N`` or ``N.compact``), the latest batch, the compact files, and which file holds a batch."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterable, Mapping

from .fs import FileInfo, FileSystem
from .layout import COMPACT_SUFFIX, CRC_SUFFIX, log_file_batch


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

    @property
    def has_crc(self) -> bool:
        """Whether the directory holds checksum files (so rewritten files get one too)."""
        return any(name.endswith(CRC_SUFFIX) for name in self.names)
