"""Fuzzing the error contract: for any bytes, every parser returns or raises a ``CheckpointError``; for
any mutated checkpoint, every command exits 0, 1 or 2 with at most one line on stderr and no traceback.

Inputs are real fixture files mutated (hypothesis, derandomized, and a seeded byte mutator) with the
shapes that once escaped: non-ASCII digits, huge numbers, deep nesting, truncation, binary noise.
"""
from __future__ import annotations

import random
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wmcheck.checkpoint.checksums import verify_hadoop_crc, verify_spark_checksum
from wmcheck.checkpoint.errors import CheckpointError
from wmcheck.checkpoint.logs.commits import parse_commit
from wmcheck.checkpoint.logs.file_logs import parse_file_log
from wmcheck.checkpoint.logs.kafka_offsets import parse_kafka_initial_offsets
from wmcheck.checkpoint.logs.offsets import parse_offsets
from wmcheck.checkpoint.logs.operator_metadata import parse_operator_metadata
from wmcheck.checkpoint.logs.query_metadata import parse_query_metadata
from wmcheck.checkpoint.repair.plan import load_plan
from wmcheck.checkpoint.repair.rewind import zip_sst_files
from wmcheck.statestore.formats.schema import parse_state_schema

from conftest import FIXTURES

TOKENS = [b"\xc2\xb2", "\u0663".encode(), b"v" + b"9" * 5000, b"9" * 5000, b"[" * 100_000, b'{"a":' * 50_000,
          b"-", b"\x00", b"\xff\xfe", b"\n", b"\r\n", b'"', b"{}", b"[]", b"null", b"1e999999", b"-0", b"v0",
          b'{"logOffset":' + b"9" * 40 + b"}", b'{"t":{"\xc2\xb2":1}}']
SETTINGS = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


def sample(pattern: str) -> bytes:
    path = next(iter(sorted(FIXTURES.glob(pattern))), None)
    if path is None:
        pytest.skip(f"no fixture file matches {pattern}")
    return path.read_bytes()


def exercise_offsets(data: bytes, path: str) -> None:
    seq = parse_offsets(data, path)
    for src in seq.sources:
        src.summary(), src.kafka_offsets, src.log_offset  # noqa: B018 - every accessor must hold the contract


def parse_plan(data: bytes, path: str) -> None:
    load_plan(data.decode("utf-8", "replace"), path)


def zip_list(data: bytes, path: str) -> None:
    zip_sst_files(data)


PARSERS: dict[str, tuple[Callable[[bytes, str], object], str]] = {
    "offsets": (exercise_offsets, "agg_window_hdfs/checkpoint/offsets/12"),
    "commits": (parse_commit, "checkpoint_v2/checkpoint/commits/12"),
    "file log": (parse_file_log, "agg_window_hdfs/checkpoint/sources/0/9.compact"),
    "sink log": (parse_file_log, "agg_window_hdfs/output/_spark_metadata/9.compact"),
    "query metadata": (parse_query_metadata, "agg_window_hdfs/checkpoint/metadata"),
    "operator metadata": (parse_operator_metadata, "tws_pandas/checkpoint/state/0/_metadata/v2/0"),
    "state schema": (parse_state_schema, "tws_pandas/checkpoint/state/0/_stateSchema/default/*"),
    "kafka initial offsets": (parse_kafka_initial_offsets, "agg_window_hdfs/checkpoint/offsets/12"),
    "hadoop crc": (lambda d, p: verify_hadoop_crc(d, b"x" * 600, p), "agg_window_hdfs/checkpoint/offsets/.12.crc"),
    "spark checksum": (lambda d, p: verify_spark_checksum(d, b"x", p), "agg_window_rocksdb/checkpoint/state/0/0/*.crc"),
    "rocksdb zip": (zip_list, "agg_window_rocksdb/checkpoint/state/0/0/12.zip"),
    "plan": (parse_plan, "agg_window_hdfs/checkpoint/offsets/12"),
}


def holds_contract(parse: Callable[[bytes, str], object], data: bytes) -> None:
    try:
        parse(data, "some/file")
    except CheckpointError as exc:
        assert "\n" not in str(exc)


def mutate(data: bytes, rng: random.Random, edits: int) -> bytes:
    out = bytearray(data)
    for _ in range(edits):
        at = rng.randrange(len(out) + 1)
        how = rng.randrange(5)
        if how == 0 and out:
            out[min(at, len(out) - 1)] = rng.randrange(256)
        elif how == 1:
            out[at:at] = rng.choice(TOKENS)
        elif how == 2:
            del out[at:at + rng.randrange(1, 64)]
        elif how == 3:
            out = out[:at]
        else:
            out[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
    return bytes(out)


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_every_parser_raises_only_checkpoint_errors(name):
    parse, pattern = PARSERS[name]
    real = sample(pattern)
    rng = random.Random(name)
    for _ in range(400):
        holds_contract(parse, mutate(real, rng, rng.randrange(1, 6)))
    for token in TOKENS:  # each shape once, at the start, in the middle and as the whole file
        for data in (token + real, real[: len(real) // 2] + token + real[len(real) // 2:], token):
            holds_contract(parse, data)

    @SETTINGS
    @given(st.binary(max_size=2000), st.integers(0, 10_000), st.sampled_from(TOKENS))
    def arbitrary(noise: bytes, at: int, token: bytes) -> None:
        cut = at % (len(real) + 1)
        holds_contract(parse, real[:cut] + token + noise + real[cut:])
        holds_contract(parse, noise)

    arbitrary()


@pytest.mark.parametrize("fixture", ["agg_window_hdfs", "agg_window_rocksdb", "checkpoint_v2"])
def test_commands_on_mutated_checkpoints_exit_cleanly(fixture, tmp_path):
    """Mutate a few files (and names) of a real checkpoint; show, check, batches and a rewind dry run
    must exit 0, 1 or 2 with one line on stderr at most."""
    from click.testing import CliRunner

    from wmcheck.cli.main import cli

    rng = random.Random(fixture)
    source = FIXTURES / fixture
    if not source.is_dir():
        pytest.skip(f"fixture {fixture} is not generated")
    for i in range(12):
        root = tmp_path / f"m{i}"
        shutil.copytree(source, root, ignore=shutil.ignore_patterns("input"))
        files = sorted(p for p in (root / "checkpoint").rglob("*") if p.is_file())
        for path in rng.sample(files, 3):
            what = rng.randrange(4)
            if what == 0:
                path.rename(path.with_name(rng.choice(["\u00b2", "\u0663", "9" * 30, path.name + "\u00b2"])))
            elif what == 1:
                path.unlink()
                path.symlink_to(path if rng.random() < 0.5 else root / "nowhere")  # a loop or a dangling link
            else:
                path.write_bytes(mutate(path.read_bytes(), rng, rng.randrange(1, 4)))
        ckpt = str(root / "checkpoint")
        for args in (["show", ckpt], ["check", ckpt, "--file-sink", str(root / "output")], ["batches", ckpt],
                     ["rewind", ckpt, "--shift", "-2"], ["check", ckpt, "--format", "json"]):
            result = CliRunner().invoke(cli, args, catch_exceptions=True)
            assert result.exit_code in (0, 1, 2), (args, result.exit_code, result.output[-2000:], result.exception)
            assert result.exception is None or isinstance(result.exception, SystemExit), (args, repr(result.exception))
            assert "Traceback" not in result.output and "internal error" not in result.output, (args, result.output)
            assert result.stderr.count("\n") <= 1, (args, result.stderr[-2000:])
        shutil.rmtree(root)


def test_fixture_samples_exist():
    assert all(next(iter(FIXTURES.glob(p)), None) for _, p in PARSERS.values())
    assert Path(FIXTURES / "agg_window_hdfs").is_dir()
