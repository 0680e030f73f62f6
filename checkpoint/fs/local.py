"""Local paths (and ``file:`` URIs) through ``os``: importing pyarrow costs ~0.4 s."""
from __future__ import annotations

import errno
import os
import posixpath
import shutil
import stat
from typing import Mapping

from ..errors import CheckpointError, MissingFileError, arg
from .base import NOT_A_FILE, TEMP_SUFFIX, FileInfo, FileSystem, clean_relative


class LocalFileSystem(FileSystem):
    """Local paths through ``os``; ``as_uri``: locations are spelled ``file://...`` (opened by a ``file:`` URI)."""

    def __init__(self, root: str, as_uri: bool = False, shown: str | None = None) -> None:
        self.root = os.path.abspath(root)
        self.as_uri = as_uri
        self.shown = shown or self.root
        """The root as given (``uri``), when ``root`` is where its links led (:meth:`pinned`)."""

    def _unreadable(self, exc: OSError, doing: str, path: str) -> CheckpointError:
        """The error of a ``doing`` (read, list) of ``path`` that failed: the root named as the location given, the
        hint fitting the cause (for a permission, the user, the owner and the mode)."""
        rel = clean_relative(path)
        message = f"cannot {doing}: {exc.strerror}" if rel else f"cannot {doing} {self.uri()}: {exc.strerror}"
        hint = None
        if exc.errno in (errno.EACCES, errno.EPERM):
            try:
                st = os.stat(self._abs(rel))
                owner = f" (it is owned by uid {st.st_uid}, mode {stat.filemode(st.st_mode)})"
            except OSError:
                owner = ""
            uid = getattr(os, "getuid", lambda: None)()
            user = f"uid {uid}, the user wmcheck ran as," if uid is not None else "the user wmcheck ran as"
            hint = f"give {user} read access to {rel or 'it'} with chmod or chown{owner}, or run wmcheck as a user that has it"
        return CheckpointError(message, path=rel or None, hint=hint)

    def _abs(self, path: str) -> str:
        rel = clean_relative(path)
        return os.path.join(self.root, rel) if rel else self.root

    def read(self, path: str) -> bytes:
        try:
            fd = os.open(self._abs(path), os.O_RDONLY)
            try:
                return _read_all(fd)
            finally:
                os.close(fd)
        except FileNotFoundError:
            raise MissingFileError("file not found", path=path) from None
        except IsADirectoryError:
            raise CheckpointError(NOT_A_FILE, path=path) from None
        except OSError as exc:
            raise self._unreadable(exc, "read", path) from None

    def read_tail(self, path: str, size: int) -> bytes:
        try:
            with open(self._abs(path), "rb") as fh:
                end = fh.seek(0, os.SEEK_END)
                fh.seek(max(0, end - size))
                return fh.read()
        except FileNotFoundError:
            raise MissingFileError("file not found", path=path) from None
        except OSError as exc:
            raise self._unreadable(exc, "read", path) from None

    def read_head(self, path: str, size: int) -> bytes:
        try:
            with open(self._abs(path), "rb") as fh:
                return fh.read(size)
        except FileNotFoundError:
            raise MissingFileError("file not found", path=path) from None
        except OSError as exc:
            raise self._unreadable(exc, "read", path) from None

    def list_dir(self, path: str) -> list[FileInfo]:
        rel = clean_relative(path)
        try:
            entries = list(os.scandir(self._abs(rel)))
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            raise self._unreadable(exc, "list", path) from None
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
            raise self._unreadable(exc, "list", path) from None

    def walk(self, path: str, dirs: bool = False, unreadable: list[CheckpointError] | None = None) -> list[FileInfo]:
        """Every file below ``path`` (and with ``dirs`` every directory); a linked directory is entered once (a link
        loop is listed as a file)."""
        out: list[FileInfo] = []
        stack = [clean_relative(path)]
        seen: set[str] = set()
        while stack:
            directory = stack.pop()
            try:
                items = self.list_dir(directory)
            except CheckpointError as exc:
                if unreadable is None or directory == clean_relative(path):
                    raise
                unreadable.append(exc)
                continue
            for item in items:
                if item.is_dir and item.is_link:
                    real = os.path.realpath(self._abs(item.path))
                    if real in seen or _under(os.path.realpath(self.root), real):
                        out.append(FileInfo(item.path, 0, item.mtime_ms, False, True))
                        continue
                    seen.add(real)
                if item.is_dir:
                    stack.append(item.path)
                if dirs or not item.is_dir:
                    out.append(item)
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
            raise self._unreadable(exc, "read", path) from None
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
        rel = clean_relative(path)
        shown = os.path.join(self.shown, rel) if rel else self.shown
        return f"file://{shown}" if self.as_uri else shown

    def fetch(self, paths: Mapping[str, str]) -> None:
        """Local files are linked, not copied."""
        for path, local in paths.items():
            if not os.path.isfile(self._abs(path)):
                raise MissingFileError("file not found", path=path)
            os.symlink(self._abs(path), local)

    def os_path(self, path: str = "") -> str:
        """The path the operating system takes for ``path``."""
        return self._abs(path)

    def sub(self, path: str) -> "LocalFileSystem":
        rel = clean_relative(path)
        return LocalFileSystem(self._abs(path), self.as_uri, os.path.join(self.shown, rel) if rel else self.shown)

    def parent(self) -> "LocalFileSystem | None":
        up = os.path.dirname(self.root)
        return None if up == self.root else LocalFileSystem(up, self.as_uri, os.path.dirname(self.shown.rstrip("/")) or "/")

    def pinned(self) -> "LocalFileSystem":
        return LocalFileSystem(os.path.realpath(self.root), self.as_uri, self.shown)

    def entry(self, path: str) -> FileInfo | None:
        try:
            st = os.lstat(self._abs(path))
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise self._unreadable(exc, "read", path) from None
        mode = st.st_mode
        is_dir, link = stat.S_ISDIR(mode), stat.S_ISLNK(mode)
        return FileInfo(clean_relative(path), 0 if is_dir else st.st_size, int(st.st_mtime * 1000), is_dir, link,
                        st.st_nlink, not (is_dir or link or stat.S_ISREG(mode)))

    def read_link(self, path: str) -> str:
        try:
            return os.readlink(self._abs(path))
        except OSError as exc:
            raise CheckpointError(f"cannot read the link: {exc.strerror}", path=path) from None

    def make_link(self, path: str, target: str) -> None:
        real = self._abs(path)
        tmp = os.path.join(os.path.dirname(real), f".{os.path.basename(real)}{TEMP_SUFFIX}")
        try:
            os.makedirs(os.path.dirname(real), exist_ok=True)
            if os.path.lexists(tmp):
                os.remove(tmp)
            os.symlink(target, tmp)
            os.replace(tmp, real)
        except OSError as exc:
            raise _cannot("write", path, exc) from None

    def read_regular(self, path: str) -> bytes:
        real = self._abs(path)
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
        except FileNotFoundError:
            raise MissingFileError("file not found", path=path) from None
        except OSError as exc:
            what = "a symbolic link" if os.path.islink(real) else exc.strerror
            raise CheckpointError(f"expected a regular file, found {what}", path=path) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise CheckpointError("expected a regular file, found a directory or a special file", path=path)
            return _read_all(fd)
        except OSError as exc:
            raise self._unreadable(exc, "read", path) from None
        finally:
            os.close(fd)


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


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


