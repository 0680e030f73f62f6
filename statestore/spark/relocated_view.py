"""A read-only view of a copied or moved checkpoint, for Spark's state reader.

Spark reads transformWithState schemas from the absolute URIs recorded in operator metadata (see
:mod:`wmcheck.checkpoint.relocation`), so its reader fails on a copy once the original is gone. To
read a local copy without changing it, the reader loads a temporary directory whose entries link to
the checkpoint's own, except the operator metadata files naming schema files elsewhere: those are
written there again, naming the checkpoint's files. The view lasts until the process exits.
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile

from wmcheck.checkpoint.errors import CheckpointError
from wmcheck.checkpoint.fs import LocalFileSystem
from wmcheck.checkpoint.layout import hadoop_sidecar
from wmcheck.checkpoint.model import Checkpoint
from wmcheck.checkpoint.relocation import foreign_references, relocated_metadata

_VIEWS: dict[str, str] = {}


def spark_path(ckpt: Checkpoint) -> str:
    """The checkpoint as a Hadoop path for Spark (``s3://`` becomes ``s3a://``)."""
    location = ckpt.location
    if isinstance(ckpt.fs, LocalFileSystem):
        return location
    return "s3a://" + location.split("://", 1)[1] if location.startswith("s3://") else location


def reader_location(ckpt: Checkpoint) -> str:
    """Where Spark's state reader loads the checkpoint from: the checkpoint itself, or for a copied or
    moved local checkpoint a view of it that names its own schema files."""
    foreign = foreign_references(ckpt)
    if not foreign:
        return spark_path(ckpt)
    if not isinstance(ckpt.fs, LocalFileSystem):
        raise CheckpointError(
            f"{foreign[0].metadata_path} names the state schema file {foreign[0].uri}, outside this checkpoint: "
            "it was copied or moved, and Spark's state reader reads the schema from there",
            path=foreign[0].metadata_path,
            hint="wmcheck relocate CKPT --execute makes it name its own schema files (undoable)")
    if ckpt.location not in _VIEWS:
        rewritten = {r.metadata_path: relocated_metadata(ckpt, r.metadata_path) for r in foreign}
        _VIEWS[ckpt.location] = _build_view(ckpt.location, rewritten)
    return _VIEWS[ckpt.location]


def _build_view(source: str, rewritten: dict[str, bytes]) -> str:
    """A directory mirroring ``source`` with links, but for ``rewritten`` (relative path -> bytes), which
    are written as files without their (now stale) Hadoop checksum sidecars."""
    top = tempfile.mkdtemp(prefix="wmcheck-view-")
    atexit.register(shutil.rmtree, top, True)
    view = os.path.join(top, os.path.basename(source.rstrip("/")) or "checkpoint")
    skipped = {hadoop_sidecar(p) for p in rewritten}
    inner = {"/".join(p.split("/")[:i]) for p in rewritten for i in range(1, p.count("/") + 1)}

    def mirror(rel: str) -> None:
        os.makedirs(os.path.join(view, rel), exist_ok=True)
        for name in os.listdir(os.path.join(source, rel)):
            child = f"{rel}/{name}" if rel else name
            if child in rewritten:
                with open(os.path.join(view, child), "wb") as out:
                    out.write(rewritten[child])
            elif child in inner:
                mirror(child)
            elif child not in skipped:
                os.symlink(os.path.join(source, child), os.path.join(view, child))

    mirror("")
    return view
