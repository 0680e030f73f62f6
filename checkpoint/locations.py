"""Where a logged file is: the URI Spark logged as the path Spark reads, a ``--path-map`` applied to it, and
whether (and how big) it is on its store."""
from __future__ import annotations

import os
import posixpath
from typing import Any, Iterable, Mapping
from urllib.parse import unquote, urlsplit

from .errors import CheckpointError, MissingFileError, arg
from .fs import FileInfo, FileSystem, local_path, open_fs, require_dir, scheme_of
from .layout import SINK_LOG


def spark_location(path: str) -> str:
    """The path Spark reads for a logged file (``new Path(new URI(path)).toString``: escapes decoded)."""
    parts = urlsplit(path)
    if not parts.scheme or len(parts.scheme) == 1:  # a bare path (or a Windows drive letter)
        return unquote(path)
    body = unquote(parts.path)
    return f"{parts.scheme}://{parts.netloc}{body}" if parts.netloc else f"{parts.scheme}:{body}"


def _canonical(location: str) -> str:
    local = local_path(location)
    return local if local is not None else location


def map_location(location: str, path_map: Mapping[str, str]) -> str:
    """Apply the first ``--path-map FROM=TO`` whose FROM is a prefix of ``location`` (at a ``/``)."""
    canon = _canonical(location)
    for src, dst in path_map.items():
        prefix = _canonical(src).rstrip("/")
        if canon == prefix or canon.startswith(prefix + "/"):
            mapped = dst.rstrip("/") + canon[len(prefix):]
            if location.startswith("file:") and local_path(mapped) == mapped:
                return "file:" + mapped
            return mapped
    return location


def stat_locations(locations: Iterable[str], fs_options: Mapping[str, str] | None = None) -> dict[str, tuple[bool | None, int | None]]:
    """(exists, size) of each location: local paths via ``os``, other stores via pyarrow.

    A store that cannot be opened here (no credentials, no libhdfs) gives ``(None, None)``: unknown,
    not missing, so Spark still gets to read the file.
    """
    from .fs import open_fs, scheme_of

    out: dict[str, tuple[bool | None, int | None]] = {}
    stores: dict[str, Any] = {}
    for loc in locations:
        local = local_path(loc)
        if local is not None or scheme_of(loc) is None:
            try:
                out[loc] = (True, os.stat(local if local is not None else loc).st_size)
            except OSError:
                out[loc] = (False, None)
            continue
        parts = urlsplit(loc)
        key = f"{parts.scheme}://{parts.netloc}"
        if key not in stores:
            try:
                stores[key] = open_fs(key, fs_options)
            except CheckpointError:
                stores[key] = None
        out[loc] = _remote_stat(stores[key], parts.path.lstrip("/"))
    return out


def suggest_path_map(missing: list[str], bases: Iterable[str], sample: int = 20) -> tuple[str, str] | None:
    """A ``--path-map FROM=TO`` under which the ``missing`` local paths exist: the longest trailing part of the
    first one found below one of ``bases`` (directories where they may have moved with the checkpoint), kept
    when it also finds the next ``sample`` missing paths. None when no such mapping is found."""
    if not missing:
        return None
    parts = missing[0].strip("/").split("/")
    for base in bases:
        for start in range(1, len(parts)):
            if not os.path.exists(os.path.join(base, *parts[start:])):
                continue
            old, new = "/" + "/".join(parts[:start]), base.rstrip("/") or "/"
            rest = [p for p in missing[1:sample + 1] if p.startswith(old + "/")]
            if all(os.path.exists(new + p[len(old):]) for p in rest):
                return old, new
            break
    return None


LISTED_FROM = 8
"""How many files of one directory are looked up before its listing (one call) is cheaper."""


def store_top(fs: FileSystem) -> FileSystem:
    """The top of the store ``fs`` is on (``/``, a bucket, a container): where its absolute paths start."""
    while (up := fs.parent()) is not None:
        fs = up
    return fs


def present_files(home: FileSystem, locations: Iterable[str]) -> dict[str, bool]:
    """Whether each of ``locations`` (logged input files: ``file:`` URIs, or bare absolute paths, taken to be on the
    store of ``home``, the checkpoint's file system) is there, asked through :class:`~.fs.FileSystem`: a look-up per
    file, or one listing of a directory holding more than :data:`LISTED_FROM` of them. Other locations, and those
    whose directory cannot be read, are left out (unknown)."""
    stores: dict[bool, FileSystem] = {}
    wanted: dict[tuple[bool, str], dict[str, str]] = {}
    for loc in locations:
        bare = scheme_of(loc) is None and not loc.startswith("file:")
        path = loc if bare else local_path(loc)
        if path is None or not path.startswith("/"):
            continue
        if bare not in stores:
            stores[bare] = store_top(home if bare else open_fs("/"))
        folder, _, name = path.strip("/").rpartition("/")
        wanted.setdefault((bare, folder), {})[name] = loc
    out: dict[str, bool] = {}
    for (bare, folder), names in wanted.items():
        store = stores[bare]
        try:
            if len(names) > LISTED_FROM:
                there = set(store.names(folder))
                out.update((loc, name in there) for name, loc in names.items())
            else:
                out.update((loc, store.exists(posixpath.join(folder, name))) for name, loc in names.items())
        except CheckpointError:
            continue  # a directory that cannot be read: unknown
    return out


def _remote_stat(store: Any, path: str) -> tuple[bool | None, int | None]:
    if store is None:
        return None, None
    try:
        info = store.info(path)
    except (CheckpointError, OSError):
        return None, None
    return (False, None) if info is None or info.is_dir else (True, info.size)


def entry_location(path: str) -> str:
    """A log entry's path (a URI) as a store path: ``file:///a/b`` -> ``/a/b``, ``s3a://bk/a`` -> ``bk/a``."""
    parts = urlsplit(path)
    if parts.scheme in ("", "file"):
        return unquote(parts.path)
    return unquote(parts.netloc + parts.path)


class SinkFiles:
    """Finds the data file a sink log entry names inside the sink directory (and nowhere else).

    Entries hold absolute URIs; when the sink was copied or moved they point at the old place, so
    a file is also found by the longest trailing part of its path that exists below the sink. Files are found in
    one recursive listing of the sink (one call to the store, not one per file: an object store answers each in
    tens of milliseconds); only a name the listing lacks (gone, or a directory) is looked up on its own.
    """

    def __init__(self, fs: FileSystem, root_path: str) -> None:
        self.fs = fs
        self.root_path = root_path.rstrip("/")
        self._listing: dict[str, FileInfo] | None = None
        self._unlisted: dict[str, FileInfo | None] = {}

    def listing(self) -> dict[str, FileInfo]:
        if self._listing is None:
            self._listing = {i.path: i for i in self.fs.walk("") if not i.path.startswith(SINK_LOG + "/")}
        return self._listing

    def _look_up(self, rel: str) -> FileInfo | None:
        """A name the listing lacks, looked up once."""
        if rel not in self._unlisted:
            self._unlisted[rel] = self.fs.info(rel)
        return self._unlisted[rel]

    def find(self, entry_path: str) -> FileInfo | None:
        location = entry_location(entry_path)
        if location.startswith(self.root_path + "/"):
            rel = location[len(self.root_path) + 1:]
            if rel.split("/")[0] != SINK_LOG and ".." not in rel.split("/"):
                return self.listing().get(rel) or self._look_up(rel)
        parts = location.strip("/").split("/")
        listing = self.listing()
        for start in range(1, len(parts)):
            rel = "/".join(parts[start:])
            if rel in listing:
                return listing[rel]
        return None


def open_file_sink(location: str, fs_options: Mapping[str, str] | None = None, lost_log: bool = False) -> FileSystem:
    """The output directory of a file sink (it holds ``_spark_metadata/``); with ``lost_log``, also one whose log is
    gone but which holds the sink's data files (``part-*``, or ``key=value`` partition directories), for ``check``
    to report."""
    fs = open_fs(location, fs_options)
    require_dir(fs, "file sink")
    if not fs.exists(SINK_LOG) and not (lost_log and holds_sink_data(fs)):
        raise MissingFileError(
            f"no {SINK_LOG}/ in {fs.uri()}: not the output directory of a file sink",
            hint=f"pass the path the query writes to (option 'path' of writeStream), or omit {arg('file_sink')}", param="file_sink",
        )
    return fs


def holds_sink_data(fs: FileSystem) -> bool:
    """Whether a directory holds what a file sink writes: ``part-*`` data files or ``key=value`` partition directories."""
    return any(name.startswith("part-") or ("=" in name and not name.startswith((".", "_"))) for name in fs.names(""))
