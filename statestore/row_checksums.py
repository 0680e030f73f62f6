"""State rows written with ``spark.sql.streaming.stateStore.rowChecksum.enabled`` (Spark 4.1+):
the checksum framing Spark's ``KeyValueChecksumEncoder`` adds, taken off so the rows decode as usual.

* HDFS provider: each value is ``int checksum`` + the row (``encodeSingleValueRowWithChecksum``);
  a deleted key (value size -1) is ``int checksum`` + the key row (``encodeKeyRowWithChecksum``).
* RocksDB provider: each value is ``int checksum, int size, value bytes``
  (``encodeValueRowWithChecksum``), merged list elements joined by ``,``; keys have no checksum.

Ints are little-endian (``Platform.putInt``). The checksum (CRC32C of key and value) is not verified
here: Spark's reader verifies it, and ``wmcheck check`` judges the files.
"""
from __future__ import annotations

import struct

from wmcheck.checkpoint.errors import MalformedFileError

CHECKSUM_BYTES = 4
_SIZE = struct.Struct("<i").unpack_from
_DELIMITER = 0x2C
_HINT = "the state file is truncated or damaged: wmcheck check CKPT"


def without_checksum(row: bytes) -> bytes:
    """An HDFS provider value, or deleted key, without its checksum."""
    return row[CHECKSUM_BYTES:]


def without_checksums(value: bytes, path: str) -> bytes:
    """A RocksDB value (one or more merged elements) as Spark stores it without checksums."""
    parts, pos, end = [], 0, len(value)
    while pos < end:
        if pos + 2 * CHECKSUM_BYTES > end:
            raise MalformedFileError(f"expected a checksum and a size, {end - pos} bytes left in a value", path=path,
                                     hint=_HINT)
        (size,) = _SIZE(value, pos + CHECKSUM_BYTES)
        start = pos + 2 * CHECKSUM_BYTES
        if size < 0 or start + size > end:
            raise MalformedFileError(f"expected {size} bytes of a checksummed value, found {end - start}", path=path,
                                     hint=_HINT)
        parts.append(value[start:start + size])
        pos = start + size
        if pos < end and value[pos] == _DELIMITER:
            pos += 1
    return b",".join(parts)
