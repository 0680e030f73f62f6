"""What a backup holds, recorded when it is made: every saved entry's kind, size and SHA-256.

An entry is a file or a symbolic link, taken as it is (a link is never followed: its target is its
content). ``undo`` restores an entry only when what the backup holds now is exactly what was recorded
(:mod:`.trust`): a file swapped, a link put in its place or a hard link added since is refused.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import field
from functools import cached_property
from typing import Any, Literal

from wmcheck.checkpoint.records import dataclass

from ..errors import CheckpointError, MalformedFileError
from ..fs import FileSystem
from .plan import Root

EntryKind = Literal["file", "link"]
ENTRIES = "entries.json"
"""The record, next to the backup's manifest (which holds its hash)."""
ENTRIES_FORMAT = "wmcheck-backup-entries"
FS_IOC_GETFLAGS = 0x80086601
LOCKED_FLAGS = {0x10: "immutable (chattr +i)", 0x20: "append-only (chattr +a)"}
CHUNK = 1 << 20


@dataclass(frozen=True)
class Entry:
    """One file or link as recorded (or as found now): ``sha256`` of a file's bytes or of a link's target."""

    root: Root
    path: str
    kind: EntryKind
    size: int
    sha256: str
    nlink: int = 1
    """Names the file had (hard links): a backup file with more names now is refused."""
    locked: str | None = field(default=None, compare=False)
    """Why the file cannot be moved or replaced (``immutable``, ``append-only``), as found; not recorded."""

    def to_json(self) -> dict[str, Any]:
        return {"root": self.root, "path": self.path, "kind": self.kind, "size": self.size, "sha256": self.sha256,
                "nlink": self.nlink}

    def same(self, other: Entry | None) -> bool:
        """Whether ``other`` holds the same content (kind, size, hash), wherever it is."""
        return other is not None and (self.kind, self.size, self.sha256) == (other.kind, other.size, other.sha256)


def read_entry(fs: FileSystem, root: Root, path: str, content: bool = True) -> Entry | None:
    """``path`` of ``fs`` as an entry (None when absent); CheckpointError for a directory or a special file.
    ``content=False`` leaves the hash of a file empty (its size, kind and flags only)."""
    real = fs.os_path(path)
    if real is None:
        info = fs.entry(path)
        if info is None:
            return None
        if info.is_dir:
            raise _not_a_file(path, True)
        return Entry(root, path, "file", info.size, hashlib.sha256(fs.read(path)).hexdigest() if content else "")
    try:  # one open, not following a link (ELOOP then), for the kind, size, flags and bytes
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if os.path.islink(real):
            target = fs.read_link(path).encode("utf-8", "surrogateescape")
            return Entry(root, path, "link", len(target), hashlib.sha256(target).hexdigest())
        raise CheckpointError(f"cannot read: {exc.strerror}", path=path) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _not_a_file(path, stat.S_ISDIR(st.st_mode))
        digest = _hash(fd, st.st_size) if content else ""
        return Entry(root, path, "file", st.st_size, digest, st.st_nlink, locked_flags(fd))
    except OSError as exc:
        raise CheckpointError(f"cannot read: {exc.strerror}", path=path) from None
    finally:
        os.close(fd)


def _not_a_file(path: str, is_dir: bool) -> CheckpointError:
    return CheckpointError(f"expected a file, found {'a directory' if is_dir else 'a special file'}", path=path)


def _hash(fd: int, size: int) -> str:
    """SHA-256 of the open file (of ``size`` bytes, as its fstat said: a small file takes one read)."""
    digest = hashlib.sha256()
    want = size + 1 if size < CHUNK else CHUNK
    while chunk := os.read(fd, want):
        digest.update(chunk)
        if len(chunk) < want and want != CHUNK:
            break
        want = CHUNK
    return digest.hexdigest()


def locked_flags(fd: int) -> str | None:
    """Why the open file or directory cannot be renamed, replaced or (a directory) changed: its immutable or
    append-only attribute (None when neither, or the file system keeps no such attributes)."""
    buf = bytearray(8)
    try:
        fcntl.ioctl(fd, FS_IOC_GETFLAGS, buf)
    except OSError:
        return None
    flags = int.from_bytes(buf[:4], "little")
    return next((what for bit, what in LOCKED_FLAGS.items() if flags & bit), None)


@dataclass(frozen=True)
class EntryRecord:
    """Every entry a backup saved, by (root, path)."""

    entries: tuple[Entry, ...]

    def get(self, root: str, path: str) -> Entry | None:
        return self._index.get((root, path))

    @cached_property
    def _index(self) -> Mapping[tuple[str, str], Entry]:
        return {(e.root, e.path): e for e in self.entries}

    def to_json(self) -> dict[str, Any]:
        return {"format": ENTRIES_FORMAT, "entries": [e.to_json() for e in self.entries]}

    @classmethod
    def of(cls, entries: Iterable[Entry]) -> EntryRecord:
        return cls(tuple(entries))


def record_from_json(obj: Any, path: str) -> EntryRecord:
    """The record as written by :meth:`EntryRecord.to_json`; MalformedFileError otherwise."""
    try:
        if obj.get("format") != ENTRIES_FORMAT:
            raise ValueError(f'"format" is not "{ENTRIES_FORMAT}"')
        out = []
        for e in obj["entries"]:
            kind, root = e["kind"], e["root"]
            if kind not in ("file", "link") or root not in ("checkpoint", "sink"):
                raise ValueError(f"kind {kind!r} or root {root!r}")
            out.append(Entry(root, str(e["path"]), kind, int(e["size"]), str(e["sha256"]), int(e.get("nlink", 1))))
        return EntryRecord(tuple(out))
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise MalformedFileError(f"expected the record of a wmcheck backup's files ({exc})", path=path,
                                 hint="it was edited or truncated; the backup's files are still there") from None
