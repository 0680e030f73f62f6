"""The table files a RocksDB MANIFEST leaves live: as RocksDB lists them, as every Spark-written snapshot's
metadata lists them."""
from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest
from rocksdict import Options, Rdict

from wmcheck.statestore.rocksdb.manifest import BLOCK, live_files, log_records
from wmcheck.statestore.rocksdb.zips import read_snapshot_zip

from conftest import FIXTURES

ZIPS = sorted(FIXTURES.glob("*/checkpoint/state/**/*.zip"))


def manifest(entries: dict[str, bytes]) -> bytes:
    return entries[entries["CURRENT"].decode().strip()]


def test_every_fixture_snapshot_s_manifest_leaves_live_what_its_metadata_lists():
    assert len(ZIPS) > 300
    for path in ZIPS:
        entries, meta = read_snapshot_zip(path.read_bytes(), path.name)
        assert live_files(manifest(entries)) == {int(s.local_name.split(".")[0]): s.size for s in meta.sst_files}, path


def _current(path: Path) -> bytes:
    return (path / (path / "CURRENT").read_text().strip()).read_bytes()


def _listed(db: Rdict) -> dict[int, int]:
    return {int(f["name"].strip("/").split(".")[0]): f["size"] for f in db.live_files()}


@pytest.mark.parametrize("seed", range(6))
def test_rocksdb_s_own_live_files_after_flushes_compactions_and_column_families(tmp_path, seed):
    rng = random.Random(seed)
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_disable_auto_compactions(True)
    db = Rdict(str(tmp_path), options)
    families = {"default": db}
    for step in range(rng.randrange(8, 20)):
        name = rng.choice(sorted(families))
        store = families[name]
        action = rng.random()
        if action < 0.5:
            for _ in range(rng.randrange(1, 300)):
                store.put(b"k%d" % rng.randrange(500), b"v" * rng.randrange(40))
            store.flush()
        elif action < 0.65:
            for _ in range(rng.randrange(1, 50)):
                store.delete(b"k%d" % rng.randrange(500))
            store.flush()
        elif action < 0.8:
            store.compact_range(None, None)
        elif action < 0.92 or name == "default":
            families[f"cf{step}"] = db.create_column_family(f"cf{step}", Options(raw_mode=True))
        else:
            db.drop_column_family(name)
            del families[name]
        assert live_files(_current(tmp_path)) == _listed(db), (seed, step)
    db.close()


def test_records_across_blocks_and_what_no_manifest_holds():
    edit = bytes([3, 7]) * (BLOCK // 2)  # next file number 7, again and again: longer than a block
    header = lambda length, kind: struct.pack("<IHB", 0, length, kind)  # noqa: E731
    first = BLOCK - 7
    data = header(first, 2) + edit[:first] + header(len(edit) - first, 4) + edit[first:]
    assert log_records(data) == [edit] and live_files(data) == {}
    assert log_records(data[:-1]) is None  # the last part cut short
    assert log_records(header(2, 3) + b"\x03\x07") is None  # a middle part without a first
    assert live_files(header(2, 1) + bytes([0x7F, 0])) is None  # a tag RocksDB does not write
    assert live_files(header(3, 1) + bytes([103, 0, 5])) is None  # an added file cut short


def test_a_snapshot_whose_metadata_misses_or_resizes_a_live_table_does_not_open():
    from dataclasses import replace

    from wmcheck.statestore.formats.content import manifest_damage

    path = "state/0/0/12.zip"
    entries, meta = read_snapshot_zip((FIXTURES / "agg_window_rocksdb/checkpoint" / path).read_bytes(), path)
    assert manifest_damage(entries, meta, path) is None
    first, *rest = meta.sst_files
    missing = manifest_damage(entries, replace(meta, sst_files=tuple(rest)), path)
    assert (missing.path, missing.problem) == (path, "its MANIFEST-000022 names table file 000025.sst, which its "
                                               "metadata does not list, so Spark does not copy it: RocksDB fails to "
                                               "open the snapshot")
    resized = manifest_damage(entries, replace(meta, sst_files=(replace(first, size=first.size + 1), *rest)), path)
    assert resized.problem == ("its MANIFEST-000022 records 1336 bytes for table file 000025.sst, which its metadata "
                               "copies from 000025-f1074c13-f7a5-4100-a24a-9aca84e33347.sst (1337 bytes): RocksDB fails "
                               "to open the snapshot")
    assert manifest_damage({**entries, "CURRENT": b"MANIFEST-000099\n"}, meta, path) is None  # no judgement
