"""Planning ``wmcheck relocate``: a copied or moved checkpoint names its own files again.

* State schema files: a transformWithState checkpoint names them at its old location (see
  :mod:`..relocation`) and Spark fails to restart it. Every operator metadata file with such a name
  is written again naming the same file in this checkpoint.
* Input and output files (with ``path_map``): the file-source logs (``sources/<i>/``) and the file
  sink's log (``_spark_metadata/``) name every file by absolute URI. After the input moved, Spark
  takes every file at the new place for a new one and processes it again; after the output moved,
  readers of the sink look for its files at the old place. Each log entry under a ``FROM`` prefix is
  written again under ``TO``, in the form Spark itself records (``file:///…`` stays ``file:///…``).

Every rewritten file keeps a valid Hadoop checksum sidecar. Offsets, commits and state stay as they are.
"""
from __future__ import annotations

import json
from typing import Mapping

from wmcheck.checkpoint.logs.file_logs import FileLog, FileLogEntry, parse_file_log, serialize_file_log
from wmcheck.checkpoint.logs.metadata_log import FILE_SOURCE_LOG, MetadataLog

from ..errors import RefusedError, arg
from ..fs import FileSystem, local_path
from ..layout import SINK_LOG
from ..locations import map_location, moved_bases, present_files, spark_location, suggest_path_map
from ..model import Checkpoint
from ..relocation import foreign_references, home_location, relocated_metadata
from .plan import Plan, Root, Step, rewrite_step
from .plan_params import Position, RelocateParams
from .rewind import FileSink


def relocate_uri(uri: str, path_map: Mapping[str, str]) -> str:
    """``uri`` under the first matching ``FROM`` prefix moved to ``TO``, keeping a ``file:///`` form."""
    mapped = map_location(uri, path_map)
    if mapped != uri and uri.startswith("file:///") and mapped.startswith("file:/") and not mapped.startswith("file://"):
        return "file://" + mapped[len("file:"):]
    return mapped


def _mapped_log(log: FileLog, path_map: Mapping[str, str]) -> tuple[FileLog, int]:
    """The log with every entry's path relocated (other fields and their order as read), and how many changed."""
    entries, changed = [], 0
    for entry in log.entries:
        new = relocate_uri(entry.path, path_map)
        if new != entry.path:
            fields = {**json.loads(entry.raw), "path": new}
            entry = FileLogEntry(json.dumps(fields, separators=(",", ":"), ensure_ascii=False), fields, new, entry.batch_id)
            changed += 1
        entries.append(entry)
    return FileLog(log.version, tuple(entries)), changed


def _log_steps(fs: FileSystem, directory: str, root: Root, path_map: Mapping[str, str], phase: str) -> tuple[list[Step], int]:
    """Rewrites of one file log's files whose entries name files under a ``FROM`` prefix."""
    steps, total = [], 0
    for path in MetadataLog.listed(fs, directory).files.values():
        log, changed = _mapped_log(parse_file_log(fs.read(path), path), path_map)
        if changed:
            steps.append(rewrite_step(fs, path, serialize_file_log(log), phase, f"{changed} file path(s) mapped", root))
            total += changed
    return steps, total


def _schema_steps(ckpt: Checkpoint) -> tuple[list[Step], list[str]]:
    """Rewrites of operator metadata naming schema files elsewhere, and the old locations they name."""
    foreign = foreign_references(ckpt)
    for ref in foreign:
        if ref.relative is None:
            raise RefusedError(f"{ref.metadata_path} names a schema file {ref.uri} that is not under state/<op>/_stateSchema/",
                               path=ref.metadata_path, hint="this is not a layout wmcheck knows how to relocate")
        if not ckpt.fs.exists(ref.relative):
            raise RefusedError(f"{ref.metadata_path} names {ref.uri}, and this checkpoint has no {ref.relative}",
                               path=ref.relative, hint=f"copy that file from {ref.uri} into this checkpoint first")
    steps = [rewrite_step(ckpt.fs, path, relocated_metadata(ckpt, path), "state", "state schema file names point at this checkpoint")
             for path in sorted({r.metadata_path for r in foreign})]
    return steps, sorted({r.old_location for r in foreign})


def _logged_files(fs: FileSystem, directory: str) -> set[str]:
    """Every file a file log names (each compact file repeats the ones before)."""
    log = MetadataLog.listed(fs, directory)
    return {entry.path for path in log.files.values() for entry in parse_file_log(fs.read(path), path).entries}


def _missing_files(ckpt: Checkpoint, sink: FileSink | None, path_map: Mapping[str, str]) -> tuple[list[str], int]:
    """The files the file-source and sink logs name (``path_map`` applied) that are not there (a local file by its
    path, another by its URI), and how many files they name that were looked up: local ones and those on the
    checkpoint's kind of store (:func:`~..locations.present_files`, a listing per directory of many)."""
    named = {uri for i in ckpt.source_dirs for uri in _logged_files(ckpt.fs, FILE_SOURCE_LOG.folder(i))}
    if sink is not None:
        named |= {uri for uri in _logged_files(sink.fs, SINK_LOG)}
    there = present_files(ckpt.fs, {spark_location(relocate_uri(uri, path_map)) for uri in named})
    return sorted(local_path(loc) or loc for loc, found in there.items() if not found), len(there)


def _missing_warning(ckpt: Checkpoint, missing: list[str], named: int, with_sink: bool) -> str:
    """Which logged files are missing, and the path map that finds them where the checkpoint now is."""
    head = (f"{len(missing)} of the {named} file(s) the file-source{' and sink' if with_sink else ''} logs name "
            f"are not where the logs say, e.g. {missing[0]}")
    found = suggest_path_map(missing, moved_bases(ckpt.fs))
    if found is None:
        return (f"{head}: moved or deleted (Spark's cleanSource, a retention job); if they moved, "
                f"pass {arg('path_map', 'OLD=NEW')} (wmcheck replay CKPT --plan lists them)")
    return (f"{head}: they are under {found[1]}; relocate them with {arg('path_map', f'{found[0]}={found[1]}')}"
            + (f" (and {arg('file_sink', 'SINK')} for the sink's log)" if not with_sink else ""))


def plan_relocate(ckpt: Checkpoint, *, path_map: Mapping[str, str] | None = None, sink: FileSink | None = None,
                  created_ms: int = 0) -> Plan:
    """The plan that makes the checkpoint (and with ``path_map`` its logged input and output files) name
    where things are now."""
    path_map = dict(path_map or {})
    steps, moved = _schema_steps(ckpt)
    notes = [f"{len(steps)} operator metadata file(s) named schema files under {', '.join(moved)}; they will name "
             f"the same files under {home_location(ckpt, moved[0])}"] if moved else []
    warnings = []
    if path_map:
        logs: list[tuple[FileSystem, str, Root, str]] = [(ckpt.fs, FILE_SOURCE_LOG.folder(i), "checkpoint", "sources")
                                                          for i in ckpt.source_dirs]
        logs += [(sink.fs, SINK_LOG, "sink", "sink")] if sink else []
        mapped = 0
        for fs, directory, root, phase in logs:
            found, count = _log_steps(fs, directory, root, path_map, phase)
            steps += found
            mapped += count
        notes.append(f"{mapped} logged file path(s) under {', '.join(path_map)} will name {', '.join(path_map.values())}")
        if not mapped:
            warnings.append(f"no file-source{' or sink' if sink else ''} log entry names a file under "
                            f"{', '.join(path_map)}: check the FROM prefixes against 'wmcheck replay CKPT --plan'")
    missing, named = _missing_files(ckpt, sink, path_map)
    if missing:
        warnings.append(_missing_warning(ckpt, missing, named, sink is not None))
    elif not steps:
        notes.append(f"every file this checkpoint names is where it says ({named} logged file(s) checked)")
    return Plan(
        command="relocate",
        checkpoint=ckpt.location,
        file_sink=sink.location if sink else None,
        request=RelocateParams(dict(path_map) if path_map else None),
        before=Position(ckpt.last_batch, ckpt.last_committed_batch, watermark_ms=ckpt.watermark_ms,
                        schema_locations=tuple(moved)),
        after=Position(ckpt.last_batch, ckpt.last_committed_batch, next_batch=ckpt.next_batch,
                       watermark_ms=ckpt.watermark_ms, schema_locations=()),
        steps=tuple(steps),
        warnings=tuple(warnings),
        created_ms=created_ms,
        notes=tuple(notes),
    )
