"""RocksDB databases written with every table option and write pattern that changes what their table files hold:
the tables the NumPy reader (tests/test_snapshot_rows.py) and the C walk (tests/test_sst_walk.py) are tried on."""
from __future__ import annotations

import random

from rocksdict import BlockBasedOptions, DBCompressionType, Options, Rdict

COMPRESSIONS = {"none": DBCompressionType.none, "lz4": DBCompressionType.lz4, "lz4hc": DBCompressionType.lz4hc,
                "snappy": DBCompressionType.snappy, "zstd": DBCompressionType.zstd}


def _key(rng: random.Random) -> bytes:
    kind = rng.random()
    if kind < 0.2:  # a key and its extensions by zero bytes sort next to each other
        return b"k" + bytes([rng.randrange(4)]) + bytes(rng.randrange(3))
    if kind < 0.6:  # UnsafeRow-like: 8-byte words
        return bytes([0]) + rng.randrange(1 << 20).to_bytes(8, "little") + bytes(rng.randrange(2) * 8)
    return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40)))


def write_tables(path: str, seed: int) -> dict[str, object]:
    rng = random.Random(seed)
    compression = rng.choice(sorted(COMPRESSIONS))
    table = BlockBasedOptions()
    table.set_block_restart_interval(rng.choice([1, 2, 16]))
    table.set_block_size(rng.choice([128, 4096]))
    table.set_format_version(rng.choice([2, 5]))  # Spark's stateStore.rocksdb.formatVersion: 5 by default
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_disable_auto_compactions(True)
    options.set_compression_type(COMPRESSIONS[compression]())
    options.set_block_based_table_factory(table)
    db = Rdict(path, options)
    keys: list[bytes] = []
    held = []
    for round_ in range(rng.randrange(1, 5)):
        for _ in range(rng.randrange(1, 400)):
            if rng.random() < 0.02:
                held.append(db.snapshot())  # the flush keeps the versions a snapshot sees: a key twice in a table
            if keys and rng.random() < 0.25:
                db.delete(rng.choice(keys))
            else:
                key = rng.choice(keys) if keys and rng.random() < 0.3 else _key(rng)
                keys.append(key)
                db.put(key, bytes([round_]) * rng.randrange(0, 30))
        db.flush()
    if rng.random() < 0.2:
        db.compact_range(None, None)
    held.clear()
    db.close()
    return {"compression": compression}
