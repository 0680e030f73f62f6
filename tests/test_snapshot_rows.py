"""The NumPy reader of RocksDB table files (statestore/rocksdb/sst_columns.py, statestore/rocksdb/snapshot_rows.py) against
RocksDB's own iterator, on databases RocksDB wrote: every table option and write pattern that changes what the
files hold (compressions, restart intervals, tiny blocks, overlapping tables, deletes, a key's older versions
kept by a snapshot, keys that extend others with zero bytes, compaction)."""
from __future__ import annotations

import glob
import os
import random

import pytest
from rocksdict import AccessType, BlockBasedOptions, Options, Rdict

from wmcheck.statestore.rocksdb import sst_columns
from wmcheck.statestore.rocksdb.snapshot_rows import snapshot_rows
from wmcheck.statestore.rocksdb.sst import checked, table_entries, verified
from wmcheck.statestore.rocksdb.sst_columns import open_table, table_puts

from rocksdb_tables import write_tables


def _opened(data: bytes):
    blocks, damage = verified(data)
    assert damage is None
    return open_table(data, blocks) if blocks else None


@pytest.fixture(params=["C walk", "NumPy"])
def walk(request, monkeypatch):
    """Each test run with data blocks walked in C (where built) and with the NumPy reader alone."""
    if request.param == "NumPy":
        monkeypatch.setattr(sst_columns, "NATIVE", None)
    elif sst_columns.NATIVE is None and not os.environ.get("CI"):
        pytest.skip("the C walk is not built here")
    return request.param


@pytest.mark.parametrize("seed", range(40))
def test_tables_read_as_rocksdb_iterates(tmp_path, seed, walk):
    path = str(tmp_path / "db")
    write_tables(path, seed)
    expected = list(Rdict(path, Options(raw_mode=True), access_type=AccessType.read_only()).items())
    tables = [_opened(open(f, "rb").read()) for f in sorted(glob.glob(os.path.join(path, "*.sst")))]
    assert all(t is not None for t in tables)
    got = [(k, v) for keys, values in snapshot_rows([t for t in tables if t is not None], random.Random(seed).choice([3, 50, 4096]))
           for k, v in zip(keys, values)]
    assert got == expected


@pytest.mark.parametrize("change", ["format 6", "range delete", "column family"])
def test_tables_not_read_here_are_left_to_rocksdb(tmp_path, change):
    """A table format past 5 (checksums modified by offset), range deletions and another column family's table:
    None, RocksDB reads them."""
    table = BlockBasedOptions()
    table.set_format_version(6 if change == "format 6" else 5)
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_block_based_table_factory(table)
    db = Rdict(str(tmp_path / "db"), options)
    family = db.create_column_family("other", options) if change == "column family" else db
    for i in range(10):
        family.put(bytes([i]), b"v")
    if change == "range delete":
        db.delete_range(bytes([2]), bytes([5]))
    family.flush()
    db.close()
    (sst,) = glob.glob(str(tmp_path / "db" / "*.sst"))
    assert _opened(open(sst, "rb").read()) is None


@pytest.mark.parametrize("seed", range(0, 40, 4))
def test_a_tables_first_puts_are_those_read_entry_by_entry(tmp_path, seed, walk):
    """A table's first puts (WM058's sample), run by run, are those the entry-by-entry reader finds, at any limit;
    past deletes too (a table that begins with thousands of deletes: an evicting aggregation's)."""
    path = str(tmp_path / "db")
    write_tables(path, seed)
    for sst in sorted(glob.glob(os.path.join(path, "*.sst"))):
        data = open(sst, "rb").read()
        puts = [(e.key, e.value) for e in table_entries(data) if e.kind == 1]
        for limit in (1, 7, 64, len(puts) + 1):
            assert table_puts(checked(data), limit) == puts[:limit]


def test_first_puts_after_many_deletes(tmp_path):
    table = BlockBasedOptions()
    table.set_format_version(5)
    table.set_block_size(256)
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_block_based_table_factory(table)
    db = Rdict(str(tmp_path / "db"), options)
    for i in range(20000):
        db.delete(i.to_bytes(4, "big"))
    db.put((20000).to_bytes(4, "big"), b"kept")
    db.flush()
    db.close()
    (sst,) = glob.glob(str(tmp_path / "db" / "*.sst"))
    assert table_puts(checked(open(sst, "rb").read()), 64) == [((20000).to_bytes(4, "big"), b"kept")]
