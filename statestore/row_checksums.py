"""State rows written with ``spark.sql.streaming.stateStore.rowChecksum.enabled`` (Spark 4.1+):
the checksum framing Spark's ``KeyValueChecksumEncoder`` adds, taken off so the rows decode as usual.

* HDFS provider: each value is ``int checksum`` + the row (``encodeSingleValueRowWithChecksum``);
  a deleted key (value size -1) is ``int checksum`` + the key row (``encodeKeyRowWithChecksum``).
* RocksDB provider: each value is ``int checksum, int size, value bytes``
  (``encodeValueRowWithChecksum``), list elements as :mod:`.list_frames` splits them; keys have no
  checksum.

Ints are little-endian (``Platform.putInt``). The checksum (CRC32C of key and value) is not verified
here: Spark's reader verifies it, and ``wmcheck check`` judges the files.
"""
from __future__ import annotations

from .list_frames import frames

CHECKSUM_BYTES = 4


def without_checksum(row: bytes) -> bytes:
    """An HDFS provider value, or deleted key, without its checksum."""
    return row[CHECKSUM_BYTES:]


def without_checksums(value: bytes, path: str) -> bytes:
    """A RocksDB value (one or more merged elements) as Spark stores it without checksums."""
    return b",".join(value[start:end] for start, end in frames(value, 2 * CHECKSUM_BYTES, path))
