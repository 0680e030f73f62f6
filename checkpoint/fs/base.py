"""The interface every file system implements: paths relative to a root, POSIX style, never escaping it."""
from __future__ import annotations

import posixpath
from typing import Iterable, Mapping

from wmcheck.checkpoint.records import dataclass

from ..errors import CheckpointError, MissingFileError, UnsupportedError

TEMP_SUFFIX = ".wmcheck.tmp"
"""wmcheck's temp files: ``.<name>.wmcheck.tmp`` next to the file being written."""


NOT_A_FILE = "expected a file, found a directory"
"""The message of the error reading a path that is a directory."""


@dataclass(frozen=True)
class FileInfo:
    """One file or directory, ``path`` relative to the file system's root."""

    path: str
    size: int
    mtime_ms: int
    is_dir: bool = False
    is_link: bool = False
    """A symbolic link (local files): read through when it resolves; repairs refuse to change through one."""
    nlink: int = 1
    """Hard links to the file (from :meth:`FileSystem.entry`; 1 elsewhere)."""
    special: bool = False
    """Neither a regular file, a directory nor a link: a FIFO, socket or device (from :meth:`FileSystem.entry`)."""

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)


def clean_relative(path: str) -> str:
    """Normalise a relative path; reject absolute paths and ``..`` escapes."""
    if path and ".." not in path and "\\" not in path and "//" not in path and path[0] != "/" and path[-1] != "/" and "/./" not in path and not path.startswith("./"):
        return path
    norm = posixpath.normpath(path.replace("\\", "/")) if path else "."
    if norm.startswith("/") or norm == ".." or norm.startswith("../"):
        raise CheckpointError(
            f"path {path!r} escapes the checkpoint",
            hint="wmcheck only touches files inside the checkpoint, the file sink and the backup directory",
        )
    return "" if norm == "." else norm


class FileSystem:
    """The operations wmcheck needs, on paths relative to ``root``."""

    root: str

    def read(self, path: str) -> bytes:
        raise NotImplementedError

    def read_tail(self, path: str, size: int) -> bytes:
        """The last ``size`` bytes of a file (all of it when shorter)."""
        return self.read(path)[-size:]

    def read_head(self, path: str, size: int) -> bytes:
        """The first ``size`` bytes of a file (all of it when shorter)."""
        return self.read(path)[:size]

    def list_dir(self, path: str) -> list[FileInfo]:
        """Immediate children of a directory; ``[]`` when it does not exist."""
        raise NotImplementedError

    def walk(self, path: str, dirs: bool = False, unreadable: list[CheckpointError] | None = None) -> list[FileInfo]:
        """Every file below ``path``, recursively, and with ``dirs`` every directory too; ``[]`` when absent. With
        ``unreadable``, a directory below ``path`` that cannot be listed is skipped, its error appended there (where
        the store tells one directory from another)."""
        raise NotImplementedError

    def names(self, path: str) -> list[str]:
        """Names of a directory's children (cheaper than ``list_dir``); ``[]`` when absent."""
        return [i.name for i in self.list_dir(path)]

    def info(self, path: str) -> FileInfo | None:
        raise NotImplementedError

    def write(self, path: str, data: bytes) -> None:
        """Write ``data`` atomically where the store allows (temp file, then rename)."""
        raise NotImplementedError

    def delete(self, path: str) -> None:
        raise NotImplementedError

    def rename(self, src: str, dst: str) -> None:
        raise NotImplementedError

    def uri(self, path: str = "") -> str:
        """The location of ``path`` as the user (and Spark) would write it."""
        raise NotImplementedError

    def exists(self, path: str) -> bool:
        return self.info(path) is not None

    def read_many(self, paths: Iterable[str]) -> dict[str, bytes]:
        """Read several small files; remote stores use a bounded thread pool."""
        return {p: self.read(p) for p in paths}

    def reach(self, location: str) -> "tuple[FileSystem, str] | None":
        """The top of the store holding the URI ``location`` (a bucket), reached as this file system reaches its
        own (the same options), and ``location``'s path below it; None where it is on a store of another kind, or
        of a kind whose URIs are not resolved here."""
        return None

    def sub(self, path: str) -> "FileSystem":
        """A file system rooted at ``path`` below this one."""
        raise NotImplementedError

    def parent(self) -> "FileSystem | None":
        """A file system rooted at the directory above this one's root; None at the top of its store."""
        return None

    def fetch(self, paths: Mapping[str, str]) -> None:
        """Copy each file of ``paths`` (path -> local file path) to the local file system, for readers that
        open files by name (RocksDB)."""
        for path, local in paths.items():
            with open(local, "wb") as fh:
                fh.write(self.read(path))

    def create_new(self, path: str, data: bytes) -> bool:
        """Create ``path`` holding ``data`` unless it exists (False then); atomic on local disks, a check
        then a write on object stores."""
        if self.exists(path):
            return False
        self.write(path, data)
        return True

    def is_link(self, path: str) -> bool:
        """Whether ``path`` is a symbolic link (stores without links: never)."""
        return False

    def remove_empty_dir(self, path: str) -> None:
        """Remove the directory if it is empty (object stores have no empty directories)."""

    def resolved(self, path: str = "") -> str:
        """``uri(path)`` with symbolic links resolved (where the bytes really are)."""
        return self.uri(path)

    # -- entries as they are, links not followed (what repairs move, back up and restore) --------

    def os_path(self, path: str = "") -> str | None:
        """The path the operating system takes for ``path`` on a local disk; None for other stores."""
        return None

    def entry(self, path: str) -> FileInfo | None:
        """``path`` itself, a symbolic link not followed (``is_link``, ``size`` the length of its target); None
        when nothing is there. Stores without links: :meth:`info`."""
        return self.info(path)

    def read_link(self, path: str) -> str:
        """The target of the symbolic link ``path``."""
        raise CheckpointError("cannot read the link: this store has no symbolic links", path=path)

    def make_link(self, path: str, target: str) -> None:
        """Create (or replace) ``path`` as a symbolic link to ``target``, atomically."""
        raise UnsupportedError(f"cannot create the symbolic link {path}: {self.uri()} has no symbolic links",
                               path=path, hint="keep the backup on a local disk (backup_dir)")

    def read_regular(self, path: str) -> bytes:
        """The bytes of ``path`` if it is a regular file; a link (not followed), a directory or a special file is
        refused. Stores without links: :meth:`read`."""
        return self.read(path)

    def pinned(self) -> "FileSystem":
        """This file system with the symbolic links on the way to its root resolved now, once (its ``uri`` still
        the location as given): a link switched later does not move what it changes."""
        return self


def require_dir(fs: FileSystem, what: str = "checkpoint", hint: str = "pass the checkpoint directory (the one holding "
                "offsets/ and commits/)", param: str | None = None) -> None:
    """Fail clearly when the root does not exist or is not a directory (``hint``: what to pass instead)."""
    got = fs.info("")
    if got is None:
        pattern = any(c in fs.uri() for c in "*?[")  # a local pattern check left (it matched no path)
        raise MissingFileError(f"{what} not found: {fs.uri()}", param=param,
                               hint=f"{'no path matches this pattern' if pattern else 'nothing is at this path'}: {hint}")
    if not got.is_dir:
        raise MissingFileError(f"{what} is not a directory: {fs.uri()}", hint=hint, param=param)
