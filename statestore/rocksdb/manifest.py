"""The table files a RocksDB snapshot's ``MANIFEST`` leaves live, which RocksDB opens when Spark loads it.

A MANIFEST is a RocksDB log (32 KiB blocks of records: a masked CRC32C, a little-endian 2-byte length, a type:
1 whole, 2 first, 3 middle, 4 last; 5-8 the same with a 4-byte log number after the type) of ``VersionEdit``s:
varint tags, each followed by its fields (``db/version_edit.h``). Applied in order, the edits' added files (tags
7, 100, 102, 103) less their deleted ones (6), per column family (200 selects one, 202 drops it), are the files
``DB::Open`` opens, each at the size the MANIFEST records (max_open_files -1, Spark's default: all at open).
A record or a tag this reader does not know gives None: no judgement.
"""
from __future__ import annotations

import struct

from wmcheck.statestore.rocksdb.sst import varint

BLOCK = 32 * 1024
_SLICE = object()
_LEVEL_NUMBER_SIZE = ("u32", "u64", "u64")
FIELDS: dict[int, tuple[object, ...]] = {
    1: (_SLICE,), 2: ("u64",), 3: ("u64",), 4: ("u64",), 5: ("u32", _SLICE), 9: ("u64",), 10: ("u64",),
    200: ("u32",), 201: (_SLICE,), 202: (), 203: ("u32",), 300: ("u32",),
}
"""Tags whose fields are skipped: comparator, log and file numbers, sequence, compact cursor, column family
select / add / drop / max, atomic group."""
SAFE_TO_IGNORE = 1 << 13
"""Tags with this bit (a database id, WAL edits...) carry one length-prefixed field RocksDB may skip."""


def log_records(data: bytes) -> list[bytes] | None:
    """The records of a RocksDB log file, or None where it is not one."""
    out: list[bytes] = []
    parts: list[bytes] | None = None
    for start in range(0, len(data), BLOCK):
        pos, end = start, min(start + BLOCK, len(data))
        while end - pos >= 7:
            _, length, kind = struct.unpack_from("<IHB", data, pos)
            if kind == 0 and length == 0:
                break  # the block's zero-filled trailer
            header = 11 if 5 <= kind <= 8 else 7
            if not 1 <= kind <= 8 or pos + header + length > end:
                return None
            payload = data[pos + header:pos + header + length]
            pos += header + length
            kind = kind - 4 if kind > 4 else kind
            if kind == 1 and parts is None:
                out.append(payload)
            elif kind == 2 and parts is None:
                parts = [payload]
            elif kind in (3, 4) and parts is not None:
                parts.append(payload)
                if kind == 4:
                    out.append(b"".join(parts))
                    parts = None
            else:
                return None
    return out


def _skip(edit: bytes, pos: int, fields: tuple[object, ...]) -> int:
    for kind in fields:
        size, pos = varint(edit, pos, len(edit))
        if kind is _SLICE:
            pos += size
    if pos > len(edit):
        raise ValueError("past the edit")
    return pos


def _new_file(edit: bytes, pos: int, tag: int) -> tuple[int, int, int]:
    """(number, size, position after) of an added file's fields."""
    end = len(edit)
    _, pos = varint(edit, pos, end)  # level
    number, pos = varint(edit, pos, end)
    if tag == 102:
        pos = varint(edit, pos, end)[1]  # path id
    size, pos = varint(edit, pos, end)
    pos = _skip(edit, pos, (_SLICE, _SLICE) + (("u64", "u64") if tag != 7 else ()))  # keys, sequence numbers
    while tag == 103:  # custom fields up to kTerminate
        custom, pos = varint(edit, pos, end)
        if custom == 1:
            break
        pos = _skip(edit, pos, (_SLICE,))
    return number, size, pos


def live_files(data: bytes) -> dict[int, int] | None:
    """File number -> size of every table file the MANIFEST ``data`` leaves live, None where this reader cannot
    tell (not a log, an unknown tag, blob files)."""
    records = log_records(data)
    if records is None:
        return None
    families: dict[int, dict[int, int]] = {0: {}}
    try:
        for edit in records:
            family, pos, added, deleted, dropped = 0, 0, {}, set(), False
            while pos < len(edit):
                tag, pos = varint(edit, pos, len(edit))
                if tag in (7, 100, 102, 103):
                    number, size, pos = _new_file(edit, pos, tag)
                    added[number] = size
                elif tag == 6:
                    pos = varint(edit, pos, len(edit))[1]
                    number, pos = varint(edit, pos, len(edit))
                    deleted.add(number)
                elif tag in FIELDS:
                    family = varint(edit, pos, len(edit))[0] if tag == 200 else family
                    dropped |= tag == 202
                    pos = _skip(edit, pos, FIELDS[tag])
                elif tag & SAFE_TO_IGNORE:
                    pos = _skip(edit, pos, (_SLICE,))
                else:
                    return None
            files = families.setdefault(family, {})
            for number in deleted:
                files.pop(number, None)
            files.update(added)
            if dropped:
                del families[family]
    except (ValueError, IndexError):
        return None
    return {number: size for files in families.values() for number, size in files.items()}
