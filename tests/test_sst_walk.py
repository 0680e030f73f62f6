"""The C walk of RocksDB data blocks (statestore/rocksdb/sst_walk.c) against the NumPy reader it stands in for: the same
runs, field by field, on every table file the fixtures hold and on tables RocksDB wrote with every restart interval,
block size and compression; and every block the NumPy reader refuses left to it (the C walk declines, the reader's
own error is raised)."""
from __future__ import annotations

import glob
import os
import random
import struct

import numpy as np
import pytest

from wmcheck.statestore.rocksdb import sst_columns
from wmcheck.statestore.rocksdb.sst import inflate, verified
from wmcheck.statestore.rocksdb.sst_columns import PAD, UnreadBlock, open_table

from conftest import FIXTURES
from rocksdb_tables import write_tables

NATIVE = sst_columns.NATIVE
pytestmark = pytest.mark.skipif(NATIVE is None and not os.environ.get("CI"), reason="the C walk is not built here")


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def _block(entries: list[tuple[bytes, bytes]], interval: int, shared: dict[int, int] | None = None,
           value_length: dict[int, int] | None = None) -> bytes:
    """A data block of ``entries`` (internal key, value), a restart point every ``interval`` entries, each key sharing
    its common prefix with the key before (``shared``, ``value_length``: entry -> the length written instead)."""
    out, restarts, before = bytearray(), [], b""
    for i, (key, value) in enumerate(entries):
        common = 0
        if i % interval:
            while common < min(len(key), len(before)) and key[common] == before[common]:
                common += 1
        else:
            restarts.append(len(out))
        common = (shared or {}).get(i, common)
        size = (value_length or {}).get(i, len(value))
        out += _varint(common) + _varint(len(key) - common) + _varint(size) + key[common:] + value
        before = key
    return bytes(out) + b"".join(struct.pack("<I", r) for r in restarts) + struct.pack("<I", len(restarts))


def _internal(user: bytes, sequence: int, kind: int = 1) -> bytes:
    return user + struct.pack("<Q", sequence << 8 | kind)


def _entries(rng: random.Random, n: int) -> list[tuple[bytes, bytes]]:
    users = sorted(rng.choice([b"id-%d" % rng.randrange(10 ** 6), bytes(rng.randrange(3)), b"k" * rng.randrange(1, 40)])
                   for _ in range(n))
    return [(_internal(u, n - i, rng.choice([0, 1, 7])), bytes(rng.randrange(9))) for i, u in enumerate(users)]


def _both(blocks: list[bytes]):
    """``_run`` of ``blocks`` through the C walk and through the NumPy reader (or the error each raises)."""
    out = []
    for native in (NATIVE, None):
        sst_columns.NATIVE = native
        try:
            out.append(sst_columns._run(blocks, 0))
        except UnreadBlock as exc:
            out.append(exc.problem)
        finally:
            sst_columns.NATIVE = NATIVE
    return out


def _declined(blocks: list[bytes]) -> bool:
    lengths = np.fromiter(map(len, blocks), np.int64, len(blocks))
    return NATIVE.scan(b"".join([*blocks, bytes(PAD)]), np.cumsum(lengths) - lengths, lengths) is None


def _same(native, numpy) -> None:
    """Two runs alike: every field, and each key's bytes (the bytes after a key in its row are nobody's)."""
    for name in ("key_lengths", "repeats", "values", "value_starts", "value_ends", "sequences", "kinds"):
        assert np.array_equal(getattr(native, name), getattr(numpy, name)) if name != "values" else native.values == numpy.values, name
    assert native.keys.shape == numpy.keys.shape
    assert [native.key(i) for i in range(len(native))] == [numpy.key(i) for i in range(len(numpy))]


def _runs(data: bytes, rows: int) -> list[list[bytes]]:
    """The inflated blocks of each run of a table file, as :meth:`wmcheck.statestore.rocksdb.sst_columns.Table.runs` groups them."""
    blocks, _ = verified(data)
    table = open_table(data, blocks) if blocks else None
    if table is None:
        return []
    per_run = max(1, rows * len(table.handles) // max(table.entries, 1))
    inflated = [inflate(data[o:o + n], data[o + n]) for o, n in table.handles]
    return [inflated[i:i + per_run] for i in range(0, len(inflated), per_run)]


def test_every_fixture_table_reads_alike():
    files = sorted(glob.glob(str(FIXTURES / "**" / "*.sst"), recursive=True))
    assert len(files) > 50
    for path in files:
        for rows in (7, 4096):
            for blocks in _runs(open(path, "rb").read(), rows):
                assert not _declined(blocks), path
                _same(*_both(blocks))


@pytest.mark.parametrize("seed", range(12))
def test_tables_rocksdb_wrote_read_alike(tmp_path, seed):
    """Restart intervals 1, 2 and 16, blocks of 128 bytes and 4 KiB, every compression, deletes, a key's older
    versions kept by a snapshot, keys extending others by zero bytes (``rocksdb_tables``)."""
    write_tables(str(tmp_path / "db"), seed)
    for path in sorted(glob.glob(str(tmp_path / "db" / "*.sst"))):
        for rows in (3, 50, 4096):
            for blocks in _runs(open(path, "rb").read(), rows):
                _same(*_both(blocks))


@pytest.mark.parametrize("seed", range(20))
def test_built_blocks_read_alike(seed):
    """Blocks built here: empty user keys, repeated keys at and inside restart intervals, every interval length."""
    rng = random.Random(seed)
    entries = _entries(rng, rng.randrange(1, 300))
    repeated = [e for e in entries for _ in range(rng.choice([1, 1, 2]))]
    edges = [0, *sorted(rng.sample(range(1, len(repeated)), min(3, len(repeated) - 1))), len(repeated)]
    blocks = [_block(repeated[a:b], rng.choice([1, 2, 3, 16])) for a, b in zip(edges, edges[1:])]
    native, numpy = _both(blocks)
    _same(native, numpy)
    users = [key[:-8] for key, _ in repeated]
    assert native.repeats.tolist() == [False] + [a == b for a, b in zip(users, users[1:])]


def _broken(kind: str) -> list[bytes]:
    entries = [(_internal(b"key-%03d" % i, 100 - i), b"v" * (i % 5)) for i in range(40)]
    good = _block(entries, 16)
    if kind == "short block":
        return [good, b"\x00\x00\x00"]
    if kind == "no restart point":
        return [good[:-4] + struct.pack("<I", 0)]
    if kind == "restarts out of order":
        count = struct.unpack("<I", good[-4:])[0]
        restarts = list(struct.unpack(f"<{count}I", good[-4 - 4 * count:-4]))
        restarts[1], restarts[2] = restarts[2], restarts[1]
        return [good[:-4 - 4 * count] + struct.pack(f"<{count}I", *restarts) + good[-4:]]
    if kind == "value past its interval":  # the last value of the first interval ends inside the second
        return [_block(entries, 16, value_length={15: len(entries[15][1]) + 30})]
    if kind == "interval starting with a shared key":
        return [_block(entries, 16, {16: 2})]
    if kind == "key shorter than 8 bytes":
        return [_block([(b"abc", b"v")], 16)]
    if kind == "sharing more than the key before":
        return [_block([(bytes(8), b""), (b"abcdefghij", b"")], 16, {1: 9})]
    assert kind == "varint of 10 bytes"
    return [bytes([0x80] * 9 + [0]) + _varint(8) + _varint(0) + bytes(8) + struct.pack("<II", 0, 1)]


@pytest.mark.parametrize("kind, problem", [
    ("short block", "expected a data block of at least 4 bytes"),
    ("no restart point", "expected a data block's restart points inside it"),
    ("restarts out of order", "expected a data block's restart points in order"),
    ("value past its interval", "expected a data block's entries to end where the next restart point begins"),
    ("interval starting with a shared key", "expected a data block's entries to end where the next restart point begins"),
    ("key shorter than 8 bytes", "expected internal keys of at least 8 bytes sharing no more than the key before"),
    ("sharing more than the key before", "expected internal keys of at least 8 bytes sharing no more than the key before"),
    ("varint of 10 bytes", None),
])
def test_blocks_the_reader_refuses_are_left_to_it(kind, problem):
    """The C walk declines every block the NumPy reader refuses (and a varint longer than it reads), so the reader's
    own error is raised: the same with and without the C walk."""
    blocks = _broken(kind)
    assert _declined(blocks)
    native, numpy = _both(blocks)
    if problem is None:
        _same(native, numpy)
    else:
        assert native == numpy == problem
