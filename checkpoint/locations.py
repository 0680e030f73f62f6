"""Where a logged file is: the URI Spark logged as the path Spark reads, a ``--path-map`` applied to it, and
whether (and how big) it is on its store."""
from __future__ import annotations

import os
import posixpath
import re
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


_URI_PATH_ASCII = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.!~*'()" ":@&=+$," ";/")


def _uri_path(path: str) -> str:
    """A decoded path quoted as ``java.net.URI``'s constructor quotes a path (Hadoop's ``Path.toUri``): ASCII outside
    a URI path's characters, spaces and controls as UTF-8 escapes, other characters kept."""
    return "".join(c if c in _URI_PATH_ASCII or (c > "\x7f" and not c.isspace() and c.isprintable())
                   else "".join(f"%{b:02X}" for b in c.encode("utf-8")) for c in path)


def uri_form(location: str) -> str | None:
    """How a URI spells what comes before its path (``file:/``, ``file:///``, ``s3a://bucket/``); None for a bare
    path."""
    parts = urlsplit(location)
    if not parts.scheme or len(parts.scheme) == 1:
        return None
    return f"{parts.scheme}://{parts.netloc}/" if location[len(parts.scheme) + 1:].startswith("//") else f"{parts.scheme}:/"


def listed_spelling(location: str, form: str) -> str | None:
    """The string Spark's file listing gives a logged input file (``SparkPath.fromFileStatus(..).urlEncoded``, the
    key of a file source's seen files), with ``form`` the way its other entries spell the part before the path: its
    path decoded, normalized (:func:`normal_path`) and quoted again as ``java.net.URI`` quotes it. None for a bare path
    or a URI of another scheme."""
    own = uri_form(location)
    if own is None or own.split(":", 1)[0] != form.split(":", 1)[0]:
        return None
    path = urlsplit(location).path
    return form + _uri_path(normal_path(unquote(path))).lstrip("/")


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


def stat_locations(locations: Iterable[str], fs_options: Mapping[str, str] | None = None,
                   home: FileSystem | None = None) -> dict[str, tuple[bool | None, int | None]]:
    """(exists, size) of each location: asked of the store :func:`holding` finds through ``home`` (the checkpoint's
    file system: the local disk, or the checkpoint's kind of store reached as the checkpoint is), else local paths via
    ``os`` and other stores opened with ``fs_options``.

    A store that cannot be opened here (no credentials, no libhdfs) gives ``(None, None)``: unknown,
    not missing, so Spark still gets to read the file.
    """
    out: dict[str, tuple[bool | None, int | None]] = {}
    stores: dict[str, Any] = {}
    resolve = Stores(home) if home is not None else None
    for loc in locations:
        found = resolve.holding(loc) if resolve is not None else None
        if found is not None:
            out[loc] = _remote_stat(*found)
            continue
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


def suggest_path_map(missing: list[str], bases: Iterable[FileSystem], sample: int = 20) -> tuple[str, str] | None:
    """A ``--path-map FROM=TO`` under which the ``missing`` locations (absolute local paths, or URIs of a store)
    exist: the longest trailing part of the first one found below one of ``bases`` (directories where they may have
    moved with the checkpoint: :func:`moved_bases`), kept when it also finds the next ``sample`` missing ones. TO is
    spelled as the base's local path, else its URI in the scheme FROM has. None when no such mapping is found."""
    if not missing:
        return None
    head, parts = _split(missing[0])
    for base in bases:
        for start in range(1, len(parts)):  # the longest trailing part first
            if not _exists(base, "/".join(parts[start:])):
                continue
            old = f"{head}/{'/'.join(parts[:start])}"
            rest = [p for p in missing[1:sample + 1] if p.startswith(old + "/")]
            if all(_exists(base, p[len(old) + 1:]) for p in rest):
                return old, root_location(base, old)
            break
    return None


def _split(location: str) -> tuple[str, list[str]]:
    """``scheme://authority`` (empty for a bare path) and the path's parts."""
    scheme = scheme_of(location)
    if scheme is None:
        return "", location.strip("/").split("/")
    authority, _, path = location[len(scheme) + 3:].partition("/")
    return location[:len(scheme) + 3 + len(authority)], path.strip("/").split("/")


def _exists(fs: FileSystem, path: str) -> bool:
    try:
        return fs.exists(path)
    except CheckpointError:
        return False  # a directory that cannot be read: not found there


def root_location(fs: FileSystem, like: str) -> str:
    """Where the root of ``fs`` is, as a ``--path-map`` TO for the location ``like``: its local path, else its URI
    in the scheme of ``like`` (``s3a://`` for ``s3://``: one store, spelled as Spark logged)."""
    local = fs.os_path()
    if local is not None:
        return local.rstrip("/") or "/"
    uri, own, other = fs.uri().rstrip("/"), scheme_of(fs.uri()), scheme_of(like)
    return f"{other}{uri[len(own):]}" if own and other and own != other else uri


def parent_location(location: str) -> str | None:
    """The directory holding ``location`` (a bare path or a URI), None at the top of its store."""
    head, parts = _split(location)
    if parts == [""]:
        return None
    return f"{head}/{'/'.join(parts[:-1])}" if len(parts) > 1 else (head or "/")


def moved_bases(fs: FileSystem) -> list[FileSystem]:
    """Where files that moved with the checkpoint on ``fs`` are looked for: its parent and the parent's parent."""
    up = fs.parent()
    return [] if up is None else [up] + [b for b in [up.parent()] if b is not None]


LISTED_FROM = 8
"""How many files of one directory are looked up before its listing (one call) is cheaper."""


def store_top(fs: FileSystem) -> FileSystem:
    """The top of the store ``fs`` is on (``/``, a bucket, a container): where its absolute paths start."""
    while (up := fs.parent()) is not None:
        fs = up
    return fs


def holding(home: FileSystem, location: str) -> tuple[FileSystem, str] | None:
    """The top of the store holding ``location`` and its path there: a bare absolute path is on the store of ``home``
    (the checkpoint's file system), a ``file:`` URI on the local disk, another URI on a store of the kind of
    ``home`` (:meth:`~.fs.FileSystem.reach`); None for anything else (not knowable here)."""
    return Stores(home).holding(location)


class Stores:
    """:func:`holding` for many locations, the tops of the stores found once."""

    def __init__(self, home: FileSystem) -> None:
        self.home = home
        self._tops: dict[str, FileSystem] = {}

    def _top(self, which: str) -> FileSystem:
        if which not in self._tops:
            self._tops[which] = store_top(self.home) if which == "home" else open_fs("/")
        return self._tops[which]

    def holding(self, location: str) -> tuple[FileSystem, str] | None:
        if scheme_of(location) is None and not location.startswith("file:"):
            return (self._top("home"), location.strip("/")) if location.startswith("/") else None
        path = local_path(location)
        if path is not None:
            return (self._top("local"), path.strip("/")) if path.startswith("/") else None
        return self.home.reach(location)


def present_files(home: FileSystem, locations: Iterable[str]) -> dict[str, bool]:
    """Whether each of ``locations`` (logged input or output files, escapes decoded: bare absolute paths, taken to be on
    the store of ``home``, the checkpoint's file system; ``file:`` URIs; URIs of the store ``home`` is on) is there,
    asked through :class:`~.fs.FileSystem`: a look-up per file, or one listing of a directory holding more than
    :data:`LISTED_FROM` of them. Other locations, and those whose directory cannot be read, are left out
    (unknown)."""
    stores: dict[str, FileSystem] = {}
    wanted: dict[tuple[str, str], dict[str, list[str]]] = {}
    resolve = Stores(home)
    for loc in locations:
        found = resolve.holding(loc)
        if found is None:
            continue
        store, path = found
        stores.setdefault(store.uri(), store)
        folder, _, name = path.rpartition("/")
        wanted.setdefault((store.uri(), folder), {}).setdefault(name, []).append(loc)
    out: dict[str, bool] = {}
    for (top, folder), names in wanted.items():
        store = stores[top]
        try:
            if len(names) > LISTED_FROM:
                listed = set(store.names(folder))
                there = {name: name in listed for name in names}
            else:
                there = {name: store.exists(posixpath.join(folder, name)) for name in names}
        except CheckpointError:
            continue  # a directory that cannot be read: unknown
        out.update((loc, there[name]) for name, locs in names.items() for loc in locs)
    return out


def _remote_stat(store: Any, path: str) -> tuple[bool | None, int | None]:
    if store is None:
        return None, None
    try:
        info = store.info(path)
    except (CheckpointError, OSError):
        return None, None
    return (False, None) if info is None or info.is_dir else (True, info.size)


def normal_path(path: str) -> str:
    """A decoded URI path as Hadoop's ``Path(URI)`` holds it (``URI.normalize``): repeated slashes collapsed, ``.``
    and ``..`` segments resolved (``/out//a/./b`` is ``/out/a/b``)."""
    if "//" not in path and "/." not in path:
        return path
    collapsed = re.sub("/{2,}", "/", path)
    return posixpath.normpath(collapsed) if collapsed.startswith("/") else collapsed


def entry_location(path: str) -> str:
    """A log entry's path (a URI) as a store path, normalized as Spark's readers take it (``new Path(new URI(path))``):
    ``file:///a/b`` -> ``/a/b``, ``s3a://bk/a`` -> ``bk/a``, ``file:///a//b`` -> ``/a/b``."""
    parts = urlsplit(path)
    if parts.scheme in ("", "file"):
        return normal_path(unquote(parts.path))
    return unquote(parts.netloc) + normal_path(unquote(parts.path))


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
    require_dir(fs, "file sink", "pass the path the query writes to (option 'path' of writeStream, the directory "
                "holding _spark_metadata/)", "file_sink")
    if not fs.exists(SINK_LOG) and not (lost_log and holds_sink_data(fs)):
        raise MissingFileError(
            f"no {SINK_LOG}/ in {fs.uri()}: not the output directory of a file sink",
            hint=f"pass the path the query writes to (option 'path' of writeStream), or omit {arg('file_sink')}", param="file_sink",
        )
    return fs


def holds_sink_data(fs: FileSystem) -> bool:
    """Whether a directory holds what a file sink writes: ``part-*`` data files or ``key=value`` partition directories."""
    return any(name.startswith("part-") or ("=" in name and not name.startswith((".", "_"))) for name in fs.names(""))
