"""Hadoop ``.crc`` and Spark ``<name>.crc`` checksum sidecars, and pure-Python CRC32C, on real bytes."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wmcheck.checkpoint.checksums import (
    ChecksumResult,
    HadoopCrc,
    SparkChecksum,
    crc32c,
    hadoop_crc_for,
    parse_hadoop_crc,
    parse_spark_checksum,
    verify_hadoop_crc,
    verify_spark_checksum,
)
from wmcheck.checkpoint.errors import CheckpointError, MalformedFileError, UnsupportedError
from wmcheck.checkpoint.layout import sidecar_target

DATA = Path(__file__).parent / "data"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ZIP = "tws/state/0/0/1_46440808-0dcb-4082-8f1f-871a0130e41c.zip"
CHANGELOG = "tws/state/0/0/1_46440808-0dcb-4082-8f1f-871a0130e41c.changelog"
SCHEMA = "agg_window/state/0/0/_metadata/schema"


def hidden_crc(rel: str) -> str:
    head, name = os.path.split(rel)
    return os.path.join(head, f".{name}.crc")


def read(rel: str) -> bytes:
    return (DATA / rel).read_bytes()


def crc32c_bitwise(data: bytes, crc: int = 0) -> int:
    crc ^= 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


# -- CRC32C ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [  # RFC 3720 appendix B.4, and the usual check value
        (b"123456789", 0xE3069283),
        (bytes(32), 0x8A9136AA),
        (b"\xff" * 32, 0x62A8AB43),
        (bytes(range(32)), 0x46DD794E),
        (bytes(range(31, -1, -1)), 0x113FDB5C),
        (b"", 0),
    ],
)
def test_crc32c_known_values(data, expected):
    assert crc32c(data) == expected


@settings(max_examples=300)
@given(st.binary(max_size=100), st.binary(max_size=40))
def test_crc32c_matches_bitwise_and_continues(a, b):
    assert crc32c(a) == crc32c_bitwise(a)
    assert crc32c(a + b) == crc32c(b, crc32c(a))


# -- every real sidecar ----------------------------------------------------------------------


def real_sidecars() -> list[tuple[str, Path, Path]]:
    roots = [DATA, *sorted(FIXTURES.glob("*/checkpoint"))]
    out = []
    for root in roots:
        for dirpath, _, names in os.walk(root):
            for name in sorted(names):
                target = sidecar_target(os.path.join(dirpath, name))
                if target:
                    out.append((target[0], Path(dirpath, name), Path(target[1])))
    return out


def test_every_real_sidecar_matches_its_file():
    sidecars = real_sidecars()
    kinds = {kind for kind, _, _ in sidecars}
    assert kinds == {"hadoop", "spark"}
    for kind, sidecar, main in sidecars:
        side, data = sidecar.read_bytes(), main.read_bytes()
        if kind == "hadoop":
            assert verify_hadoop_crc(side, data, str(sidecar)) == ChecksumResult(True), sidecar
            assert hadoop_crc_for(data) == side, sidecar
        else:
            assert verify_spark_checksum(side, data, str(sidecar)) == ChecksumResult(True), sidecar


# -- Hadoop ----------------------------------------------------------------------------------


def test_parse_real_hadoop_crc_one_and_many_chunks():
    assert parse_hadoop_crc(read(hidden_crc(SCHEMA)), SCHEMA) == HadoopCrc(512, (0xC0F277D5,))
    many = parse_hadoop_crc(read(hidden_crc(ZIP)), ZIP)
    assert len(read(ZIP)) == 3914
    assert many.bytes_per_checksum == 512 and len(many.checksums) == 8
    assert many.checksums[0] == 0xF919F3A0 and many.checksums[-1] == 0x25F08C1F


def test_hadoop_crc_of_empty_and_custom_chunk_size():
    assert hadoop_crc_for(b"") == b"crc\0\0\0\x02\0"
    assert parse_hadoop_crc(hadoop_crc_for(b"abcdef", 4), "x") == HadoopCrc(4, (0xED82CD11, 0xFD824970))  # crc32 of abcd, ef


def test_hadoop_mismatches_point_at_the_first_bad_chunk():
    data, side = read(ZIP), read(hidden_crc(ZIP))
    flipped = data[:1500] + bytes([data[1500] ^ 1]) + data[1501:]
    result = verify_hadoop_crc(side, flipped, ZIP)
    assert not result and (result.first_bad_chunk, result.first_bad_byte) == (2, 1024)
    assert "chunk 2 (bytes 1024-1535)" in result.problem
    assert verify_hadoop_crc(side, data[:1024], ZIP)  # cut at a chunk's end: the checksums after it are never read
    short = verify_hadoop_crc(side[:16], data, ZIP)
    assert (short.ok, short.first_bad_chunk) == (False, 2)
    assert "the file has 3914 bytes (8 chunks of 512), the sidecar covers 2 chunks" == short.problem
    longer = verify_hadoop_crc(side, data + b"x" * 600, ZIP)
    assert (longer.ok, longer.first_bad_chunk) == (False, 7)  # the last partial chunk now differs
    assert not verify_hadoop_crc(side, data[:-1], ZIP)


@pytest.mark.parametrize(
    ("data", "message", "byte"),
    [
        (b"", "found an empty file", 0),
        (b"crc", "expected a Hadoop checksum header", 0),
        (b'{"algorithm":"CRC32C"}', "expected a Hadoop checksum header", 0),
        (b"crc\0\0\0\0\0", "expected a positive bytes-per-checksum, found 0", 4),
        (b"crc\0\xff\xff\xff\xff", "found -1", 4),
        (b"crc\0\0\0\x02\0\1\2", "found 2 bytes left over", 8),
    ],
)
def test_bad_hadoop_crc(data, message, byte):
    with pytest.raises(MalformedFileError) as info:
        parse_hadoop_crc(data, "offsets/.0.crc")
    assert message in info.value.message and info.value.byte == byte
    assert str(info.value).startswith("offsets/.0.crc")


def test_hadoop_crc_truncated_at_every_byte():
    side, data = read(hidden_crc(ZIP)), read(ZIP)
    for end in range(len(side)):
        try:
            result = verify_hadoop_crc(side[:end], data, "p/.x.crc")
        except CheckpointError as exc:
            assert "p/.x.crc" in str(exc)
        else:  # a header Hadoop cannot read: the sidecar is ignored
            assert result if end < 8 else end % 4 == 0 and not result


# -- Spark -----------------------------------------------------------------------------------


def test_parse_real_spark_checksum():
    checksum = parse_spark_checksum(read(CHANGELOG + ".crc"), CHANGELOG + ".crc")
    assert checksum == SparkChecksum(
        "CRC32C", -1727800742, 326, 1795385393217,
        {"executorId": "driver", "taskInfo": "Task= 0.0, Stage= 5.0"},
        {
            "algorithm": "CRC32C", "value": -1727800742, "mainFileSize": 326, "timestampMs": 1795385393217,
            "creator": {"executorId": "driver", "taskInfo": "Task= 0.0, Stage= 5.0"},
        },
    )
    assert crc32c(read(CHANGELOG)) == -1727800742 & 0xFFFFFFFF


def test_spark_mismatches():
    side, data = read(ZIP + ".crc"), read(ZIP)
    assert verify_spark_checksum(side, data, ZIP + ".crc")
    flipped = verify_spark_checksum(side, data[:-1] + bytes([data[-1] ^ 0x80]), ZIP + ".crc")
    assert not flipped and "CRC32C" in flipped.problem
    short = verify_spark_checksum(side, data[:-1], ZIP + ".crc")
    assert short.problem == "the file has 3913 bytes, the checksum says 3914"


def test_unknown_algorithm_is_unsupported():
    side = read(ZIP + ".crc").replace(b'"CRC32C"', b'"XXH3"')
    assert parse_spark_checksum(side, "a.crc").algorithm == "XXH3"
    with pytest.raises(UnsupportedError, match="'XXH3' is not supported"):
        verify_spark_checksum(side, read(ZIP), "a.crc")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "expected a Spark checksum as JSON"),
        (b"crc\0\0\0\x02\0\xff\xff\xff\xff", "undecodable bytes"),
        (b"[]", "as a JSON object, found list"),
        (b'{"value":1,"mainFileSize":1,"timestampMs":1}', "expected algorithm to be a string, found null"),
        (b'{"algorithm":"CRC32C","value":4294967295,"mainFileSize":1,"timestampMs":1}', "value to be a 32-bit integer"),
        (b'{"algorithm":"CRC32C","value":"1","mainFileSize":1,"timestampMs":1}', "expected value to be an integer"),
        (b'{"algorithm":"CRC32C","value":1,"mainFileSize":-1,"timestampMs":1}', "mainFileSize to be a size in bytes"),
        (b'{"algorithm":"CRC32C","value":1,"mainFileSize":1}', "expected timestampMs, found nothing"),
        (b'{"algorithm":"CRC32C","value":1,"mainFileSize":1,"timestampMs":1,"creator":"me"}', "creator to be a JSON object"),
    ],
)
def test_bad_spark_checksum(data, message):
    with pytest.raises(MalformedFileError) as info:
        parse_spark_checksum(data, "state/0/0/1_x.zip.crc")
    assert message in info.value.message
    assert str(info.value).startswith("state/0/0/1_x.zip.crc")


def test_spark_checksum_truncated_at_every_byte():
    side = read(ZIP + ".crc")
    for end in range(len(side)):
        with pytest.raises(CheckpointError) as info:
            parse_spark_checksum(side[:end], "q.crc")
        assert "q.crc" in str(info.value)


@settings(max_examples=300)
@given(st.binary(max_size=64), st.binary(max_size=64))
def test_random_bytes_raise_only_checkpoint_errors(side, data):
    for check in (verify_hadoop_crc, verify_spark_checksum):
        try:
            check(side, data, "r.crc")
        except CheckpointError as exc:
            assert "r.crc" in str(exc)


@settings(max_examples=200)
@given(st.binary(max_size=3000), st.integers(1, 1024))
def test_generated_hadoop_crc_verifies_and_round_trips(data, per):
    side = hadoop_crc_for(data, per)
    assert verify_hadoop_crc(side, data, "g")
    assert hadoop_crc_for(data, parse_hadoop_crc(side, "g").bytes_per_checksum) == side


# -- naming ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("offsets/.0.crc", ("hadoop", "offsets/0")),
        ("state/0/0/1_u.zip.crc", ("spark", "state/0/0/1_u.zip")),
        ("state/0/0/.1_u.zip.crc.crc", ("hadoop", "state/0/0/1_u.zip.crc")),
        (".metadata.crc", ("hadoop", "metadata")),
        ("state/0/0/1.delta", None),
        ("a/.crc", None),
    ],
)
def test_sidecar_target(path, expected):
    assert sidecar_target(path) == expected
