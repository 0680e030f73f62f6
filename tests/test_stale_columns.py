"""The NumPy reading of the keys at or before a bound (statestore/keys/stale_columns.py) against the reference, entry by
entry (statestore/keys/stale.py): every state file WM062 reads in the fixtures, at several bounds, and WM062's
findings with and without the fast path on the fixtures and the checkpoints it reports."""
from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from wmcheck.checkpoint.checks import state_reads as state
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.validate import check_checkpoint
from wmcheck.statestore.formats import content
from wmcheck.statestore.formats.records import DELETE
from wmcheck.statestore.keys import stale_columns
from wmcheck.statestore.keys.stale import Change, EventField, FileChanges, record_changes, stale_keys, table_changes
from wmcheck.statestore.keys.stale_columns import Unproven, event_times
from wmcheck.statestore.rocksdb.sst import read_whole

from oracle_cases import state_file_of
from restart_oracle import FIXTURES

AGED = sorted(p.name for p in FIXTURES.iterdir() if (p / "checkpoint/state").is_dir())
EVERY = 1 << 62


def files_read(root: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[Any, ...]]]:
    """The calls of the fast path a check of ``root`` makes (every file of every partition: no budget), each
    as the reference would read the same bytes."""
    calls: list[tuple[str, tuple[Any, ...]]] = []
    for name in ("record_changes", "table_changes"):
        real = getattr(stale_columns, name)

        def spy(*args: Any, name: str = name, real: Callable[..., Any] = real) -> Any:
            calls.append((name, args))
            return real(*args)

        monkeypatch.setattr(stale_columns, name, spy)
    monkeypatch.setattr(content, "COLUMNAR_BYTES", 0)  # the fixtures' small files too
    monkeypatch.setattr(state, "AGED_BUDGET", 1 << 40)
    check_checkpoint(open_checkpoint(str(root / "checkpoint")))
    monkeypatch.undo()
    return calls


def bound_of(name: str, args: tuple[Any, ...]) -> int:
    """The bound a check judged a file's keys against."""
    return args[2] if name == "table_changes" else args[5]


def plain(found: FileChanges | None) -> FileChanges | None:
    """``found`` with its changes as a tuple (as the reference makes them)."""
    return None if found is None else FileChanges(tuple(found.changes), found.removes)


def both(name: str, args: tuple[Any, ...], bound: int, limit: int) -> tuple[FileChanges | None, FileChanges | None]:
    """(fast path, reference) of one file at ``bound``."""
    if name == "table_changes":
        table, field, _ = args  # the table file, verified once by the check
        return (plain(stale_columns.table_changes(table, field, bound, limit=limit)),
                read_whole(table.data, lambda entries: table_changes(entries, field, bound, limit=limit)))
    data, parse, put, delete, field, _, aligned = args
    return (plain(stale_columns.record_changes(data, parse, put, delete, field, bound, aligned, limit)),
            record_changes(parse(), lambda kind: delete if kind == DELETE else put, field, bound, limit))


@pytest.mark.parametrize("fixture", AGED)
def test_every_state_file_a_check_judges_gives_the_references_changes_at_every_bound(fixture, monkeypatch):
    """At the last batch's eviction watermark, before every key, past every key and at the median key; and with a
    limit one short of the keys kept (None, as the reference) or just enough. Every file is read by the fast path
    (none raises Unproven): tables, deltas and snapshots (with row checksums: by the reference's parser), changelogs."""
    calls = files_read(FIXTURES / fixture, monkeypatch)
    for name, args in calls:
        whole, reference = both(name, args, EVERY, 1 << 40)
        assert whole == reference and whole is not None
        times = sorted(c.event_us for c in whole.changes)
        median = times[len(times) // 2] if times else 0
        for bound in (bound_of(name, args), 0, median):
            fast, reference = both(name, args, bound, 1 << 40)
            assert fast == reference
            assert fast is not None
            kept = len(fast.changes)
            if kept:
                assert both(name, args, bound, kept - 1) == (None, None)
                assert both(name, args, bound, kept) == (fast, fast)


def kind_of(name: str, args: tuple[Any, ...]) -> str:
    if name == "table_changes":
        return "table file"
    return "delta or snapshot" if args[6] else "parsed (changelog)"


def test_the_fixtures_give_the_fast_path_every_kind_of_file_holding_keys_before_and_after_their_bound(monkeypatch):
    """The comparison above is not vacuous: table files, deltas and snapshots, changelogs (parsed by the reference's
    parser), each with keys kept, and tables and deltas with keys past the bound too."""
    calls = [c for f in ("agg_window_hdfs", "agg_window_rocksdb", "row_checksum_hdfs")
             for c in files_read(FIXTURES / f, monkeypatch)]
    kept: dict[str, int] = {}
    every: dict[str, int] = {}
    for name, args in calls:
        kind = kind_of(name, args)
        for counts, bound in ((kept, bound_of(name, args)), (every, EVERY)):
            found = both(name, args, bound, 1 << 40)[0]
            counts[kind] = counts.get(kind, 0) + (len(found.changes) if found is not None else 0)
    assert set(kept) == {"table file", "delta or snapshot", "parsed (changelog)"}
    assert all(kept.values()) and kept["table file"] < every["table file"], (kept, every)
    assert kept["delta or snapshot"] < every["delta or snapshot"]


def findings(root: Path, monkeypatch: pytest.MonkeyPatch, columnar: bool) -> list:
    monkeypatch.setattr(state, "COLUMNAR", columnar)
    monkeypatch.setattr(content, "COLUMNAR_BYTES", 0)
    monkeypatch.setattr(state, "AGED_BUDGET", 1 << 40)
    return check_checkpoint(open_checkpoint(str(root / "checkpoint")))


CASES: dict[str, tuple[str, Callable[[Path], Any]]] = {
    **{name: (name, lambda root: None) for name in AGED},  # every fixture as it is
    "changelog-of-another-partition": ("agg_window_rocksdb", state_file_of("1/13.changelog", "0/13.changelog")),
    "table-files-of-another-partition": ("agg_window_rocksdb", lambda root: [
        (root / "checkpoint/state/0/0" / name).write_bytes((root / "checkpoint/state/0/1" / name).read_bytes())
        for name in ("12.zip",)]),
    "delta-of-the-version-before": ("agg_window_hdfs", state_file_of("2/12.delta", "2/13.delta")),
}


BROKEN = ("changelog-of-another-partition", "delta-of-the-version-before")


@pytest.mark.parametrize("case", sorted(CASES))
def test_wm062_finds_the_same_with_and_without_the_fast_path(case, copy_fixture, monkeypatch):
    """The same findings, and the keys each load holds resolved alike from the same files' changes."""
    fixture, breaks = CASES[case]
    root = copy_fixture(fixture)
    breaks(root)
    loads: list[tuple[Any, ...]] = []
    real = stale_columns.stale_keys
    monkeypatch.setattr(stale_columns, "stale_keys", lambda *args: loads.append(args) or real(*args))
    found = findings(root, monkeypatch, True)
    assert found == findings(root, monkeypatch, False)
    assert all(real(*args) == stale_keys(*args) for args in loads)
    if case in BROKEN:
        assert "WM062" in {f.code for f in found}
        assert any(real(*args) for args in loads)


def ts_row(us: int) -> bytes:
    return bytes(8) + us.to_bytes(8, "little")


def test_a_load_holds_each_keys_newest_table_entry_then_its_last_change_in_the_files():
    """Tables: the largest sequence number wins, the first of equal ones; a file's delete or put after them wins;
    a key put again after its delete is held; keys of other lengths are other keys, a key is one key in files of
    other widths."""
    a, b, c, d, e = ts_row(1), ts_row(2), ts_row(3), ts_row(4), ts_row(5)
    short = a[:8]
    older = FileChanges((Change(a, 1, True, 5), Change(b, 2, True, 6), Change(e, 5, True, 3), Change(short, 9, True, 1)), False)
    newer = FileChanges((Change(a, 1, False, 9), Change(b, 2, False, 4), Change(c, 3, True, 8), Change(e, 7, False, 3)), True)
    long = ts_row(8) + bytes(8)  # rows of this file's columns are wider than the tables'
    log = FileChanges((Change(b, 2, False), Change(a, 1, True), Change(d, 4, False), Change(d, 6, True),
                       Change(c, 3, False), Change(long, 8, True)), True)
    expected = {a: 1, e: 5, d: 6, short: 9, long: 8}
    assert stale_keys([older, newer], [log]) == expected
    assert stale_columns.stale_keys([older, newer], [log]) == expected
    assert stale_columns.stale_keys([older, newer], []) == stale_keys([older, newer], []) == {b: 2, c: 3, e: 5, short: 9}
    assert stale_columns.stale_keys([], []) == {}


def test_keys_of_one_fingerprint_that_differ_are_left_to_the_reference(monkeypatch):
    monkeypatch.setattr(stale_columns, "_PRIME", 0)  # every key one fingerprint
    changes = FileChanges((Change(ts_row(1), 1, True), Change(ts_row(2), 2, True)), False)
    with pytest.raises(Unproven):
        stale_columns.stale_keys([], [changes])
    same = FileChanges((Change(ts_row(1), 1, True), Change(ts_row(1), 2, False), Change(ts_row(1), 3, True)), True)
    assert stale_columns.stale_keys([], [same]) == stale_keys([], [same]) == {ts_row(1): 3}


def test_event_times_read_nulls_and_nested_fields_and_refuse_reads_outside_a_row():
    """``ts`` alone, then ``s.end`` of a struct: a null column, a null field, a row cut short."""
    flat = EventField(0, 8)
    rows = [bytes(8) + (5).to_bytes(8, "little"), bytes([1]) + bytes(15)]
    buf = b"".join(rows)
    times, known = event_times(flat, buf, np.array([0, 16]), np.array([16, 32]))
    assert (times[0], known.tolist()) == (5, [True, False])
    assert [flat(r, 0) for r in rows] == [5, None]
    with pytest.raises(Unproven):
        event_times(flat, buf, np.array([0]), np.array([12]))

    nested = EventField(0, 8, (1, 8))
    inner = bytes(8) + (1).to_bytes(8, "little") + (7).to_bytes(8, "little")
    row = bytes(8) + struct.pack("<q", 16 << 32 | 24) + inner
    null_field = bytes(8) + struct.pack("<q", 16 << 32 | 24) + bytes([2]) + inner[1:]
    buf = row + null_field
    times, known = event_times(nested, buf, np.array([0, len(row)]), np.array([len(row), len(buf)]))
    assert (times[0], known.tolist()) == (7, [True, False])
    assert [nested(row, 0), nested(null_field, 0)] == [7, None]
    with pytest.raises(Unproven):  # the struct past the row's end
        event_times(nested, buf, np.array([0]), np.array([len(row) - 8]))
    backwards = bytes(8) + struct.pack("<q", -8 << 32 | 24) + inner
    with pytest.raises(Unproven):  # the struct before the row: the reference reads what lies there
        event_times(nested, backwards, np.array([0]), np.array([len(backwards)]))


def test_changes_as_columns_hold_each_key_alone_wherever_it_lies():
    """Keys of several lengths, one at the very end of its buffer, the bytes after each key not kept."""
    buf = b"abcdefghijklmnopqrstuvwxyz"
    starts, ends = np.array([0, 3, 20, 25]), np.array([9, 3, 26, 26])
    found = stale_columns._columns(buf, starts, ends, np.array([1, 2, 3, 4]), np.array([True, False, True, True]),
                                   np.array([0, 0, 0, 7]))
    assert list(found) == [Change(b"abcdefghi", 1, True), Change(b"", 2, False), Change(b"uvwxyz", 3, True),
                           Change(b"z", 4, True, 7)]
    assert found.keys.shape == (4, 16) and not found.keys[0, 9:].any()
