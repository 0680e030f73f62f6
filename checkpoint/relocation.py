"""State schema files that operator metadata names outside the checkpoint: a copied or moved checkpoint.

transformWithState records in ``state/<op>/_metadata/v2/<batch>`` the absolute URI of each state
schema file (``<checkpoint>/state/<op>/_stateSchema/<store>/<batch>_<uuid>``). A checkpoint copied
or moved elsewhere keeps naming the old location, and Spark reads the schema from there: the
restarted query and Spark's state reader fail with ``FileNotFoundException`` once it is gone (or,
for a local copy of a remote checkpoint, out of reach). These helpers find such references and
write the metadata again with every reference pointing at this checkpoint's own file.
"""
from __future__ import annotations

import dataclasses
import posixpath
import re

from wmcheck.checkpoint.logs.operator_metadata import (
    OperatorMetadata,
    StoreMetadata,
    parse_operator_metadata,
    serialize_operator_metadata,
)
from wmcheck.checkpoint.records import dataclass

from .errors import CheckpointError
from .fs import LocalFileSystem, local_path
from .locations import holding
from .model import Checkpoint

_TAIL = re.compile(r"/(state/\d+/_stateSchema/[^?#]+)$")
_S3 = ("s3", "s3a", "s3n")


@dataclass(frozen=True)
class SchemaReference:
    """One schema file URI recorded in an operator metadata file."""

    metadata_path: str
    """The operator metadata file, relative to the checkpoint (``state/0/_metadata/v2/4``)."""
    uri: str
    """The URI exactly as recorded."""
    relative: str | None
    """The same file relative to a checkpoint (``state/0/_stateSchema/default/0_<uuid>``); None when
    the URI does not have that shape."""
    here: bool
    """The URI names this checkpoint's own file."""

    @property
    def old_location(self) -> str:
        """The checkpoint location the URI was recorded under (the URI up to ``/state/``)."""
        return self.uri.rsplit("/state/", 1)[0]


def _split_uri(uri: str) -> tuple[str, str]:
    """``(store kind, path)``: local paths and ``file:`` URIs as ``local``, S3 schemes as one ``s3``."""
    local = local_path(uri)
    if local is not None:
        return "local", posixpath.normpath(local)
    scheme, _, rest = uri.partition(":")
    scheme = scheme.lower()
    rest = rest[2:] if rest.startswith("//") else rest
    return ("s3" if scheme in _S3 else scheme), rest.strip("/")


def _home(ckpt: Checkpoint) -> tuple[str, str]:
    return _split_uri(ckpt.location)


def schema_references(ckpt: Checkpoint) -> list[SchemaReference]:
    """Every schema file URI in every operator metadata file (v2 names them; v1 does not)."""
    kind, root = _home(ckpt)
    out = []
    for op in ckpt.state_layout.operators:
        for info in sorted(op.metadata_files, key=lambda f: f.path):
            meta = ckpt.parse(info.path, parse_operator_metadata)
            for uri in (u for store in meta.stores for u in store.schema_files):
                tail = _TAIL.search(_split_uri(uri)[1])
                relative = tail[1] if tail else None
                here = _split_uri(uri) == (kind, posixpath.join(root, relative) if relative else None)
                out.append(SchemaReference(info.path, uri, relative, here))
    return out


def foreign_references(ckpt: Checkpoint) -> list[SchemaReference]:
    """The references that name a file outside this checkpoint."""
    return [r for r in schema_references(ckpt) if not r.here]


def reachable(ckpt: Checkpoint, ref: SchemaReference) -> bool | None:
    """Whether Spark, running where this checkpoint is, finds the recorded file: a file on another kind of store
    than the checkpoint's is taken as out of reach (a local copy of a remote checkpoint); one on the local disk or
    on the checkpoint's kind of store is looked up there (:func:`~.locations.holding`); None where it cannot be
    asked (a directory that cannot be read, a kind of store whose URIs are not resolved here)."""
    if _split_uri(ref.uri)[0] != _home(ckpt)[0]:
        return False
    found = holding(ckpt.fs, ref.uri)
    if found is None:
        return None
    store, path = found
    try:
        info = store.info(path)
    except CheckpointError:
        return None
    return info is not None and not info.is_dir


def home_location(ckpt: Checkpoint, recorded: str) -> str:
    """This checkpoint's location as Spark records it (``file:/…`` for a local one; the ``recorded``
    URI's S3 scheme is kept when both are on S3)."""
    if isinstance(ckpt.fs, LocalFileSystem) or ckpt.location.startswith("file:"):
        return "file:" + _home(ckpt)[1]
    scheme = ckpt.location.split("://", 1)[0]
    recorded_scheme = recorded.split(":", 1)[0].lower()
    if scheme in _S3 and recorded_scheme in _S3:
        scheme = recorded_scheme
    return f"{scheme}://{_home(ckpt)[1]}"


def home_uri(ckpt: Checkpoint, relative: str, recorded: str) -> str:
    """The URI Spark would record for ``relative`` in this checkpoint (see :func:`home_location`)."""
    return f"{home_location(ckpt, recorded)}/{relative}"


def relocated(ckpt: Checkpoint, meta: OperatorMetadata) -> OperatorMetadata:
    """``meta`` with every schema file URI naming this checkpoint's own file (URIs of another shape kept)."""

    def fix(uri: str) -> str:
        tail = _TAIL.search(_split_uri(uri)[1])
        return home_uri(ckpt, tail[1], uri) if tail else uri

    def store(s: StoreMetadata) -> StoreMetadata:
        return dataclasses.replace(
            s,
            schema_file_path=fix(s.schema_file_path) if s.schema_file_path is not None else None,
            schema_file_paths=tuple(fix(u) for u in s.schema_file_paths) if s.schema_file_paths is not None else None,
        )

    return dataclasses.replace(meta, stores=tuple(store(s) for s in meta.stores))


def relocated_metadata(ckpt: Checkpoint, path: str) -> bytes:
    """The operator metadata file at ``path`` written again naming this checkpoint's own schema files."""
    return serialize_operator_metadata(relocated(ckpt, ckpt.parse(path, parse_operator_metadata)))
