"""File access behind one small interface, picked by URI scheme.

Plain local paths use ``os`` (importing pyarrow costs ~0.4 s); ``file://``, ``s3://``,
``s3a://``, ``gs://``, ``abfs://``, ``abfss://`` and ``hdfs://`` go through ``pyarrow.fs``.
Every path handed to a :class:`FileSystem` is relative to its root, POSIX style, and may
not escape it.
"""
from __future__ import annotations

import os
import posixpath
import shutil
import stat
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Iterable, Mapping

from .errors import CheckpointError, MissingFileError, UnsupportedError, arg

TEMP_SUFFIX = ".wmcheck.tmp"
"""wmcheck's temp files: ``.<name>.wmcheck.tmp`` next to the file being written."""
REMOTE_SCHEMES = ("file", "s3", "s3a", "gs", "gcs", "abfs", "abfss", "hdfs", "viewfs")
READ_THREADS = 16


@dataclass(frozen=True)
class FileInfo:
    """One file or directory, ``path`` relative to the file system's root."""

    path: str
    size: int
    mtime_ms: int
    is_dir: bool = False
    is_link: bool = False
    """A symbolic link (local files): read through when it resolves; repairs refuse to change through one."""

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

    def list_dir(self, path: str) -> list[FileInfo]:
        """Immediate children of a directory; ``[]`` when it does not exist."""
        raise NotImplementedError

    def walk(self, path: str) -> list[FileInfo]:
        """Every file (not directory) below ``path``, recursively; ``[]`` when absent."""
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

    def sub(self, path: str) -> "FileSystem":
        """A file system rooted at ``path`` below this one."""
        raise NotImplementedError

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


class LocalFileSystem(FileSystem):
    """Local paths through ``os``."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)

    def _abs(self, path: str) -> str:
        rel = clean_relative(path)
        return os.path.join(self.root, rel) if rel else self.root

    def read(self, path: str) -> bytes:
        try:
            fd = os.open(self._abs(path), os.O_RDONLY)
            try:
                chunks = []
                while chunk := os.read(fd, 1 << 20):
                    chunks.append(chunk)
                return b"".join(chunks)
            finally:
                os.close(fd)
        except FileNotFoundError:
            raise MissingFileError("file not found", path=path) from None
        except IsADirectoryError:
            raise CheckpointError("expected a file, found a directory", path=path) from None
        except OSError as exc:
            raise CheckpointError(f"cannot read: {exc.strerror}", path=path) from None

    def list_dir(self, path: str) -> list[FileInfo]:
        rel = clean_relative(path)
        try:
            entries = list(os.scandir(self._abs(rel)))
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            raise CheckpointError(f"cannot list: {exc.strerror}", path=path or ".") from None
        infos = (self._info(posixpath.join(rel, e.name) if rel else e.name, e) for e in entries)
        return [i for i in infos if i is not None]

    @staticmethod
    def _info(rel: str, entry: os.DirEntry) -> FileInfo | None:
        """The entry as listed (links followed; a dangling or looping link as itself); None when it vanished."""
        try:
            link = entry.is_symlink()
            try:
                st = entry.stat(follow_symlinks=True)
            except OSError:
                if not link:
                    raise
                st = entry.stat(follow_symlinks=False)
                return FileInfo(rel, st.st_size, int(st.st_mtime * 1000), False, True)
            is_dir = stat.S_ISDIR(st.st_mode)
            return FileInfo(rel, 0 if is_dir else st.st_size, int(st.st_mtime * 1000), is_dir, link)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CheckpointError(f"cannot read: {exc.strerror}", path=rel) from None

    def names(self, path: str) -> list[str]:
        try:
            return os.listdir(self._abs(path))
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            raise CheckpointError(f"cannot list: {exc.strerror}", path=path or ".") from None

    def walk(self, path: str) -> list[FileInfo]:
        """Every file below ``path``; a linked directory is entered once (a link loop is listed as a file)."""
        out: list[FileInfo] = []
        stack = [clean_relative(path)]
        seen: set[str] = set()
        while stack:
            for item in self.list_dir(stack.pop()):
                if item.is_dir and item.is_link:
                    real = os.path.realpath(self._abs(item.path))
                    if real in seen or _under(os.path.realpath(self.root), real):
                        out.append(FileInfo(item.path, 0, item.mtime_ms, False, True))
                        continue
                    seen.add(real)
                (stack.append(item.path) if item.is_dir else out.append(item))
        return out

    def info(self, path: str) -> FileInfo | None:
        target = self._abs(path)
        try:
            st = os.stat(target)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            if os.path.islink(target):
                return FileInfo(clean_relative(path), 0, 0, False, True)
            raise CheckpointError(f"cannot read: {exc.strerror}", path=path or ".") from None
        is_dir = stat.S_ISDIR(st.st_mode)
        return FileInfo(clean_relative(path), 0 if is_dir else st.st_size, int(st.st_mtime * 1000), is_dir,
                        os.path.islink(target))

    def write(self, path: str, data: bytes) -> None:
        target = self._abs(path)
        tmp = os.path.join(os.path.dirname(target), f".{os.path.basename(target)}{TEMP_SUFFIX}")
        try:
            _durable(tmp, data)
            os.replace(tmp, target)
        except OSError as exc:
            raise _cannot("write", path, exc) from None

    def create_new(self, path: str, data: bytes) -> bool:
        target = self._abs(path)
        tmp = os.path.join(os.path.dirname(target), f".{os.path.basename(target)}.{os.getpid()}{TEMP_SUFFIX}")
        try:
            _durable(tmp, data)
            try:
                os.link(tmp, target)  # atomic: fails when the target exists; the file is whole from the start
            except FileExistsError:
                return False
            finally:
                os.remove(tmp)
        except OSError as exc:
            raise _cannot("write", path, exc) from None
        return True

    def delete(self, path: str) -> None:
        target = self._abs(path)
        try:
            if os.path.isdir(target) and not os.path.islink(target):
                shutil.rmtree(target)
            elif os.path.lexists(target):
                os.remove(target)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise _cannot("delete", path, exc) from None

    def rename(self, src: str, dst: str) -> None:
        target = self._abs(dst)
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.replace(self._abs(src), target)
        except FileNotFoundError:
            raise MissingFileError("file not found", path=src) from None
        except OSError as exc:
            raise _cannot("move", src, exc) from None

    def is_link(self, path: str) -> bool:
        return os.path.islink(self._abs(path))

    def remove_empty_dir(self, path: str) -> None:
        try:
            os.rmdir(self._abs(path))
        except OSError:
            pass  # not empty (or gone): leave it

    def resolved(self, path: str = "") -> str:
        return os.path.realpath(self._abs(path))

    def uri(self, path: str = "") -> str:
        return self._abs(path)

    def sub(self, path: str) -> "LocalFileSystem":
        return LocalFileSystem(self._abs(path))


class ArrowFileSystem(FileSystem):
    """Any store ``pyarrow.fs`` reaches; ``root`` is the store path (no scheme)."""

    def __init__(self, fs, root: str, scheme: str) -> None:  # fs: pyarrow.fs.FileSystem
        self.fs = fs
        self.root = root.rstrip("/") or "/"
        self.scheme = scheme

    def _abs(self, path: str) -> str:
        rel = clean_relative(path)
        return posixpath.join(self.root, rel) if rel else self.root

    def _rel(self, full: str) -> str:
        return posixpath.relpath(full, self.root)

    def read(self, path: str) -> bytes:
        try:
            with self.fs.open_input_stream(self._abs(path)) as fh:
                return fh.read()
        except FileNotFoundError:
            raise MissingFileError("file not found", path=path) from None
        except OSError as exc:
            raise CheckpointError(f"cannot read: {exc}", path=path) from None

    def _selector(self, path: str, recursive: bool) -> list[FileInfo]:
        from pyarrow import fs as pafs

        try:
            infos = self.fs.get_file_info(pafs.FileSelector(self._abs(path), allow_not_found=True, recursive=recursive))
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            raise CheckpointError(f"cannot list: {exc}", path=path or ".") from None
        return [self._convert(i) for i in infos]

    def _convert(self, info) -> FileInfo:
        from pyarrow import fs as pafs

        is_dir = info.type == pafs.FileType.Directory
        mtime = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else 0
        return FileInfo(self._rel(info.path), 0 if is_dir else (info.size or 0), mtime, is_dir)

    def list_dir(self, path: str) -> list[FileInfo]:
        return self._selector(path, recursive=False)

    def walk(self, path: str) -> list[FileInfo]:
        return [i for i in self._selector(path, recursive=True) if not i.is_dir]

    def info(self, path: str) -> FileInfo | None:
        from pyarrow import fs as pafs

        got = self.fs.get_file_info(self._abs(path))
        return None if got.type == pafs.FileType.NotFound else self._convert(got)

    def write(self, path: str, data: bytes) -> None:
        target = self._abs(path)
        self.fs.create_dir(posixpath.dirname(target), recursive=True)
        tmp = posixpath.join(posixpath.dirname(target), f".{posixpath.basename(target)}{TEMP_SUFFIX}")
        with self.fs.open_output_stream(tmp) as fh:
            fh.write(data)
        self.fs.move(tmp, target)

    def delete(self, path: str) -> None:
        got = self.info(path)
        if got is None:
            return
        (self.fs.delete_dir if got.is_dir else self.fs.delete_file)(self._abs(path))

    def rename(self, src: str, dst: str) -> None:
        target = self._abs(dst)
        self.fs.create_dir(posixpath.dirname(target), recursive=True)
        self.fs.move(self._abs(src), target)

    def read_many(self, paths: Iterable[str]) -> dict[str, bytes]:
        paths = list(paths)
        with ThreadPoolExecutor(max_workers=min(READ_THREADS, max(1, len(paths)))) as pool:
            return dict(zip(paths, pool.map(self.read, paths)))

    def uri(self, path: str = "") -> str:
        full = self._abs(path)
        return f"file://{full}" if self.scheme == "file" else f"{self.scheme}://{full.lstrip('/')}"

    def sub(self, path: str) -> "ArrowFileSystem":
        return ArrowFileSystem(self.fs, self._abs(path), self.scheme)


def _durable(path: str, data: bytes) -> None:
    """Write a new local file and fsync it (its directory created when missing)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _under(parent: str, path: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _cannot(what: str, path: str, exc: OSError) -> CheckpointError:
    """An OS error while changing a file, as one clear line (a read-only checkpoint, a full disk)."""
    return CheckpointError(f"cannot {what}: {exc.strerror or exc}", path=path,
                           hint=f"check the permissions and free space of the checkpoint (and {arg('backup_dir')})")


def local_path(location: str) -> str | None:
    """The local path of a ``file:`` location or a bare absolute path, None for other schemes."""
    if location.startswith("file:"):
        rest = location[len("file:"):]
        if rest.startswith("//"):
            netloc, _, tail = rest[2:].partition("/")
            return "/" + tail if netloc in ("", "localhost") else None
        return rest
    return location if location.startswith("/") else None


def scheme_of(location: str) -> str | None:
    """The URI scheme of ``location``, or None for a plain local path."""
    head, sep, _ = location.partition("://")
    return head.lower() if sep and head.isidentifier() else None


def _arrow_options(options: Mapping[str, str]) -> dict[str, object]:
    """``--fs-option`` values as pyarrow constructor keyword arguments."""
    out: dict[str, object] = {}
    for key, value in options.items():
        low = value.lower()
        out[key] = True if low == "true" else False if low == "false" else value
    return out


def open_fs(location: str, options: Mapping[str, str] | None = None) -> FileSystem:
    """Open the file system that holds ``location``, rooted at it."""
    scheme = scheme_of(location)
    if scheme is None:
        return LocalFileSystem(location)
    if scheme not in REMOTE_SCHEMES:
        raise UnsupportedError(
            f"unsupported URI scheme {scheme!r} in {location}",
            hint=f"use a local path or one of {', '.join(s + '://' for s in REMOTE_SCHEMES)}",
        )
    try:
        from pyarrow import fs as pafs
    except ImportError:  # pragma: no cover - pyarrow is a core dependency
        raise UnsupportedError("remote checkpoints need pyarrow", hint="pip install pyarrow") from None
    uri = "s3://" + location.split("://", 1)[1] if scheme == "s3a" else location
    kwargs = _arrow_options(options or {})
    try:
        if kwargs and scheme in ("s3", "s3a"):
            bucket_path = uri.split("://", 1)[1]
            return ArrowFileSystem(pafs.S3FileSystem(**kwargs), bucket_path, "s3a" if scheme == "s3a" else "s3")
        fs, path = pafs.FileSystem.from_uri(uri)
        if kwargs:
            fs = type(fs)(**kwargs)
    except (OSError, TypeError, ValueError) as exc:
        raise CheckpointError(
            f"cannot open {location}: {exc}",
            hint=f"check the URI, credentials (environment variables) and {arg('fs_options')} key=value settings",
        ) from None
    return ArrowFileSystem(fs, path, scheme)


def require_dir(fs: FileSystem, what: str = "checkpoint") -> None:
    """Fail clearly when the root does not exist or is not a directory."""
    got = fs.info("")
    if got is None or not got.is_dir:
        raise MissingFileError(
            f"{what} not found: {fs.uri()}" if got is None else f"{what} is not a directory: {fs.uri()}",
            hint="pass the checkpoint directory (the one holding offsets/ and commits/)",
        )
