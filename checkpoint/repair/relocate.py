"""Planning ``wmcheck relocate``: point operator metadata at this checkpoint's own schema files.

A copied or moved transformWithState checkpoint names its state schema files at the old location
(see :mod:`..relocation`); Spark then fails to restart it. Every operator metadata file with such a
name is written again (with its Hadoop checksum sidecar) naming the same file in this checkpoint.
Nothing else changes: offsets, commits, state and the schema files themselves stay as they are.
"""
from __future__ import annotations

from ..errors import RefusedError
from ..model import Checkpoint
from ..operator_metadata import parse_operator_metadata, serialize_operator_metadata
from ..relocation import foreign_references, home_uri, relocated
from .plan import Plan, rewrite_step


def plan_relocate(ckpt: Checkpoint, *, created_ms: int = 0) -> Plan:
    """The plan that makes every operator metadata file name this checkpoint's schema files."""
    foreign = foreign_references(ckpt)
    for ref in foreign:
        if ref.relative is None:
            raise RefusedError(f"{ref.metadata_path} names a schema file {ref.uri} that is not under state/<op>/_stateSchema/",
                               path=ref.metadata_path, hint="this is not a layout wmcheck knows how to relocate")
        if not ckpt.fs.exists(ref.relative):
            raise RefusedError(f"{ref.metadata_path} names {ref.uri}, and this checkpoint has no {ref.relative}",
                               path=ref.relative, hint=f"copy that file from {ref.uri} into this checkpoint first")
    paths = sorted({r.metadata_path for r in foreign})
    steps = tuple(
        rewrite_step(ckpt, path, serialize_operator_metadata(relocated(ckpt, ckpt.parse(path, parse_operator_metadata))),
                     "state", "state schema file names point at this checkpoint")
        for path in paths
    )
    moved = sorted({r.uri.rsplit("/state/", 1)[0] for r in foreign})
    state = {"last_batch": ckpt.last_batch, "last_committed_batch": ckpt.last_committed_batch,
             "watermark_ms": ckpt.watermark_ms}
    notes = (f"{len(paths)} operator metadata file(s) named schema files under {', '.join(moved)}; "
             f"they will name the same files under {home_uri(ckpt, 'state', foreign[0].uri)[:-len('/state')]}",) if foreign else (
        "every operator metadata file already names this checkpoint's own schema files",)
    return Plan(
        command="relocate",
        checkpoint=ckpt.location,
        file_sink=None,
        request={},
        before={**state, "schema_locations": moved},
        after={**state, "next_batch": ckpt.next_batch, "schema_locations": []},
        steps=steps,
        created_ms=created_ms,
        notes=notes,
    )
