"""Row checksums (``rowChecksum.enabled``): a flipped value byte fails Spark's state reader and the
python engine the same way, for the HDFS and the RocksDB provider."""
from __future__ import annotations

import struct
from pathlib import Path

import pytest

from conftest import FIXTURES, run_cli

LZ4_HEADER = 21
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M


def _xxh32(data: bytes, seed: int) -> int:
    """XXH32, the checksum lz4-java's ``LZ4BlockOutputStream`` stores per block."""
    n, i = len(data), 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M, (seed + _P2) & _M, seed & _M, (seed - _P1) & _M]
        while i + 16 <= n:
            for j in range(4):
                (w,) = struct.unpack_from("<I", data, i + 4 * j)
                v[j] = (_rotl((v[j] + w * _P2) & _M, 13) * _P1) & _M
            i += 16
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while i + 4 <= n:
        (w,) = struct.unpack_from("<I", data, i)
        h = (_rotl((h + w * _P3) & _M, 17) * _P4) & _M
        i += 4
    for byte in data[i:]:
        h = (_rotl((h + byte * _P5) & _M, 11) * _P1) & _M
    h ^= h >> 15
    h = (h * _P2) & _M
    h ^= h >> 13
    h = (h * _P3) & _M
    return h ^ (h >> 16)


def _lz4_raw(data: bytes, original: bytes) -> bytes:
    """``data`` in lz4-java's block framing, stored uncompressed (method 0x10), with ``original``'s block size."""
    level = original[8] & 0x0F
    block = 1 << (10 + level)
    out = []
    for start in range(0, len(data), block):
        chunk = data[start:start + block]
        check = _xxh32(chunk, 0x9747B28C) & 0x0FFFFFFF
        out.append(b"LZ4Block" + bytes([0x10 | level]) + struct.pack("<iii", len(chunk), len(chunk), check) + chunk)
    return b"".join(out) + original[-LZ4_HEADER:]  # the end block


def test_xxh32_matches_the_fixture_files():
    from wmcheck.statestore.formats.codecs import decompress

    original = (FIXTURES / "row_checksum_hdfs/checkpoint/state/0/0/12.delta").read_bytes()
    size, raw, check = struct.unpack_from("<iii", original, 9)
    assert _xxh32(decompress(original, "lz4", "12.delta"), 0x9747B28C) & 0x0FFFFFFF == check


def _flip_first_value(path: Path) -> None:
    """Flip the last byte of the first row put in the (lz4) state file at ``path``, framing kept valid."""
    from wmcheck.statestore.formats.codecs import decompress
    from wmcheck.statestore.formats.records import DELETE, changelog_records, sized_records

    original = path.read_bytes()
    data = decompress(original, "lz4", path.name)
    records = changelog_records(data, path.name) if path.suffix == ".changelog" else sized_records(data, path.name)
    key, value = next((k, v) for kind, k, v in records if kind != DELETE and v)
    at = data.index(key + struct.pack(">i", len(value)) + value) + len(key) + 4 + len(value) - 1
    damaged = data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1:]
    path.write_bytes(_lz4_raw(damaged, original))


CASES = {  # fixture: (state file to damage, batch to read)
    "row_checksum_hdfs": ("state/0/0/12.delta", None),
    "row_checksum_tws": ("state/0/1/8.changelog", "8"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_flipped_value_byte_fails_spark_and_the_python_engine_alike(name, copy_fixture, spark):
    copy = copy_fixture(name) / "checkpoint"
    damaged, batch = CASES[name]
    _flip_first_value(copy / damaged)
    args = ["--batch", batch] if batch else []
    theirs = run_cli("state", str(copy), "--engine", "spark", *args, exit_code=2)
    ours = run_cli("state", str(copy), "--engine", "python", *args, exit_code=2)
    part = damaged.split("/")[2]
    # Spark names the store StateStoreId[...] (HDFS) or StateStoreProviderId[ storeId=StateStoreId[...], queryRunId=... ] (RocksDB)
    assert "[STATE_STORE_ROW_CHECKSUM_VERIFICATION_FAILED] Row checksum verification failed for stateStore=" in theirs.stderr
    assert f"StateStoreId[ operatorId=0, partitionId={part}, storeName=default ]" in theirs.stderr
    assert "The row may be corrupted." in theirs.stderr
    assert theirs.stderr.count("\n") == 1
    version = damaged.rsplit("/", 1)[1].split(".")[0]
    assert ours.stderr.startswith(
        f"Error: {damaged}: row checksum verification failed for stateStore=StateStoreId[ operatorId=0, partitionId={part}, "
        f"storeName=default ] at version {version}: the row may be corrupted (expected checksum ")
    assert ours.stderr.endswith("; Spark's reader fails with STATE_STORE_ROW_CHECKSUM_VERIFICATION_FAILED) (hint: the state "
                                "files are damaged: restore them from a backup or rewind to a batch before them)\n")
    assert ours.stderr.count("\n") == 1


def test_python_engine_without_google_crc32c_is_one_clear_line(monkeypatch):
    import importlib.util

    from conftest import fixture_checkpoint

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "google_crc32c" else real(name, *a))
    result = run_cli("state", str(fixture_checkpoint("row_checksum_hdfs")), "--engine", "python", exit_code=2)
    assert result.stderr == ("Error: verifying row checksums without Spark needs the google_crc32c package, which is not installed "
                             "(hint: pip install google-crc32c (wmcheck depends on it: the install is incomplete), or use --engine spark)\n")
