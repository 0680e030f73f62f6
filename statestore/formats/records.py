"""The key/value record streams inside decompressed state files (``DataOutputStream``, big-endian).

* HDFS provider ``V.delta`` / ``V.snapshot`` and RocksDB changelog v1 (and v3 after its header):
  ``int keySize, key, int valueSize, value`` per record; ``valueSize = -1`` deletes the key;
  ``keySize = -1`` ends the stream.
* RocksDB changelog v2 (and v4 after its header): a record type byte (``0x01`` put, ``0x10``
  delete, ``0x11`` merge, ``0x00`` end), then ``int keySize, key`` and ``int valueSize, value``
  (``-1`` for a delete).
* Changelog v2..v4 start with ``writeUTF("v<N>")``; v3 and v4 then ``writeUTF`` the lineage JSON
  (``[{"version":..,"checkpointUniqueId":..}]``). A v1 changelog has no header.
"""
from __future__ import annotations

import json
import struct
from typing import Iterator

from wmcheck.checkpoint.errors import MalformedFileError, arg
from wmcheck.statestore.formats.codecs import Decompressed

PUT, DELETE, MERGE = "put", "delete", "merge"
_TYPES = {0x01: PUT, 0x10: DELETE, 0x11: MERGE}
_INT = struct.Struct(">i").unpack_from
_HINT = "the state file is truncated or damaged: wmcheck check CKPT"
Record = tuple[str, bytes, "bytes | None"]
LineageItem = tuple[int, str]
"""(state version, checkpoint unique id) of one entry of a changelog's lineage."""


def _fail(path: str, at: int, message: str) -> MalformedFileError:
    return MalformedFileError(message + " (decompressed stream)", path=path, byte=at, hint=_HINT)


def _short(data: bytes, path: str, at: int, message: str) -> MalformedFileError:
    """The error of a read past the decompressed bytes: why the file's next unit did not decompress, where it did
    not (Spark's reader fails there, asking for those bytes), else that the stream ends."""
    if isinstance(data, Decompressed) and data.error is not None:
        return data.error
    return _fail(path, at, message)


def _take(data: bytes, pos: int, size: int, what: str, path: str) -> bytes:
    if size < 0:
        raise _fail(path, pos, f"expected {size} bytes of {what}, found {len(data) - pos}")
    if pos + size > len(data):
        raise _short(data, path, pos, f"expected {size} bytes of {what}, found {len(data) - pos}")
    return data[pos:pos + size]


def _int(data: bytes, pos: int, what: str, path: str) -> int:
    if pos + 4 > len(data):
        raise _short(data, path, pos, f"expected the 4-byte {what}, the stream ends")
    return _INT(data, pos)[0]


def sized_records(data: bytes, path: str, pos: int = 0) -> Iterator[Record]:
    """Records of a delta, snapshot, or v1/v3 changelog body (the checks of :func:`_int` and :func:`_take`
    written out: a call per field would double the time per record)."""
    end = len(data)
    while True:
        if pos + 4 > end:
            raise _short(data, path, pos, "expected the 4-byte key size, the stream ends")
        key_size = _INT(data, pos)[0]
        if key_size == -1:
            return
        pos += 4
        if key_size < 0 or pos + key_size > end:
            message = f"expected {key_size} bytes of a key, found {end - pos}"
            raise _fail(path, pos, message) if key_size < 0 else _short(data, path, pos, message)
        key = data[pos:pos + key_size]
        pos += key_size
        if pos + 4 > end:
            raise _short(data, path, pos, "expected the 4-byte value size, the stream ends")
        value_size = _INT(data, pos)[0]
        pos += 4
        if value_size < 0:
            yield DELETE, key, None
            continue
        if pos + value_size > end:
            raise _short(data, path, pos, f"expected {value_size} bytes of a value, found {end - pos}")
        yield PUT, key, data[pos:pos + value_size]
        pos += value_size


def typed_records(data: bytes, path: str, pos: int = 0) -> Iterator[Record]:
    """Records of a v2/v4 changelog body."""
    while True:
        if pos >= len(data):
            raise _short(data, path, pos, "expected a record type byte, the stream ends")
        kind = _TYPES.get(data[pos])
        if data[pos] == 0:
            return
        if kind is None:
            raise _fail(path, pos, f"expected a record type 0x00, 0x01, 0x10 or 0x11, found {data[pos]:#04x}")
        key_size = _int(data, pos + 1, "key size", path)
        key = _take(data, pos + 5, key_size, "a key", path)
        pos += 5 + key_size
        value_size = _int(data, pos, "value size", path)
        pos += 4
        if kind == DELETE:
            yield DELETE, key, None
            continue
        yield kind, key, _take(data, pos, value_size, "a value", path)
        pos += value_size


def _utf(data: bytes, pos: int) -> tuple[str, int] | None:
    """A ``writeUTF`` string at ``pos``; None where there is none (a v1 changelog's first record); where it runs past
    decompressed bytes cut by a unit that did not decompress, that unit's error."""
    if pos + 2 > len(data):
        _cut(data)
        return None
    size = struct.unpack_from(">H", data, pos)[0]
    raw = data[pos + 2:pos + 2 + size]
    if len(raw) < size:
        _cut(data)
    try:
        return raw.decode("utf-8"), pos + 2 + size
    except UnicodeDecodeError:
        return None


def _cut(data: bytes) -> None:
    """Raise the error of the unit that cut the decompressed bytes, if one did."""
    if isinstance(data, Decompressed) and data.error is not None:
        raise data.error


def _header(data: bytes, path: str) -> tuple[int, str | None, int]:
    """(changelog version, lineage JSON or None, where the records start)."""
    head = _utf(data, 0)
    version = 1
    if head and head[0].startswith("v") and head[0][1:].isdigit():
        version = int(head[0][1:])
    if version == 1:
        return 1, None, 0
    if version not in (2, 3, 4):
        raise MalformedFileError(f"changelog version v{version} is not known (Spark writes v1..v4)", path=path, byte=0,
                                 hint=f"upgrade wmcheck, or use {arg('engine', 'spark')}")
    assert head is not None
    pos, lineage = head[1], None
    if version >= 3:
        found = _utf(data, pos)
        if found is None:
            raise _fail(path, pos, "expected the lineage JSON after the version")
        lineage, pos = found
    return version, lineage, pos


def changelog_records(data: bytes, path: str) -> Iterator[Record]:
    """The records of a RocksDB changelog of any version (Spark's ``StateStoreChangelogReaderFactory``:
    a first ``writeUTF`` that is not ``v<N>`` means version 1)."""
    version, _, pos = _header(data, path)
    if version == 1:
        return sized_records(data, path)
    return sized_records(data, path, pos) if version == 3 else typed_records(data, path, pos)


def changelog_lineage(data: bytes, path: str) -> tuple[LineageItem, ...]:
    """The lineage a v3/v4 changelog records (checkpoint format 2: the versions and unique ids from the full copy
    its load started from up to the version before its own, ``[{"version":..,"checkpointUniqueId":..}]``); empty
    for v1/v2. ``data``: the decompressed stream, at least its header."""
    _, text, _ = _header(data, path)
    if text is None:
        return ()
    try:
        return tuple((int(i["version"]), str(i["checkpointUniqueId"])) for i in json.loads(text))
    except (ValueError, KeyError, TypeError):
        raise _fail(path, 2, "expected the lineage as JSON [{\"version\":..,\"checkpointUniqueId\":..}]") from None
