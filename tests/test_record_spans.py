"""The fast read of HDFS provider state files (statestore/formats/record_spans.py) against the reference
(``sized_records`` and the overlay dict): the same keys and values in the same order, or the same error,
on every HDFS partition and version of the fixtures and on hand-made files."""
from __future__ import annotations

import struct
from pathlib import Path
from types import SimpleNamespace

import pytest

from wmcheck.checkpoint.errors import CheckpointError, MalformedFileError
from wmcheck.checkpoint.model import store_unique_ids
from wmcheck.statestore.engine import store_files
from wmcheck.statestore.engine.presentation import CODEC
from wmcheck.statestore.formats import record_spans, sized_columns
from wmcheck.statestore.formats.codecs import codec_name
from wmcheck.statestore.formats.sized_columns import key_fingerprints
from wmcheck.statestore.targets import as_checkpoint

from conftest import FIXTURES


def _outcome(stream: store_files.PartitionStream, rows: int) -> object:
    """The pairs the stream yields, in order, or the error it raises (type and every field)."""
    try:
        return [pair for keys, values in stream.chunks(rows) for pair in zip(list(keys), list(values))]
    except CheckpointError as exc:
        return type(exc), str(exc), vars(exc)


def _spied(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each read by the fast path gave a state (else the reference read the files)."""
    taken: list[bool] = []
    real = store_files.PartitionStream._resolved

    def spy(self, base, increments):
        state = real(self, base, increments)
        taken.append(state is not None)
        return state

    monkeypatch.setattr(store_files.PartitionStream, "_resolved", spy)
    return taken


def _decompressed(data: bytes, codec: str, path: str) -> bytes:
    """The files as they are, but ``UNREADABLE`` fails as a damaged compressed file does."""
    if data == UNREADABLE:
        raise MalformedFileError("expected an lz4 block", path=path, byte=0)
    return data


def _hdfs_partitions() -> list[tuple[str, int, int]]:
    """(fixture checkpoint, index of the partition among its HDFS partitions, version) for every version."""
    cases = []
    for ckpt_dir in sorted(FIXTURES.glob("*/checkpoint")):
        ckpt = as_checkpoint(str(ckpt_dir))
        parts = [p for op in ckpt.operators for p in op.partitions if p.provider == "hdfs"]
        cases += [(str(ckpt_dir), i, v) for i, part in enumerate(parts) for v in part.versions]
    return cases


FIXTURE_CASES = _hdfs_partitions()


def _both_paths(path: str, index: int, version: int, monkeypatch: pytest.MonkeyPatch) -> tuple[list[bool], bool]:
    """(whether each read took the fast path, whether the files hold row checksums)"""
    ckpt = as_checkpoint(path)
    pairs = [(op, p) for op in ckpt.operators for p in op.partitions if p.provider == "hdfs"]
    op, part = pairs[index]
    codec = codec_name(ckpt.conf.get(CODEC))
    checksums = (ckpt.conf.get("spark.sql.streaming.stateStore.rowChecksum.enabled") or "").lower() == "true"

    def stream(fast: bool) -> store_files.PartitionStream:
        return store_files.PartitionStream(ckpt.fs, part, version, codec, store_unique_ids(ckpt, op, part), checksums, fast)

    try:
        stream(True)
    except CheckpointError:  # a version that cannot be rebuilt fails alike before reading: not this test's
        pytest.skip("version not loadable")
    taken = _spied(monkeypatch)
    for rows in (3, store_files.CHUNK_ROWS):
        fast, reference = _outcome(stream(True), rows), _outcome(stream(False), rows)
        assert fast == reference
    return taken, checksums


def test_every_fixture_has_hdfs_partitions():
    assert len({c[0] for c in FIXTURE_CASES}) >= 10 and len(FIXTURE_CASES) >= 50


@pytest.mark.parametrize("path,index,version", FIXTURE_CASES, ids=[f"{Path(c[0]).parent.name}-{c[1]}-v{c[2]}" for c in FIXTURE_CASES])
@pytest.mark.parametrize("block", [64, sized_columns._BLOCK])
def test_fixture_partitions_read_alike_by_both_paths(path, index, version, block, monkeypatch):
    """Every version of every HDFS partition of the fixtures: the fast path reads it (row checksums aside)
    and gives the reference's pairs (also with the slots looked at 64 at a time)."""
    monkeypatch.setattr(sized_columns, "_BLOCK", block)
    taken, checksums = _both_paths(path, index, version, monkeypatch)
    assert taken == ([] if checksums else [True, True])


def put(key: bytes, value: bytes) -> bytes:
    return struct.pack(">i", len(key)) + key + struct.pack(">i", len(value)) + value


def delete(key: bytes, size: int = -1) -> bytes:
    return struct.pack(">i", len(key)) + key + struct.pack(">i", size)


END = struct.pack(">i", -1)
UNREADABLE = b"not compressed as the codec says"
A, B, C, D = (bytes([i]) * 8 for i in b"abcd")
V1, V2, V3 = (bytes([i]) * 16 for i in b"123")
ODD = b"odd-sized"


def _stream(snapshot: bytes | None, deltas: list[bytes], fast: bool) -> store_files.PartitionStream:
    files = {f"{v}.delta": data for v, data in enumerate(deltas, 2)}
    chain = [SimpleNamespace(format=SimpleNamespace(role="increment", decoder="hdfs-delta"), path=p, version=v)
             for v, p in enumerate(files, 2)]
    if snapshot is not None:
        files["1.snapshot"] = snapshot
        chain.insert(0, SimpleNamespace(format=SimpleNamespace(role="base", decoder="hdfs-snapshot"), path="1.snapshot",
                                        version=1))
    stream = object.__new__(store_files.PartitionStream)
    stream.fs = SimpleNamespace(read_many=lambda paths: {p: files[p] for p in paths}, read=lambda p: files[p])
    stream.part = SimpleNamespace(operator_id=0, store="default", partition=0, directory="state/0/0", provider="hdfs")
    stream.version, stream.codec, stream.checksums, stream.meta, stream.fast = 1 + len(deltas), "lz4", False, None, fast
    stream.chain = chain
    return stream


CASES = {  # name: (snapshot, deltas, whether the fast path reads them, the state)
    "puts": (None, [put(A, V1) + put(B, V2) + END], True, [(A, V1), (B, V2)]),
    "a key twice in a file": (None, [put(A, V1) + put(B, V2) + put(A, V3) + END], True, [(A, V3), (B, V2)]),
    "deletes": (None, [put(A, V1) + put(B, V2) + delete(A) + END], True, [(B, V2)]),
    "any negative value size deletes": (None, [put(A, V1) + delete(A, -7) + END], True, []),
    "re-put after a delete": (None, [put(A, V1) + put(B, V2) + delete(A) + put(A, V3) + END], True, [(A, V3), (B, V2)]),
    "across deltas": (None, [put(A, V1) + put(B, V2) + put(C, V1) + END, delete(B) + put(A, V3) + put(D, V2) + END,
                             put(B, V1) + END], True, [(A, V3), (B, V1), (C, V1), (D, V2)]),
    "a delete of no key": (None, [delete(D) + put(A, V1) + END], True, [(A, V1)]),
    "empty state": (None, [END, END], True, []),
    "bytes after the end mark": (None, [put(A, V1) + END + b"\x00\x00\x00\x07garbage"], True, [(A, V1)]),
    "an empty value and key": (None, [put(b"", b"") + put(A, b"") + END], True, [(b"", b""), (A, b"")]),
    "sizes not multiples of 8": (None, [put(A, V1) + put(ODD, ODD) + put(A, V2) + END], False,
                                 [(A, V2), (ODD, ODD)]),
    "a snapshot": (put(A, V1) + put(B, V2) + END, [], True, [(A, V1), (B, V2)]),
    "a snapshot and deltas": (put(A, V1) + put(B, V2) + put(C, V3) + END, [delete(B) + put(D, V1) + put(A, V2) + END,
                                                                         put(B, V3) + END],
                              True, [(A, V2), (B, V3), (C, V3), (D, V1)]),
    "an empty snapshot and deltas": (END, [put(A, V1) + END], True, [(A, V1)]),
    "a key twice in a snapshot": (put(A, V1) + put(A, V2) + END, [], True, [(A, V1), (A, V2)]),
    "a key twice in a snapshot with deltas": (put(A, V1) + put(A, V2) + END, [put(B, V3) + END], False,
                                              [(A, V1), (A, V2), (B, V3)]),
}
DAMAGED = {  # name: (snapshot, deltas)
    "an empty file": (None, [b""]),
    "no end mark": (None, [put(A, V1)]),
    "a key size below -1": (None, [put(A, V1) + struct.pack(">i", -2) + END]),
    "a key past the end": (None, [struct.pack(">i", 64) + A + END]),
    "a value past the end": (None, [put(A, V1)[:-8] + END]),
    "no value size": (None, [struct.pack(">i", 8) + A]),
    "a short key size": (None, [put(A, V1) + b"\xff\xff"]),
    "a damaged later delta": (None, [put(A, V1) + END, put(B, V1)[:-1]]),
    "a delete in a snapshot": (put(A, V1) + delete(B) + END, []),
    "a damaged snapshot": (put(A, V1) + struct.pack(">i", 9999), [put(B, V1) + END]),
    "a damaged delta before one that does not decompress": (None, [put(A, V1) + END, put(B, V1)[:-1], UNREADABLE]),
    "a damaged delta before a snapshot that does not decompress": (UNREADABLE, [put(B, V1)[:-1]]),
}
UNREADABLE_FILES = {  # the fast path raises the reference's decompression error itself
    "a snapshot that does not decompress": (UNREADABLE, [put(B, V1) + END]),
    "a delta that does not decompress": (None, [put(A, V1) + END, UNREADABLE, put(B, V1)[:-1]]),
}


@pytest.mark.parametrize("block", [1, 3, sized_columns._BLOCK])
@pytest.mark.parametrize("name", CASES)
def test_hand_made_files_read_alike_by_both_paths(name, block, monkeypatch):
    """Also with the slots looked at a few at a time (records spanning blocks)."""
    snapshot, deltas, fast_reads, state = CASES[name]
    monkeypatch.setattr(store_files, "decompress", _decompressed)
    monkeypatch.setattr(sized_columns, "_BLOCK", block)
    taken = _spied(monkeypatch)
    for rows in (1, 2, 100):
        fast, reference = _outcome(_stream(snapshot, deltas, True), rows), _outcome(_stream(snapshot, deltas, False), rows)
        assert fast == reference == state
    assert taken == [fast_reads] * 3


@pytest.mark.parametrize("block", [1, sized_columns._BLOCK])
@pytest.mark.parametrize("name", [*DAMAGED, *UNREADABLE_FILES])
def test_damaged_files_raise_the_reference_error(name, block, monkeypatch):
    snapshot, deltas = DAMAGED.get(name) or UNREADABLE_FILES[name]
    monkeypatch.setattr(store_files, "decompress", _decompressed)
    monkeypatch.setattr(sized_columns, "_BLOCK", block)
    taken = _spied(monkeypatch)
    fast, reference = _outcome(_stream(snapshot, deltas, True), 2), _outcome(_stream(snapshot, deltas, False), 2)
    assert isinstance(reference, tuple) and fast == reference
    assert taken == ([] if name in UNREADABLE_FILES else [False])


def test_keys_sharing_a_fingerprint_are_told_apart(monkeypatch):
    """A fingerprint shared by different keys is caught by the byte comparison: the reference reads."""
    import numpy as np

    monkeypatch.setattr(store_files, "decompress", _decompressed)
    monkeypatch.setattr(record_spans, "key_fingerprints", lambda words, starts, sizes: np.zeros(len(starts), np.uint64))
    taken = _spied(monkeypatch)
    deltas = [put(A, V1) + put(B, V2) + END]
    assert _outcome(_stream(None, deltas, True), 10) == [(A, V1), (B, V2)]
    deltas = [put(A, V1) + put(A, V2) + END]
    assert _outcome(_stream(None, deltas, True), 10) == [(A, V2)]
    assert taken == [False, True]


def test_fingerprints_of_equal_keys_are_equal_wherever_they_lie():
    import numpy as np

    buf = b"\x00" * 3 + A + B + b"\x01" * 5 + A + B + C + A + B
    words = np.ndarray((len(buf) - 7,), "<u8", buf, 0, (1,))
    starts = np.array([3, 24, 48], np.int64)
    sizes = np.array([2, 2, 1], np.int64)
    got = key_fingerprints(words, starts, sizes)
    assert got[0] == got[1] != got[2]
    again = key_fingerprints(words, np.array([40, 48], np.int64), np.array([1, 2], np.int64))
    assert again[0] != got[2] and again[1] == got[0]


def test_byte_rows_slice_and_index():
    import numpy as np

    rows = record_spans.ByteRows(b"xxabcdefgh", np.array([2, 4, 9], np.int64), np.array([4, 8, 10], np.int64))
    assert list(rows) == [b"ab", b"cdef", b"h"] and len(rows) == 3 and rows[1] == b"cdef"
    assert list(rows[1:]) == [b"cdef", b"h"] and isinstance(rows[1:], record_spans.ByteRows)
