"""A source whose input cannot be read again from the checkpoint (Kafka, Delta, a Python data source), replaced for
the re-run batch by the rows it read then, given as files (``inputs``: source id -> directory).

On the scratch copy the source becomes a file source: its offsets in the batch and the one before become
``{"logOffset":1}`` and ``{"logOffset":0}``, and ``sources/<id>/`` a file source log whose batch 1 lists the given
files. In the new query, the ``readStream`` call that made that source is answered by a file stream of the same
schema over those files: the query is built once to see which call made which source (Spark numbers sources in
plan order), then again with the replacement.
"""
from __future__ import annotations

import json
import os
import posixpath
import shutil
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Mapping

from wmcheck.checkpoint.errors import CheckpointError, MissingFileError, arg
from wmcheck.checkpoint.fs import FileSystem, open_fs
from wmcheck.checkpoint.logs.metadata_log import FILE_SOURCE_LOG, OFFSET_LOG
from wmcheck.checkpoint.logs.offsets import parse_offsets, serialize_offsets
from wmcheck.checkpoint.logs.source_offsets import SourceOffset
from wmcheck.checkpoint.records import dataclass
from wmcheck.statestore.spark.compat.methods import replaced
from wmcheck.statestore.spark.compat.params import named
from wmcheck.statestore.spark.compat.plan import relations

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

FORMATS = {"parquet": "parquet", "json": "json", "csv": "csv", "orc": "orc", "avro": "avro", "txt": "text"}
READER_CALLS = ("load", "json", "parquet", "csv", "orc", "text", "table", "xml")
"""``DataStreamReader`` methods that return a streaming DataFrame."""


@dataclass(frozen=True)
class BatchRows:
    """The rows one source read in the batch, as files: their format, locations and modification times."""

    source_id: str
    location: str
    format: str
    files: tuple[tuple[str, int], ...]


def batch_rows(source_id: str, location: str, batch: int, fs_options: Mapping[str, str] | None = None) -> BatchRows:
    """The data files under ``location`` (or ``location/batch_id=<batch>``, as ``wmcheck replay --output`` writes)."""
    fs = open_fs(location, fs_options)
    if fs.info(f"batch_id={batch}") is not None:
        fs = fs.sub(f"batch_id={batch}")
    found = [i for i in fs.walk("") if not any(p.startswith(("_", ".")) for p in i.path.split("/"))]
    kinds = {posixpath.splitext(i.name)[1].lstrip(".") for i in found}
    if not found:
        raise MissingFileError(f"{arg('inputs', f'{source_id}={location}')}: no data files there", param="inputs",
                               hint=f"the directory of the rows source {source_id} read in batch {batch} "
                                    f"(e.g. written by 'wmcheck replay --output DIR --source {source_id}')")
    if len(kinds) != 1 or next(iter(kinds)) not in FORMATS:
        raise CheckpointError(f"{arg('inputs', f'{source_id}={location}')}: expected files of one format "
                              f"({', '.join(sorted(FORMATS))}), found {', '.join(sorted(kinds))}", param="inputs")
    local = fs.uri("").startswith("/")
    files = tuple(((f"file://{fs.uri(i.path)}" if local else fs.uri(i.path)), i.mtime_ms) for i in sorted(found, key=lambda i: i.path))
    return BatchRows(source_id, fs.uri(""), FORMATS[kinds.pop()], files)


def _with_offset(path: str, data: bytes, replaced: Mapping[str, str]) -> bytes:
    seq = parse_offsets(data, path)
    sources = tuple(SourceOffset(s.source_id, replaced[s.source_id]) if s.source_id in replaced else s for s in seq.sources)
    return serialize_offsets(type(seq)(seq.version, seq.metadata, sources))


def _write(fs: FileSystem, path: str, data: bytes) -> None:
    target = fs.uri(path)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    for sidecar in (os.path.join(os.path.dirname(target), f".{os.path.basename(target)}.crc"), f"{target}.crc"):
        if os.path.exists(sidecar):
            os.remove(sidecar)  # the file changes: its old checksum would fail Spark's read
    with open(target, "wb") as out:
        out.write(data)


def replace_in_copy(checkpoint: str, batch: int, rows: Mapping[str, BatchRows]) -> None:
    """Make each replaced source of the scratch copy a file source whose batch ``batch`` reads the given files."""
    fs = open_fs(checkpoint)
    for number, offset in ((batch, '{"logOffset":1}'), (batch - 1, '{"logOffset":0}')):
        path = OFFSET_LOG.path(number)
        if number >= 0 and fs.exists(path):
            _write(fs, path, _with_offset(path, fs.read(path), {sid: offset for sid in rows}))
    for sid, found in rows.items():
        folder = FILE_SOURCE_LOG.folder(sid)
        shutil.rmtree(fs.uri(folder), ignore_errors=True)
        _write(fs, FILE_SOURCE_LOG.path(0, folder), b"v1")
        lines = [json.dumps({"path": uri, "timestamp": mtime, "batchId": 1}, separators=(",", ":")) for uri, mtime in found.files]
        _write(fs, FILE_SOURCE_LOG.path(1, folder), "\n".join(["v1", *lines]).encode("utf-8"))


def _relation(df: "DataFrame") -> str | None:
    """The output attributes of the streaming relation a reader call made (unique to that call)."""
    found = relations(df._jdf.queryExecution().analyzed())
    return found[0] if found else None


def _reader_calls(answer: Callable[[int, Any, str, tuple, dict], "DataFrame"]) -> ContextManager[None]:
    """Route every ``DataStreamReader`` call that returns a DataFrame through ``answer(index, reader, name, args,
    kwargs)`` (``index`` counts the calls) while the user's function builds its query."""
    from pyspark.sql.streaming.readwriter import DataStreamReader

    counter = iter(range(1 << 30))

    def routed(name: str) -> Callable:
        def call(self: Any, *args: Any, **kwargs: Any) -> "DataFrame":
            return answer(next(counter), self, name, args, kwargs)

        return call

    return replaced(DataStreamReader, READER_CALLS, routed)


def build_with(spark: Any, call: Callable[[], Any], rows: Mapping[str, BatchRows], plan_sources: Callable[[Any], list[str]],
               same_reader: bool = False, param: str = "inputs") -> Any:
    """Call the user's function twice: once to see which reader call made which source (``plan_sources`` gives the
    relation of each source id of the built query), then with those calls answered by file streams of ``rows`` (with
    ``same_reader``, by the user's own reader, its format and options, over the rows' location). Errors name
    ``param``."""
    from pyspark.sql.streaming.readwriter import DataStreamReader

    originals = {name: getattr(DataStreamReader, name) for name in READER_CALLS if hasattr(DataStreamReader, name)}
    made: dict[int, tuple[str | None, Any]] = {}

    def record(index: int, reader: Any, name: str, args: tuple, kwargs: dict) -> "DataFrame":
        df = originals[name](reader, *args, **kwargs)
        made[index] = (_relation(df), df)
        return df

    with _reader_calls(record):
        first = call()
    by_relation = {relation: index for index, (relation, _) in made.items()}
    calls: dict[int, BatchRows] = {}
    ids = plan_sources(first)
    for sid, found in rows.items():
        index = by_relation.get(ids[int(sid)]) if int(sid) < len(ids) else None
        if index is None:
            raise CheckpointError(f"{named(param, sid + '=' + found.location)}: the new query has no source {sid} "
                                  f"made by a spark.readStream call (it has {len(ids)} source(s))", param=param)
        calls[index] = found

    def answer(index: int, reader: Any, name: str, args: tuple, kwargs: dict) -> "DataFrame":
        df = originals[name](reader, *args, **kwargs)
        found = calls.get(index)
        if found is None:
            return df
        if same_reader:  # the path is the first argument, or the path keyword (load() may have none: an option)
            return (originals[name](reader, found.location, *args[1:], **kwargs) if args else
                    originals[name](reader, **{**kwargs, "path": found.location}))
        files = spark.readStream.format(found.format).schema(df.schema)
        return originals["load"](files, found.location)

    with _reader_calls(answer):
        return call()
