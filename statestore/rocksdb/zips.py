"""A RocksDB state snapshot ``V.zip`` read as Spark reads it: entry by entry from the front
(``java.util.zip.ZipInputStream``, ``Utils.unzipFilesFromFile``), then its ``metadata`` entry.

Spark writes the archive with ``ZipOutputStream``: deflated entries followed by a data descriptor.
Reading stops at the first bytes that are not a local file header (the central directory, or fewer
than 30 bytes left), so a file cut after its last entry still loads; a cut or damaged entry fails
(``EOFException``, ``ZipException``). An empty entry other than a RocksDB ``*.log`` fails too
(``STATE_STORE_UNEXPECTED_EMPTY_FILE_IN_ROCKSDB_ZIP``). ``metadata`` is ``v1`` then one JSON object:
``sstFiles`` (``localFileName``, ``dfsSstFileName`` under ``SSTs/``, ``sizeBytes``), ``logFiles``
likewise, and for column families ``columnFamilyMapping`` name -> id.
"""
from __future__ import annotations

import json
import struct
import zlib
from dataclasses import field
from typing import Mapping

from wmcheck.checkpoint.errors import MalformedFileError
from wmcheck.checkpoint.records import dataclass

LOCAL_HEADER = 0x04034B50
DESCRIPTOR = 0x08074B50
STORED, DEFLATED = 0, 8
MAX_ENTRY = 256 << 20
"""RocksDB's own files in a snapshot are small (SSTs are shared): a larger entry is not inflated (a zip bomb)."""
HINT = "the RocksDB snapshot is damaged or incomplete: restore it from a backup (wmcheck undo) or rewind before it"


SST_MAGIC = (0x88E241B785F4CFF7, 0xDB4775248B80FB57, 0x8242229663BF9564)
"""The last 8 bytes of a RocksDB table file: block-based (and its legacy value) or plain; RocksDB checks them when it
opens the snapshot ("Corruption: Bad table magic number")."""


def sst_footer_ok(tail: bytes) -> bool:
    """Whether the last 8 bytes of an SST file are a RocksDB table's magic number."""
    return len(tail) >= 8 and struct.unpack("<Q", tail[-8:])[0] in SST_MAGIC


@dataclass(frozen=True)
class SharedFile:
    """An immutable file a snapshot needs, copied from the store's shared directory."""

    local_name: str
    dfs_name: str
    size: int


@dataclass(frozen=True)
class ZipMetadata:
    """What ``V.zip``'s ``metadata`` says."""

    sst_files: tuple[SharedFile, ...]
    log_files: tuple[SharedFile, ...] = ()
    column_families: Mapping[str, int] = field(default_factory=dict)

    @property
    def local_to_dfs(self) -> dict[str, str]:
        """local file name -> file name under ``SSTs/``."""
        return {f.local_name: f.dfs_name for f in self.sst_files}


def _fail(path: str, at: int, message: str) -> MalformedFileError:
    return MalformedFileError(message, path=path, byte=at, hint=HINT)


def zip_entries(data: bytes, path: str) -> dict[str, bytes]:
    """Every entry of the archive by name, read from the front as ``ZipInputStream`` does."""
    entries: dict[str, bytes] = {}
    pos = 0
    while len(data) - pos >= 30 and struct.unpack_from("<I", data, pos)[0] == LOCAL_HEADER:
        flag, method, _, _, crc, csize, size, name_len, extra_len = struct.unpack_from("<HHHHIIIHH", data, pos + 6)
        if flag & 1:
            raise _fail(path, pos, "expected a zip entry, found an encrypted one (ZipException)")
        start = pos + 30 + name_len + extra_len
        if start > len(data):
            raise _fail(path, pos, "expected a zip entry header, the file ends (EOFException)")
        name = data[pos + 30:pos + 30 + name_len].decode("utf-8", "replace")
        if method == DEFLATED:
            inflater = zlib.decompressobj(-15)
            try:
                body = inflater.decompress(data[start:], MAX_ENTRY)
            except zlib.error as exc:
                raise _fail(path, start, f"expected deflated data of entry {name}, found bytes that do not inflate "
                                         f"({exc}; ZipException)") from None
            if inflater.unconsumed_tail:
                raise _fail(path, start, f"entry {name} inflates to more than {MAX_ENTRY >> 20} MiB: not read")
            if not inflater.eof:
                raise _fail(path, len(data), f"expected the rest of entry {name}, the file ends (EOFException: "
                                             "Unexpected end of ZLIB input stream)")
            end = len(data) - len(inflater.unused_data)
            if flag & 8:
                crc, csize, size, end = _descriptor(data, end, name, path)
        elif method == STORED and not flag & 8:
            end = start + csize
            if csize != size or end > len(data):
                raise _fail(path, start, f"expected {csize} stored bytes of entry {name}, found {len(data) - start} "
                                         "(EOFException)")
            body = data[start:end]
        else:
            raise _fail(path, pos, f"expected a deflated or stored zip entry, found method {method} (ZipException)")
        if len(body) != size or zlib.crc32(body) != crc:
            raise _fail(path, pos, f"entry {name}: invalid entry size or CRC (ZipException)")
        entries[name] = body
        pos = end
    return entries


def _descriptor(data: bytes, at: int, name: str, path: str) -> tuple[int, int, int, int]:
    """(crc, compressed size, size, end) of the data descriptor after a deflated entry."""
    if at + 12 > len(data):
        raise _fail(path, at, f"expected the data descriptor of entry {name}, the file ends (EOFException)")
    first = struct.unpack_from("<I", data, at)[0]
    if first == DESCRIPTOR:
        if at + 16 > len(data):
            raise _fail(path, at, f"expected the data descriptor of entry {name}, the file ends (EOFException)")
        crc, csize, size = struct.unpack_from("<III", data, at + 4)
        return crc, csize, size, at + 16
    crc, csize, size = struct.unpack_from("<III", data, at)
    return crc, csize, size, at + 12


def parse_zip_metadata(data: bytes, path: str) -> ZipMetadata:
    """The ``metadata`` entry of a snapshot (``RocksDBCheckpointMetadata.readFromFile``)."""
    text = data.decode("utf-8", "replace")
    first, _, rest = text.partition("\n")
    if first.strip() != "v1":
        raise MalformedFileError(f"expected the RocksDB checkpoint metadata version v1, found {first[:20]!r}",
                                 path=path, line=1, hint=HINT)
    try:
        doc = json.loads(rest)
        ssts = tuple(SharedFile(str(f["localFileName"]), str(f["dfsSstFileName"]), int(f.get("sizeBytes", -1)))
                     for f in doc.get("sstFiles") or [])
        logs = tuple(SharedFile(str(f["localFileName"]), str(f["dfsLogFileName"]), int(f.get("sizeBytes", -1)))
                     for f in doc.get("logFiles") or [])
        families = {str(k): int(v) for k, v in (doc.get("columnFamilyMapping") or {}).items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        raise MalformedFileError("expected RocksDB checkpoint metadata JSON with sstFiles", path=path, line=2,
                                 hint=HINT) from None
    return ZipMetadata(ssts, logs, families)


def read_snapshot_zip(data: bytes, path: str) -> tuple[dict[str, bytes], ZipMetadata]:
    """The RocksDB files of a snapshot (``metadata`` taken out) and its metadata; MalformedFileError where
    Spark's load fails."""
    entries = zip_entries(data, path)
    if "metadata" not in entries:
        raise MalformedFileError("expected a metadata entry in the zip archive (Spark: the checkpoint metadata file "
                                 "does not exist)", path=path, byte=0, hint=HINT)
    empty = [name for name, body in entries.items() if not body and not name.endswith(".log")]
    if empty:
        raise MalformedFileError(f"entry {empty[0]} is empty (STATE_STORE_UNEXPECTED_EMPTY_FILE_IN_ROCKSDB_ZIP)",
                                 path=path, hint=HINT)
    meta = parse_zip_metadata(entries.pop("metadata"), path)
    return entries, meta
