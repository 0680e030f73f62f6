"""Locations as users write them: plain paths, or URIs pasted as they are (percent-encoded or not)."""
from __future__ import annotations

from urllib.parse import unquote

from wmcheck.checkpoint.records import dataclass

from ..errors import CheckpointError


def scheme_of(location: str) -> str | None:
    """The URI scheme of ``location``, or None for a plain local path."""
    head, sep, _ = location.partition("://")
    return head.lower() if sep and head.isidentifier() else None


def local_path(location: str) -> str | None:
    """The local path of a ``file:`` location or a bare absolute path, None for other schemes."""
    if location.startswith("file:"):
        rest = location[len("file:"):]
        if rest.startswith("//"):
            netloc, _, tail = rest[2:].partition("/")
            return "/" + tail if netloc in ("", "localhost") else None
        return rest
    return location if location.startswith("/") else None


@dataclass(frozen=True)
class Location:
    """A URI split for a store: ``authority`` (bucket, container@account, namenode:port) and ``path`` below it,
    percent-escapes decoded (``%20`` and a literal space mean the same)."""

    scheme: str
    authority: str
    path: str

    @property
    def host(self) -> str:
        """The authority without user info (``container@account.dfs...`` -> ``account.dfs...``)."""
        return self.authority.rpartition("@")[2]


def split_uri(location: str) -> Location:
    """``scheme://authority/path`` into its parts (no validation beyond the shape; no network)."""
    scheme = scheme_of(location) or ""
    rest = location.split("://", 1)[1] if scheme else location
    authority, _, path = rest.partition("/")
    return Location(scheme, unquote(authority), unquote(path).rstrip("/"))


def bucket_location(location: str) -> Location:
    """``scheme://BUCKET/PATH`` of an object store (S3, GCS), split; one without a bucket is refused."""
    loc = split_uri(location)
    if not loc.authority:
        raise CheckpointError(f"no bucket in {location}", hint=f"write {loc.scheme}://BUCKET/PATH")
    return loc


def file_uri_path(location: str) -> str | None:
    """The local path of a ``file:`` URI with escapes decoded (``file:///a%20b`` and ``file:///a b`` -> ``/a b``);
    None when it names another host."""
    path = local_path(location)
    return None if path is None else unquote(path)
