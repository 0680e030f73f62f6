"""File access behind one small interface (:class:`FileSystem`), one implementation per module, chosen by the
location's URI scheme.

Plain local paths and ``file:`` URIs use ``os`` (:mod:`.local`); ``s3://``/``s3a://`` (:mod:`.s3`), ``gs://``
(:mod:`.gcs`), ``abfs://``/``abfss://`` (:mod:`.azure`) and ``hdfs://`` (:mod:`.hdfs`) go through ``pyarrow.fs``
(:mod:`.arrow`: calls bounded by a timeout, failures in one line), imported only when such a location is opened.
Each store module lists the constructor options it accepts (:mod:`.options`). Every path handed to a
:class:`FileSystem` is relative to its root, POSIX style, and may not escape it.
"""
from __future__ import annotations

import importlib
from typing import Mapping

from ..errors import UnsupportedError
from .base import NOT_A_FILE, TEMP_SUFFIX, FileInfo, FileSystem, clean_relative, require_dir
from .local import LocalFileSystem
from .uri import file_uri_path, local_path, scheme_of

STORES = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "abfs": "azure", "abfss": "azure", "hdfs": "hdfs",
          "viewfs": "hdfs"}
"""URI scheme -> the module (of this package) that opens it."""
REMOTE_SCHEMES = ("file", *STORES)


def open_fs(location: str, options: Mapping[str, str] | None = None) -> FileSystem:
    """Open the file system that holds ``location``, rooted at it; ``options`` are its store's constructor options
    (see each store module's ``OPTIONS``; ignored for local paths)."""
    scheme = scheme_of(location)
    if scheme is None:
        return LocalFileSystem(location)
    if scheme == "file":
        path = file_uri_path(location)
        if path is None:
            raise UnsupportedError(f"{location} names another host", hint="write file:///PATH (or the plain path)")
        return LocalFileSystem(path, as_uri=True)
    if scheme not in STORES:
        raise UnsupportedError(
            f"unsupported URI scheme {scheme!r} in {location}",
            hint=f"use a local path or one of {', '.join(s + '://' for s in REMOTE_SCHEMES)}",
        )
    store = importlib.import_module(f"{__name__}.{STORES[scheme]}")
    return store.open_store(location, dict(options or {}))


__all__ = ["NOT_A_FILE", "TEMP_SUFFIX", "FileInfo", "FileSystem", "LocalFileSystem", "REMOTE_SCHEMES", "STORES", "clean_relative",
           "local_path", "open_fs", "require_dir", "scheme_of"]
