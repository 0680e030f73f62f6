"""Remote checkpoints through pyarrow.fs: a real S3 API (moto's server on loopback) and file:// URIs."""
from __future__ import annotations

import json
import logging

import pytest

from conftest import fixture_checkpoint, fixture_facts, run_cli

NAME = "agg_window_hdfs"


@pytest.fixture(scope="module")
def s3_options():
    """An S3 endpoint on 127.0.0.1 holding a copy of a fixture under s3://bucket/ckpt."""
    server_mod = pytest.importorskip("moto.server")
    from pyarrow import fs as pafs

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    options = {"endpoint_override": f"http://{host}:{port}", "scheme": "http", "access_key": "test",
               "secret_key": "test", "region": "us-east-1"}
    s3 = pafs.S3FileSystem(**options, allow_bucket_creation=True)
    s3.create_dir("bucket")
    pafs.copy_files(str(fixture_checkpoint(NAME)), "bucket/ckpt", destination_filesystem=s3)
    yield options
    server.stop()


def fs_args(options: dict) -> list[str]:
    return [arg for key, value in options.items() for arg in ("--fs-option", f"{key}={value}")]


@pytest.mark.parametrize("scheme", ["s3", "s3a"])
def test_show_on_s3_equals_local(s3_options, scheme):
    local = json.loads(run_cli("show", fixture_checkpoint(NAME), "--format", "json").stdout)
    remote = json.loads(run_cli("show", f"{scheme}://bucket/ckpt", "--format", "json", *fs_args(s3_options)).stdout)
    assert remote["location"] == f"{scheme}://bucket/ckpt"
    assert remote["watermark_ms"] == fixture_facts(NAME)["next_watermark_ms"]
    assert {k: v for k, v in remote.items() if k != "location"} == {k: v for k, v in local.items() if k != "location"}


def test_batches_on_s3_equals_local(s3_options):
    local = run_cli("batches", fixture_checkpoint(NAME), "--format", "csv").stdout
    remote = run_cli("batches", "s3://bucket/ckpt", "--format", "csv", *fs_args(s3_options)).stdout
    assert remote == local


def test_missing_remote_checkpoint_is_one_line(s3_options):
    result = run_cli("show", "s3://bucket/nope", *fs_args(s3_options), exit_code=2)
    assert "Error: checkpoint not found: s3://bucket/nope" in result.output


def test_bad_fs_option_is_one_line(s3_options):
    result = run_cli("show", "s3://bucket/ckpt", "--fs-option", "no_such_option=1", exit_code=2)
    assert "Error: cannot open s3://bucket/ckpt" in result.output and "--fs-option" in result.output
    result = run_cli("show", "s3://bucket/ckpt", "--fs-option", "novalue", exit_code=2)
    assert "--fs-option expects key=value" in result.output


def test_environment_credentials_are_used(s3_options, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    options = {k: v for k, v in s3_options.items() if k not in ("access_key", "secret_key")}
    doc = json.loads(run_cli("show", "s3://bucket/ckpt", "--format", "json", *fs_args(options)).stdout)
    assert doc["last_batch"] == fixture_facts(NAME)["last_batch"]


@pytest.mark.parametrize("name", ["agg_window_hdfs", "checkpoint_v2"])
def test_state_python_engine_on_s3_equals_local(s3_options, name):
    """The python state engine reads deltas, zips, SSTs and changelogs through the S3 file system."""
    from pyarrow import fs as pafs

    pafs.copy_files(str(fixture_checkpoint(name)), f"bucket/state-{name}",
                    destination_filesystem=pafs.S3FileSystem(**s3_options))
    remote = ["state", f"s3://bucket/state-{name}", "--engine", "python", "--format", "json", *fs_args(s3_options)]
    local = ["state", fixture_checkpoint(name), "--engine", "python", "--format", "json"]
    assert json.loads(run_cli(*remote).stdout)["stores"] == json.loads(run_cli(*local).stdout)["stores"]
    listing = ["--older-than-watermark", "--watermark", "watermark+1 hour"]
    rows = json.loads(run_cli(*local, *listing).stdout)
    assert rows and json.loads(run_cli(*remote, *listing).stdout) == rows
