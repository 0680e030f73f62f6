"""The keys a load holds at or before a bound: window ends read from fixture key rows, a snapshot's table entries
resolved by sequence number, increments applied in order."""
from __future__ import annotations

from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.statestore.formats.codecs import decompress
from wmcheck.statestore.formats.records import DELETE, PUT, sized_records
from wmcheck.statestore.formats.schema import StructField, StructType
from wmcheck.statestore.keys.stale import (
    Change,
    FileChanges,
    event_time_reader,
    record_changes,
    stale_keys,
    table_changes,
)
from wmcheck.statestore.rocksdb.sst import TableEntry, read_whole

from restart_oracle import FIXTURES

HDFS = FIXTURES / "agg_window_hdfs" / "checkpoint"
END_US = 1_704_067_280_000_000  # 2024-01-01T00:01:20Z: the window state/0/2/13.delta removes


def key_schema() -> StructType:
    schema = open_checkpoint(str(HDFS)).store_schema(0, "default")
    assert schema is not None
    return schema.key_schema


def records(path: str) -> list:
    data = (HDFS / path).read_bytes()
    return list(sized_records(decompress(data, "lz4", path), path))


def test_the_window_end_is_read_from_a_key_row_as_spark_compares_it():
    event = event_time_reader(key_schema(), ("window", "end"))
    assert event is not None
    [(kind, key, _)] = records("state/0/2/13.delta")
    assert kind == DELETE and event(key, 0) == END_US
    assert event_time_reader(key_schema(), ("id",)) is None  # a string: not a time
    assert event_time_reader(key_schema(), ("window", "nothing")) is None


def test_a_null_event_time_is_never_at_or_before_the_bound():
    schema = StructType((StructField("ts", "timestamp", True, {}),))
    event = event_time_reader(schema, ("ts",))
    assert event is not None
    null_row = bytes([1]) + bytes(7) + bytes(8)
    assert event(null_row, 0) is None
    assert record_changes([(PUT, null_row, b"")], lambda kind: 0, event, 1 << 62) == FileChanges((), False)


def test_file_changes_keep_the_keys_at_or_before_the_bound_and_whether_any_key_is_removed():
    event = event_time_reader(key_schema(), ("window", "end"))
    assert event is not None
    [(_, key, _)] = records("state/0/2/13.delta")
    assert record_changes(records("state/0/2/13.delta"), lambda kind: 0, event, END_US) == FileChanges(
        (Change(key, END_US, False),), True)
    assert record_changes(records("state/0/2/13.delta"), lambda kind: 0, event, END_US - 1) == FileChanges((), True)
    assert record_changes(records("state/0/2/13.delta"), lambda kind: 0, event, END_US, limit=0) is None


def test_a_snapshot_keeps_the_newest_entry_of_each_key_and_increments_apply_in_order():
    def entry(key: bytes, sequence: int, kind: int) -> TableEntry:
        return TableEntry(b"\x00" + key, sequence, kind, b"")

    def ts_row(us: int) -> bytes:
        return bytes(8) + us.to_bytes(8, "little")

    event = event_time_reader(StructType((StructField("ts", "timestamp", True, {}),)), ("ts",))
    assert event is not None
    a, b, c, late = ts_row(1), ts_row(2), ts_row(3), ts_row(100)
    older = table_changes([entry(a, 5, 1), entry(b, 6, 1), entry(late, 7, 1)], event, 10)
    newer = table_changes([entry(a, 9, 0), entry(b, 4, 0), entry(c, 8, 1)], event, 10)  # b's tombstone is older
    assert older is not None and newer is not None and newer.removes and not older.removes
    assert stale_keys([older, newer], []) == {b: 2, c: 3}
    log = record_changes([(DELETE, b, None), (PUT, a, b"")], lambda kind: 0, event, 10)
    assert log is not None
    assert stale_keys([older, newer], [log]) == {a: 1, c: 3}


def test_a_table_file_is_judged_only_when_read_whole():
    sst = next((FIXTURES / "agg_window_rocksdb/checkpoint/state/0/0/SSTs").glob("000026-*.sst")).read_bytes()
    entries = read_whole(sst, list)
    assert entries is not None and [(e.sequence, e.kind) for e in entries] == [(18, 0), (14, 1), (15, 0), (17, 1), (16, 1)]
    assert read_whole(sst[:-60] + sst[-53:], list) is None  # a block cut out: not read whole
    assert read_whole(b"not a table", list) is None
