"""Reading ``--progress PATH``: Spark event logs (plain, compressed, rolled) or JSON lines of progress reports.

Spark names an event log after the application and its codec (``local-1700000000000.lz4``,
``app-….zstd``), rolls it by default since 4.0 into ``eventlog_v2_<app>/events_<n>_<app>[.<codec>]``,
and compresses with the streams of ``CompressionCodec``: lz4-java's ``LZ4BlockOutputStream``,
snappy-java's ``SnappyOutputStream`` and zstd-jni's frames. pyarrow's codecs decode their blocks.
"""
from __future__ import annotations

import posixpath
import struct
from typing import Mapping

from wmcheck.checkpoint.errors import CheckpointError, MalformedFileError, MissingFileError, UnsupportedError, arg
from wmcheck.checkpoint.fs import FileSystem, open_fs
from wmcheck.checkpoint.watermarks.progress import (
    BatchProgress,
    EventRecords,
    QueryProgress,
    parse_event_lines,
    query_progress,
)

LZ4_MAGIC = b"LZ4Block"
LZ4_HEADER = struct.Struct("<Biii")  # token (method | level), compressed length, original length, checksum
LZ4_RAW, LZ4_COMPRESSED = 0x10, 0x20
SNAPPY_MAGIC = b"\x82SNAPPY\x00"
SNAPPY_HEADER = 16  # magic, version (int), compatible version (int)
CODECS = ("lz4", "snappy", "zstd", "lzf")
SKIPPED_PREFIXES = (".", "_", "appstatus_")


def _codec_of(name: str) -> str | None:
    """The codec Spark names in the file's extension (``events_1_app.zstd`` -> zstd)."""
    base = name[: -len(".inprogress")] if name.endswith(".inprogress") else name
    ext = base.rsplit(".", 1)[-1] if "." in base else ""
    return ext if ext in CODECS else None


def _lz4_blocks(data: bytes, path: str) -> bytes:
    import pyarrow as pa

    codec, out, pos = pa.Codec("lz4_raw"), [], 0
    while pos + len(LZ4_MAGIC) + LZ4_HEADER.size <= len(data):
        if data[pos:pos + len(LZ4_MAGIC)] != LZ4_MAGIC:
            raise MalformedFileError("expected an LZ4Block header (Spark's lz4 event log codec)", path=path, byte=pos,
                                     hint="the file is not an lz4 event log, or it was cut off")
        token, size, original, _checksum = LZ4_HEADER.unpack_from(data, pos + len(LZ4_MAGIC))
        pos += len(LZ4_MAGIC) + LZ4_HEADER.size
        block = data[pos:pos + size]
        if len(block) < size:
            break  # cut off while being written
        if original:
            out.append(block if token & 0xF0 == LZ4_RAW else codec.decompress(block, decompressed_size=original).to_pybytes())
        pos += size
    return b"".join(out)


def _varint(data: bytes) -> int:
    value = shift = 0
    for byte in data[:5]:
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
    return value


def _snappy_chunks(data: bytes, path: str) -> bytes:
    import pyarrow as pa

    if not data.startswith(SNAPPY_MAGIC):
        raise MalformedFileError("expected snappy-java's stream header (Spark's snappy event log codec)", path=path, byte=0,
                                 hint="the file is not a snappy event log")
    codec, out, pos = pa.Codec("snappy"), [], SNAPPY_HEADER
    while pos + 4 <= len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        chunk = data[pos + 4:pos + 4 + size]
        if len(chunk) < size:
            break
        out.append(codec.decompress(chunk, decompressed_size=_varint(chunk)).to_pybytes())
        pos += 4 + size
    return b"".join(out)


def _zstd_frames(data: bytes, path: str) -> bytes:
    import pyarrow as pa

    try:
        return pa.input_stream(pa.BufferReader(data), compression="zstd").read()
    except (OSError, pa.ArrowException) as exc:
        raise MalformedFileError(f"cannot decompress zstd data ({exc})", path=path,
                                 hint="the file is not a zstd event log, or it was cut off") from None


def decompress(data: bytes, name: str, path: str) -> bytes:
    """The plain text of an event log file named ``name`` (its extension names the codec)."""
    codec = _codec_of(name)
    if codec is None:
        return data
    if codec == "lzf":
        raise UnsupportedError("lzf-compressed event logs are not supported", path=path,
                               hint="set spark.eventLog.compression.codec to zstd, lz4 or snappy")
    return {"lz4": _lz4_blocks, "snappy": _snappy_chunks, "zstd": _zstd_frames}[codec](data, path)


def _files(fs: FileSystem, path: str) -> list[str]:
    """The files under ``path`` that can hold progress: itself, or every log in it and in rolled ``eventlog_v2_*`` dirs."""
    info = fs.info(path)
    if info is None:
        raise MissingFileError(f"{fs.uri(path)} does not exist", hint="pass spark.eventLog.dir, one event log, or a JSON-lines file")
    if not info.is_dir:
        return [path]
    out = []
    for entry in sorted(fs.list_dir(path), key=lambda e: e.name):
        if entry.name.startswith(SKIPPED_PREFIXES) or entry.name.endswith(".crc"):
            continue
        out += _files(fs, entry.path) if entry.is_dir else [entry.path]
    return out


def read_records(location: str, fs_options: Mapping[str, str] | None = None) -> EventRecords:
    """Every progress report and batch plan in a file or directory (any query)."""
    folder, name = posixpath.split(location.rstrip("/"))
    fs = open_fs(folder or ".", fs_options)
    out = EventRecords(())
    for rel in _files(fs, name):
        shown = posixpath.join(folder, rel) if folder else rel
        out += parse_event_lines(decompress(fs.read(rel), posixpath.basename(rel), shown), shown)
    return out


def read_reports(location: str, fs_options: Mapping[str, str] | None = None) -> list[BatchProgress]:
    """Every progress report in a file or directory (any query)."""
    return list(read_records(location, fs_options).reports)


def load_progress(query_id: str | None, location: str, fs_options: Mapping[str, str] | None = None) -> QueryProgress:
    """The reports (and plans) of the checkpoint's query (by id) in ``location``; a clear error when there are none."""
    records = read_records(location, fs_options)
    if query_id is None:
        raise CheckpointError("the checkpoint has no query id (metadata is missing), so progress cannot be matched",
                              hint=f"run without {arg('progress')}", param="progress")
    found = query_progress(query_id, records.reports, records.plans)
    if not found.batches:
        others = sorted({r.query_id for r in records.reports})
        raise CheckpointError(
            f"{location} holds no progress report of query {query_id}"
            + (f" (it has reports of {', '.join(others[:3])}{'...' if len(others) > 3 else ''})" if others else
               " (no QueryProgressEvent and no StreamingQueryProgress line at all)"),
            hint="pass the event log or progress file of this checkpoint's query (spark.eventLog.dir)")
    return found
