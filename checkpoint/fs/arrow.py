"""Stores reached through ``pyarrow.fs`` (S3, GCS, Azure, HDFS): every call bounded by a timeout and
interruptible, every failure one line.

A call into pyarrow's C++ neither returns on Ctrl-C nor gives up on a store that does not answer, so each runs
on a worker thread while the caller waits at most ``timeout`` seconds (that wait is interruptible). A call past
its deadline is abandoned: its daemon thread never holds up the exit (:func:`abandoned`)."""
from __future__ import annotations

import posixpath
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable, Mapping, TypeVar

from pyarrow.lib import ArrowException

from wmcheck.checkpoint.records import dataclass

from ..errors import CheckpointError, MissingFileError, arg
from .base import NOT_A_FILE, TEMP_SUFFIX, FileInfo, FileSystem, clean_relative
from .uri import Location, scheme_of, split_uri

T = TypeVar("T")
READ_THREADS = 16
_ABANDONED: list[threading.Thread] = []
BUCKET_STORES = {"s3": "s3", "s3a": "s3", "s3n": "s3", "gs": "gcs", "gcs": "gcs"}
"""URI scheme -> the kind of store whose paths start with a bucket (:meth:`ArrowFileSystem.reach`)."""


class RemoteTimeoutError(CheckpointError):
    """A remote store did not answer within the timeout."""


def abandoned() -> bool:
    """Whether a call that missed its deadline is still running (the process should then exit without waiting)."""
    return any(t.is_alive() for t in _ABANDONED)


def one_line(exc: BaseException) -> str:
    """An error's text on one line (pyarrow's span several)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def bounded(call: Callable[[], T], timeout: float, what: str) -> T:
    """``call()`` on a worker thread; wait at most ``timeout`` seconds (interruptibly) for its result or error."""
    done = threading.Event()
    box: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            box.append((True, call()))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
            box.append((False, exc))
        finally:
            done.set()

    worker = threading.Thread(target=run, name="wmcheck-remote", daemon=True)
    worker.start()
    if not done.wait(timeout):
        _ABANDONED.append(worker)
        raise RemoteTimeoutError(
            f"no answer from {what} within {timeout:g} s",
            hint=f"check the network and the endpoint; wait longer with {arg('timeout', int(timeout * 4))}",
            param="timeout")
    ok, value = box[0]
    if ok:
        return value
    raise value


@dataclass(frozen=True)
class StoreUri:
    """How a store path is spelled as a URI (``uri_of``; a class, so that a file system pickles for worker
    processes): ``prefix`` then the path without its leading slash, and without its first component when
    ``drop_first`` (the prefix names it, as Azure's container)."""

    prefix: str
    drop_first: bool = False

    def __call__(self, path: str) -> str:
        rel = path.lstrip("/")
        return self.prefix + (rel.partition("/")[2] if self.drop_first else rel)


def bucket_store(fs: Any, loc: Location, timeout: float, hint: str) -> "ArrowFileSystem":
    """A store whose paths start with a bucket (S3, GCS), rooted at ``loc``: ``scheme://BUCKET/PATH``."""
    return ArrowFileSystem(fs, f"{loc.authority}/{loc.path}", StoreUri(f"{loc.scheme}://"), timeout, hint)


class ArrowFileSystem(FileSystem):
    """A ``pyarrow.fs`` file system rooted at ``root`` (a store path, no scheme); ``uri_of`` spells a store path
    as the user (and Spark) write it; ``hint`` says what to check when a call fails."""

    def __init__(self, fs: Any, root: str, uri_of: Callable[[str], str], timeout: float, hint: str) -> None:
        self.fs = fs
        self.root = root.rstrip("/") or "/"
        self.uri_of = uri_of
        self.timeout = timeout
        self.hint = hint

    def _abs(self, path: str) -> str:
        rel = clean_relative(path)
        return posixpath.join(self.root, rel) if rel else self.root

    def _rel(self, full: str) -> str:
        return posixpath.relpath(full, self.root)

    def _call(self, call: Callable[[], T], action: str, path: str) -> T:
        """A store call: bounded by the timeout, its OS error one line naming ``path``."""
        try:
            return bounded(call, self.timeout, self.uri(path))
        except (FileNotFoundError, RemoteTimeoutError, CheckpointError):
            raise
        except (OSError, ValueError, ArrowException) as exc:
            raise CheckpointError(f"cannot {action} {self.uri(path)}: {one_line(exc)}", hint=self.hint) from None

    def read(self, path: str) -> bytes:
        def read() -> bytes:
            with self.fs.open_input_stream(self._abs(path)) as fh:
                return fh.read()

        try:
            return self._call(read, "read", path)
        except FileNotFoundError:
            raise MissingFileError("file not found", path=path) from None
        except IsADirectoryError:
            raise CheckpointError(NOT_A_FILE, path=path) from None

    def _selector(self, path: str, recursive: bool) -> list[FileInfo]:
        from pyarrow import fs as pafs

        selector = pafs.FileSelector(self._abs(path), allow_not_found=True, recursive=recursive)
        try:
            infos = self._call(lambda: self.fs.get_file_info(selector), "list", path)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return [self._convert(i) for i in infos]

    def _convert(self, info: Any) -> FileInfo:
        from pyarrow import fs as pafs

        is_dir = info.type == pafs.FileType.Directory
        mtime = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else 0
        return FileInfo(self._rel(info.path), 0 if is_dir else (info.size or 0), mtime, is_dir)

    def list_dir(self, path: str) -> list[FileInfo]:
        return self._selector(path, recursive=False)

    def walk(self, path: str, dirs: bool = False, unreadable: list[CheckpointError] | None = None) -> list[FileInfo]:
        return [i for i in self._selector(path, recursive=True) if dirs or not i.is_dir]

    def info(self, path: str) -> FileInfo | None:
        from pyarrow import fs as pafs

        got = self._call(lambda: self.fs.get_file_info(self._abs(path)), "read", path)
        return None if got.type == pafs.FileType.NotFound else self._convert(got)

    def write(self, path: str, data: bytes) -> None:
        target = self._abs(path)
        tmp = posixpath.join(posixpath.dirname(target), f".{posixpath.basename(target)}{TEMP_SUFFIX}")

        def write() -> None:
            self.fs.create_dir(posixpath.dirname(target), recursive=True)
            with self.fs.open_output_stream(tmp) as fh:
                fh.write(data)
            self.fs.move(tmp, target)

        self._call(write, "write", path)

    def delete(self, path: str) -> None:
        got = self.info(path)
        if got is not None:
            self._call(lambda: (self.fs.delete_dir if got.is_dir else self.fs.delete_file)(self._abs(path)), "delete", path)

    def rename(self, src: str, dst: str) -> None:
        target = self._abs(dst)

        def move() -> None:
            self.fs.create_dir(posixpath.dirname(target), recursive=True)
            self.fs.move(self._abs(src), target)

        self._call(move, "move", src)

    def read_many(self, paths: Iterable[str]) -> dict[str, bytes]:
        paths = list(paths)
        pool = ThreadPoolExecutor(max_workers=min(READ_THREADS, max(1, len(paths))))
        try:
            return dict(zip(paths, pool.map(self.read, paths)))
        finally:
            pool.shutdown(wait=False, cancel_futures=True)  # a failed read stops the rest at once

    def fetch(self, paths: Mapping[str, str]) -> None:
        """Several files at once (the bounded thread pool), each streamed to its local file in 1 MiB chunks,
        every call to the store bounded by the timeout."""
        def one(item: tuple[str, str]) -> None:
            path, local = item
            try:
                src = self._call(lambda: self.fs.open_input_stream(self._abs(path)), "read", path)
            except FileNotFoundError:
                raise MissingFileError("file not found", path=path) from None
            with src, open(local, "wb") as dst:
                while chunk := self._call(lambda: src.read(1 << 20), "read", path):
                    dst.write(chunk)

        pool = ThreadPoolExecutor(max_workers=min(READ_THREADS, max(1, len(paths))))
        try:
            list(pool.map(one, paths.items()))
        finally:
            pool.shutdown(wait=False, cancel_futures=True)  # a failed read stops the rest at once

    def uri(self, path: str = "") -> str:
        return self.uri_of(self._abs(path))

    def reach(self, location: str) -> "tuple[ArrowFileSystem, str] | None":
        """Buckets of the same kind of store (``s3a://`` and ``s3://`` are one), through the same client."""
        own, other = scheme_of(self.uri()), scheme_of(location)
        kind = BUCKET_STORES.get(own or "")
        if kind is None or kind != BUCKET_STORES.get(other or "") or not isinstance(self.uri_of, StoreUri):
            return None
        loc = split_uri(location)
        if not loc.authority:
            return None
        return ArrowFileSystem(self.fs, loc.authority, StoreUri(f"{loc.scheme}://"), self.timeout, self.hint), loc.path

    def sub(self, path: str) -> "ArrowFileSystem":
        return ArrowFileSystem(self.fs, self._abs(path), self.uri_of, self.timeout, self.hint)

    def parent(self) -> "ArrowFileSystem | None":
        up = posixpath.dirname(self.root)  # a bucket (container) is the top: its store paths start with it
        return None if up in ("", self.root) else ArrowFileSystem(self.fs, up, self.uri_of, self.timeout, self.hint)
