"""Remote checkpoints through pyarrow.fs: a real S3 API (moto's server on loopback) and file:// URIs."""
from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from conftest import ROOT, fixture_checkpoint, fixture_facts, run_cli

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


def test_a_directory_inside_a_remote_checkpoint_is_answered_with_the_checkpoint(s3_options):
    for inside in ("state/0/1", "sources/0"):
        out = run_cli("show", f"s3://bucket/ckpt/{inside}", *fs_args(s3_options), exit_code=2).output
        assert out == (f"Error: not a Structured Streaming checkpoint: no offsets/, commits/ or metadata in "
                       f"s3://bucket/ckpt/{inside} (hint: did you mean s3://bucket/ckpt? It is the checkpoint that "
                       f"{inside}/ belongs to)\n")
    from pyarrow import fs as pafs

    s3 = pafs.S3FileSystem(**s3_options, allow_bucket_creation=True)  # a bucket of its own: moto's buckets are
    s3.create_dir("lone")  # shared by every server in this process, and other tests add checkpoints to theirs
    pafs.copy_files(str(fixture_checkpoint(NAME)), "lone/ckpt", destination_filesystem=s3)
    [row] = json.loads(run_cli("check", "s3://lone", "--format", "json", *fs_args(s3_options), exit_code=2).stdout)
    assert row["message"].endswith("(hint: did you mean s3://lone/ckpt? It holds offsets/ and commits/)")
    assert row["fix"]["text"] == "pass s3://lone/ckpt, the checkpoint's root (it holds offsets/ and commits/)"


def test_bad_fs_option_is_one_line(s3_options):
    result = run_cli("show", "s3://bucket/ckpt", "--fs-option", "no_such_option=1", exit_code=2)
    assert result.output.startswith("Error: unknown S3 option no_such_option: valid are access_key, anonymous, ")
    assert "endpoint_override" in result.output and "--fs-option KEY=VALUE" in result.output
    assert len(result.output.splitlines()) == 1
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


@pytest.mark.parametrize("kind", ["emptied", "flipped", "deleted"])
def test_a_damaged_table_file_on_s3_is_one_line_naming_it(s3_options, tmp_path, kind):
    """A snapshot's table file fetched from S3 is checked as a local one: the line names it in the checkpoint."""
    from pyarrow import fs as pafs
    from test_state_sst_damage import EXPECTED, HINT, NAME, damage

    shutil.copytree(fixture_checkpoint(NAME), tmp_path / "ckpt")
    damage(tmp_path / "ckpt", kind)
    pafs.copy_files(str(tmp_path / "ckpt"), f"bucket/sst-{kind}", destination_filesystem=pafs.S3FileSystem(**s3_options))
    result = run_cli("state", f"s3://bucket/sst-{kind}", "--engine", "python", *fs_args(s3_options), exit_code=2)
    where, what = EXPECTED[kind]
    assert result.stderr == f"Error: {where}: {what} (hint: {HINT})\n"


def test_the_readmes_example_works(s3_options):
    """The README's --fs-option example, pointed at the test's S3 endpoint."""
    readme = (ROOT / "README.md").read_text()
    example = next(line for line in readme.splitlines() if line.startswith("wmcheck show s3://") and "--fs-option" in line)
    args = shlex.split(example.replace("http://localhost:9000", s3_options["endpoint_override"]))[1:]
    env = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
    with patched_env(env):
        doc = json.loads(run_cli(*args, "--format", "json").stdout)
    assert doc["last_batch"] == fixture_facts(NAME)["last_batch"]


class patched_env:
    def __init__(self, env: dict) -> None:
        self.env, self.saved = env, {}

    def __enter__(self) -> None:
        self.saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)

    def __exit__(self, *exc) -> None:
        for key, value in self.saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)


STORE_MODULES = ("s3", "gcs", "azure", "hdfs")


def documented_options(store: str) -> list[tuple[str, str, str, str]]:
    """docs/remote.md's table of a store: (option, takes, what, example)."""
    import importlib

    from wmcheck.checkpoint.fs.options import TIMEOUT

    module = importlib.import_module(f"wmcheck.checkpoint.fs.{store}")
    return [(o.name, o.kind, o.help, o.example) for o in (*module.OPTIONS, TIMEOUT)]


@pytest.mark.parametrize("store", STORE_MODULES)
def test_docs_list_every_option_of_every_store(store):
    text = (ROOT / "docs" / "remote.md").read_text()
    for name, kind, help_text, example in documented_options(store):
        assert f"| `{name}` | {kind} | {help_text} | `{example}` |" in text, name


# companions an option needs to construct a store with it
KEYS = {"access_key": "AKIAIOSFODNN7EXAMPLE", "secret_key": "wJalrXUtnFEMI"}
ROLE = {"role_arn": "arn:aws:iam::123456789012:role/reader"}
COMPANIONS = {"access_key": KEYS, "secret_key": KEYS, "session_token": KEYS, "session_name": ROLE, "external_id": ROLE,
              "load_frequency": ROLE, "access_token": {"credential_token_expiration": "2030-01-01T00:00:00+00:00"},
              "credential_token_expiration": {"access_token": "ya29.token"},
              "client_secret": {"client_id": "00000000-0000-0000-0000-000000000001", "tenant_id": "00000000-0000-0000-0000-000000000002"},
              "tenant_id": {"client_id": "00000000-0000-0000-0000-000000000001", "client_secret": "secret"}}
CONSTRUCTORS = {"s3": "S3FileSystem", "gcs": "GcsFileSystem", "azure": "AzureFileSystem", "hdfs": "HadoopFileSystem"}


@pytest.mark.parametrize(("store", "option"), [(store, o[0]) for store in STORE_MODULES for o in documented_options(store)
                                                if o[0] != "timeout"])
def test_every_documented_option_is_taken_by_pyarrows_constructor(store, option):
    """Each option's example, converted as wmcheck converts it, builds pyarrow's real file system (HDFS: its
    constructor's keywords, which need a JVM to run)."""
    from pyarrow import fs as pafs

    from wmcheck.checkpoint.fs.options import store_options

    module = __import__(f"wmcheck.checkpoint.fs.{store}", fromlist=["OPTIONS"])
    example = {o.name: o.example for o in module.OPTIONS}
    given = {option: example[option], **COMPANIONS.get(option, {})}
    if store == "azure":
        given.setdefault("account_name", "myaccount")
    kwargs, timeout = store_options(given, module.OPTIONS, store)
    assert timeout == 30
    constructor = getattr(pafs, CONSTRUCTORS[store])
    if store == "hdfs":
        signature = constructor.__doc__.split("\n", 1)[0]
        assert re.search(rf"\b{option}=", signature), signature
        return
    constructor(**kwargs)


def test_an_option_of_the_wrong_kind_is_one_line():
    result = run_cli("show", "gs://bucket/ckpt", "--fs-option", "anonymous=maybe", exit_code=2)
    assert result.output == "Error: GCS option anonymous takes true or false, got 'maybe' (hint: e.g. --fs-option anonymous=true)\n"


@pytest.fixture
def silent_endpoint():
    """host:port of a server that accepts connections and never answers (a store behind a dead network)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                held.append(server.accept()[0])

    threading.Thread(target=accept, daemon=True).start()
    yield "127.0.0.1:%d" % server.getsockname()[1]
    server.close()
    for conn in held:
        conn.close()


def refused_endpoint() -> str:
    """host:port where nothing listens (connections refused)."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return f"127.0.0.1:{port}"


def store_args(scheme: str, endpoint: str) -> list[str]:
    options = {"s3": {"endpoint_override": f"http://{endpoint}", "region": "us-east-1", "access_key": "a", "secret_key": "b"},
               "gs": {"endpoint_override": endpoint, "scheme": "http", "anonymous": "true"}}[scheme]
    return [f"{scheme}://bucket/ckpt", *fs_args(options)]


@pytest.mark.parametrize("scheme", ["s3", "gs"])
def test_a_store_that_does_not_answer_times_out_in_one_line(silent_endpoint, scheme):
    started = time.monotonic()
    result = run_cli("show", *store_args(scheme, silent_endpoint), "--timeout", "1", exit_code=2)
    assert time.monotonic() - started < 8
    assert result.output.startswith(f"Error: no answer from {scheme}://bucket/ckpt within 1 s (hint: check the network")
    assert "--timeout 4" in result.output and len(result.output.splitlines()) == 1


@pytest.mark.parametrize("scheme", ["s3", "gs"])
def test_a_refused_endpoint_is_one_line(scheme):
    """The refusal is the error, well within the time allowed (GCS retries refused connections for its
    ``retry_time_limit``, kept short here so that a busy machine cannot turn the refusal into a timeout)."""
    retries = fs_args({"retry_time_limit": "1"}) if scheme == "gs" else []
    result = run_cli("show", *store_args(scheme, refused_endpoint()), *retries, "--timeout", "60", exit_code=2)
    assert result.output.startswith(f"Error: cannot read {scheme}://bucket/ckpt: "), result.output
    assert "internal error" not in result.output and len(result.output.splitlines()) == 1


@pytest.mark.parametrize("scheme", ["s3", "gs"])
def test_ctrl_c_ends_a_remote_wait_at_once(silent_endpoint, scheme):
    """A real SIGINT to the wmcheck process waiting (timeout 10 minutes) on a store that never answers."""
    process = subprocess.Popen([sys.executable, "-m", "wmcheck.cli", "show", *store_args(scheme, silent_endpoint),
                                "--timeout", "600"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2)
    assert process.poll() is None
    process.send_signal(signal.SIGINT)
    started = time.monotonic()
    out, err = process.communicate(timeout=30)
    assert time.monotonic() - started < 3
    assert (process.returncode, out, err) == (130, "", "\ninterrupted\n")


def test_azure_without_credentials_says_how_to_provide_them(monkeypatch, tmp_path):
    for name in ("AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZURE_FEDERATED_TOKEN_FILE",
                 "IDENTITY_ENDPOINT", "MSI_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no az
    result = run_cli("show", "abfss://container@account.dfs.core.windows.net/ckpt", exit_code=2)
    assert result.output.startswith("Error: no Azure credentials for abfss://container@account.dfs.core.windows.net/ckpt "
                                    "(hint: pass --fs-option account_key=KEY")
    assert len(result.output.splitlines()) == 1


def test_hdfs_without_a_jvm_names_what_is_missing(monkeypatch, tmp_path):
    from wmcheck.checkpoint.fs.hdfs import missing_runtime

    monkeypatch.delenv("JAVA_HOME", raising=False)
    result = run_cli("show", "hdfs://namenode:8020/ckpt", exit_code=2)
    assert result.output.startswith("Error: cannot open hdfs://namenode:8020/ckpt: pyarrow reads HDFS through Hadoop's "
                                    "libhdfs and a JVM, and JAVA_HOME is not set (hint: set JAVA_HOME to a JDK")
    assert len(result.output.splitlines()) == 1
    jdk = tmp_path / "jdk"
    (jdk / "lib" / "server").mkdir(parents=True)
    assert missing_runtime({"JAVA_HOME": str(jdk)}) == f"no libjvm.so under JAVA_HOME={jdk}"
    (jdk / "lib" / "server" / "libjvm.so").write_bytes(b"")
    hadoop = tmp_path / "hadoop"
    (hadoop / "lib" / "native").mkdir(parents=True)
    assert missing_runtime({"JAVA_HOME": str(jdk), "HADOOP_HOME": str(hadoop)}).startswith("libhdfs.so is not found")
    (hadoop / "lib" / "native" / "libhdfs.so").write_bytes(b"")
    assert missing_runtime({"JAVA_HOME": str(jdk), "HADOOP_HOME": str(hadoop)}) == "CLASSPATH holds no Hadoop jars"
    assert missing_runtime({"JAVA_HOME": str(jdk), "HADOOP_HOME": str(hadoop), "CLASSPATH": "/opt/hadoop/share/x.jar"}) is None


def test_file_uris_with_spaces_as_typed_or_percent_encoded(tmp_path):
    folder = tmp_path / "path with spaces"
    shutil.copytree(fixture_checkpoint(NAME), folder / "ckpt")
    local = json.loads(run_cli("show", folder / "ckpt", "--format", "json").stdout)
    for uri in (f"file://{folder}/ckpt", f"file://{quote(str(folder))}/ckpt"):
        doc = json.loads(run_cli("show", uri, "--format", "json").stdout)
        assert doc["location"] == f"file://{folder}/ckpt"
        assert {k: v for k, v in doc.items() if k != "location"} == {k: v for k, v in local.items() if k != "location"}
    assert ": ok: " in run_cli("check", f"file://{quote(str(folder))}/ckpt", "--select", "WM001").stdout


def test_a_bare_logged_input_path_is_looked_up_on_the_checkpoint_store(s3_options, tmp_path):
    """WM064 on S3: a file-source log entry rewritten as a bare path names a file of the checkpoint's bucket, not of
    the local disk; while that object is there the file is input read again, once it is gone nothing is."""
    from pyarrow import fs as pafs

    from wmcheck.checkpoint.validate import CHECKS, check_location

    from check_breaks import edit_json

    shutil.copytree(fixture_checkpoint(NAME).parent, tmp_path / "q")
    bare = "/bare-q/input/run2-002.json"
    edit_json(tmp_path / "q/checkpoint/sources/0/9.compact", -1, lambda e: e.update(path=bare))
    s3 = pafs.S3FileSystem(**s3_options)
    for part in ("checkpoint", "input"):
        pafs.copy_files(str(tmp_path / "q" / part), f"bucket/bare-q/{part}", destination_filesystem=s3)
    assert not os.path.exists(bare)
    where = "s3://bucket/bare-q/checkpoint"
    findings = check_location(where, fs_options=s3_options, checks=[CHECKS["WM064"]])
    assert [(f.code, f.path, f.message) for f in findings] == [("WM064", "sources/0/9.compact", (
        f"sources/0: 1 logged path without a scheme (e.g. {bare}; Spark logs and lists s3: URIs). On restart Spark takes "
        "the files it has read from this log, so it sees the input files these entries stood for as new and reads them "
        "again in the next batch (tested with Spark 4.3: rows counted twice)"))]
    s3.delete_file("bucket" + bare)
    assert check_location(where, fs_options=s3_options, checks=[CHECKS["WM064"]]) == []


def moved_to_s3(s3_options, tmp_path, name: str, bucket: str, logged: str, sink: bool = True):
    """A copy of fixture ``name`` (checkpoint, input, output) whose logs name its files under ``logged`` (an
    ``s3a://`` URI), uploaded to s3://``bucket``/q, a bucket of its own (moto lists a bucket by going through all of
    its keys, and other tests fill theirs)."""
    from pyarrow import fs as pafs

    from wmcheck.checkpoint import repair

    root = Path(shutil.copytree(fixture_checkpoint(name).parent, tmp_path / name))
    repair.run(str(root / "checkpoint"), repair.RelocateRequest(path_map={fixture_facts(name)["root"]: logged},
                                                                file_sink=str(root / "output") if sink else None),
               repair.RunOptions(execute=True, idle_ms=0))
    shutil.rmtree(root / "checkpoint" / "_wmcheck")
    s3 = pafs.S3FileSystem(**s3_options, allow_bucket_creation=True)
    s3.create_dir(bucket)
    for part in ("checkpoint", "input", "output"):
        pafs.copy_files(str(root / part), f"{bucket}/q/{part}", destination_filesystem=s3)
    return root


def test_relocate_on_s3_names_the_missing_files_and_the_path_map_that_finds_them(s3_options, tmp_path):
    """Logged files looked up on S3 (a listing per directory), and the --path-map under the checkpoint's parent that
    finds them, spelled in the logs' scheme; relocating with it leaves every file where the logs say."""
    moved_to_s3(s3_options, tmp_path, NAME, "moved", "s3a://moved/gone/old")
    ckpt, sink, opts = "s3://moved/q/checkpoint", "s3://moved/q/output", fs_args(s3_options)
    doc = json.loads(run_cli("relocate", ckpt, "--file-sink", sink, "--idle", "0", "--format", "json", *opts).stdout)
    assert doc["warnings"] == [
        "33 of the 33 file(s) the file-source and sink logs name are not where the logs say, e.g. "
        "s3a://moved/gone/old/input/run0-000.json: they are under s3a://moved/q; relocate them with --path-map "
        "s3a://moved/gone/old=s3a://moved/q"]
    run_cli("relocate", ckpt, "--file-sink", sink, "--path-map", "s3a://moved/gone/old=s3a://moved/q",
            "--idle", "0", "--execute", "--backup-dir", tmp_path / "backups", *opts)
    done = json.loads(run_cli("relocate", ckpt, "--file-sink", sink, "--idle", "0", "--format", "json", *opts).stdout)
    assert done["warnings"] == [] and done["notes"] == [
        "every file this checkpoint names is where it says (33 logged file(s) checked)"]


def test_check_on_s3_finds_the_last_batch_s_input_moved_with_the_checkpoint(s3_options, tmp_path):
    """WM050 (and WM032 for the sink's files) on S3: the input the last batch read is gone from where the logs say
    and found below the checkpoint's parent, which the fix maps it to."""
    moved_to_s3(s3_options, tmp_path, "stalled_event_time", "wm050", "s3a://wm050/before")
    found = json.loads(run_cli("check", "s3://wm050/q/checkpoint", "--file-sink", "s3://wm050/q/output",
                               "--format", "json", *fs_args(s3_options), exit_code=1).stdout)
    by_code = {f["code"]: f for f in found}
    assert sorted(by_code) == ["WM032", "WM050"]
    assert by_code["WM050"]["fix"]["request"]["path_map"] == {"s3a://wm050/before": "s3a://wm050/q"}
    assert by_code["WM032"]["fix"]["request"]["path_map"] == {"s3a://wm050/before": "s3a://wm050/q"}


def test_check_on_s3_finds_the_pending_batch_s_input_gone(s3_options, tmp_path):
    """WM049 on S3: the batch Spark re-runs names an input file that is not in the bucket."""
    from pyarrow import fs as pafs

    root = moved_to_s3(s3_options, tmp_path, "stalled_event_time", "wm049", "s3a://wm049/q", sink=False)
    s3 = pafs.S3FileSystem(**s3_options)
    last = fixture_facts("stalled_event_time")["last_batch"]
    s3.delete_file(f"wm049/q/checkpoint/commits/{last}")
    entry = json.loads((root / "checkpoint" / "sources/0" / str(last - 1)).read_text().splitlines()[1])
    s3.delete_file(entry["path"].replace("s3a://", ""))
    found = json.loads(run_cli("check", "s3://wm049/q/checkpoint", "--format", "json", *fs_args(s3_options),
                               exit_code=1).stdout)
    assert [(f["code"], f["path"]) for f in found if f["code"] in ("WM049", "WM050")] == [("WM049", f"offsets/{last}")]
    assert f"e.g. {entry['path']}" in next(f["message"] for f in found if f["code"] == "WM049")


def test_logged_input_on_the_checkpoint_s_store_is_sized_through_its_client(s3_options, tmp_path):
    """A file source's logged s3a:// files of a checkpoint on S3 are looked up with the checkpoint's own client (its
    --fs-options), not a store opened without them (which would ask AWS for the bucket's region and wait)."""
    from wmcheck.checkpoint.fs import open_fs
    from wmcheck.checkpoint.locations import stat_locations

    root = moved_to_s3(s3_options, tmp_path, "stalled_event_time", "sized", "s3a://sized/q", sink=False)
    entry = json.loads((root / "checkpoint" / "sources/0/0").read_text().splitlines()[1])["path"]
    size = (root / "input" / entry.rsplit("/input/", 1)[1]).stat().st_size
    home = open_fs("s3://sized/q/checkpoint", s3_options)
    assert stat_locations([entry, "s3a://sized/q/input/none.json"], None, home) == {
        entry: (True, size), "s3a://sized/q/input/none.json": (False, None)}
