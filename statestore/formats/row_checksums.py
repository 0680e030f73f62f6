"""State rows written with ``spark.sql.streaming.stateStore.rowChecksum.enabled`` (Spark 4.1+):
the checksum framing Spark's ``KeyValueChecksumEncoder`` adds, verified and taken off so the rows
decode as usual.

* HDFS provider: each value is ``int checksum`` + the row (``encodeSingleValueRowWithChecksum``);
  a deleted key (value size -1) is ``int checksum`` + the key row (``encodeKeyRowWithChecksum``).
* RocksDB provider: each value is ``int checksum, int size, value bytes``
  (``encodeValueRowWithChecksum``), list elements as :mod:`wmcheck.statestore.rocksdb.list_frames` splits them; keys have no
  checksum.

Ints are little-endian (``Platform.putInt``). The checksum is CRC32C (``java.util.zip.CRC32C``, no
seed) of the key bytes then the value bytes (``KeyValueChecksum.create``); a deleted key's covers the
key alone. RocksDB's key bytes are the key as stored, column-family prefix included. A mismatch
fails as Spark's reader fails (``STATE_STORE_ROW_CHECKSUM_VERIFICATION_FAILED``).
"""
from __future__ import annotations

import struct

from wmcheck.checkpoint.errors import MalformedFileError
from wmcheck.checkpoint.records import dataclass
from wmcheck.statestore.rocksdb.list_frames import frames

CHECKSUM_BYTES = 4
_CHECKSUM = struct.Struct("<i").unpack_from


@dataclass(frozen=True)
class RowPlace:
    """Where rows come from, for the error a mismatch raises."""

    operator_id: int
    store: str
    partition: int
    version: int
    path: str


def _crc32c(*parts: bytes) -> int:
    """CRC32C of ``parts`` one after the other, as Java's signed int."""
    import google_crc32c

    crc = 0
    for part in parts:
        crc = google_crc32c.extend(crc, part)
    return crc - (1 << 32) if crc >= 1 << 31 else crc


VERIFICATION_FAILED = "row checksum verification failed"
"""How the problem of a row whose checksum does not match starts."""


def _verify(expected: int, place: RowPlace, *parts: bytes) -> None:
    computed = _crc32c(*parts)
    if computed != expected:
        raise MalformedFileError(
            f"{VERIFICATION_FAILED} for stateStore=StateStoreId[ operatorId={place.operator_id}, partitionId="
            f"{place.partition}, storeName={place.store} ] at version {place.version}: the row may be corrupted (expected "
            f"checksum {expected}, computed {computed}; Spark's reader fails with STATE_STORE_ROW_CHECKSUM_VERIFICATION_FAILED)",
            path=place.path, hint="the state files are damaged: restore them from a backup or rewind to a batch before them")


def verified_value(key: bytes, value: bytes, place: RowPlace) -> bytes:
    """An HDFS provider value without its checksum, which must cover ``key`` and the value."""
    row = value[CHECKSUM_BYTES:]
    _verify(_CHECKSUM(value)[0], place, key, row)
    return row


def verified_key(key: bytes, place: RowPlace) -> bytes:
    """An HDFS provider deleted key without its checksum, which must cover the key."""
    row = key[CHECKSUM_BYTES:]
    _verify(_CHECKSUM(key)[0], place, row)
    return row


def verified_values(key: bytes, value: bytes, place: RowPlace) -> bytes:
    """A RocksDB value (one or more merged elements) without checksums, each element's covering
    ``key`` (as stored) and the element."""
    elements = []
    for start, end in frames(value, 2 * CHECKSUM_BYTES, place.path):
        element = value[start:end]
        _verify(_CHECKSUM(value, start - 2 * CHECKSUM_BYTES)[0], place, key, element)
        elements.append(element)
    return b",".join(elements)
