"""The python state engine against the rows Spark's state reader returned for every fixture store
(``fixture.json``, recorded by the generator with pyspark's ``statestore`` reader): no JVM here."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from wmcheck.checkpoint.errors import UnsupportedError
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.statestore.discovery import Store
from wmcheck.statestore.engine.python_engine import read_store
from wmcheck.statestore.output.rows import jsonable, pylist
from wmcheck.statestore.targets import target

from conftest import ROOT, fixture_checkpoint, fixture_facts, fixture_names, run_cli

ALL_STORES = [(n, op, s) for n in fixture_names() for op, stores in fixture_facts(n)["state"].items() for s in stores]
ONE_STORE_JOINS = ("join_v3_p3", "join_v4_p3")
"""Join state formats 3 and 4 (both sides in one store, by column family): not read by the python engine."""
STORES = [(n, op, s) for n, op, s in ALL_STORES if n not in ONE_STORE_JOINS]


def reader_store(ckpt, op: int, name: str) -> Store:
    """The store as the fixture generator read it: by storeName, stateVarName or readRegisteredTimers."""
    operator = next(o for o in ckpt.operators if o.operator_id == op)
    if name.startswith(("$eventTimers", "$procTimers")):
        options = {"readRegisteredTimers": "true"}
    elif operator.name == "symmetricHashJoin" and name in ("left", "right"):
        options = {"joinSide": name}
    elif name in operator.stores:
        options = {"storeName": name}
    else:
        options = {"stateVarName": name}
    return Store(op, operator.name, name, {"operatorId": str(op), **options}, operator.num_partitions, name)


def as_collected(value):
    """JSON of a row as the generator recorded it from ``collect()``: maps as objects, not key/value lists."""
    if isinstance(value, dict):
        return {k: as_collected(v) for k, v in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(e, dict) and set(e) == {"key", "value"} for e in value):
            return {str(e["key"]): as_collected(e["value"]) for e in value}
        return [as_collected(v) for v in value]
    return value


def canonical(rows: list[dict]) -> list[str]:
    return sorted(json.dumps(as_collected(r), sort_keys=True) for r in rows)


@pytest.mark.parametrize("name,op,store", [t for t in ALL_STORES if t[0] in ONE_STORE_JOINS])
def test_one_store_joins_are_refused_in_one_line(name, op, store):
    ckpt = open_checkpoint(str(fixture_checkpoint(name)))
    version = name.split("_")[1][1:]
    with pytest.raises(UnsupportedError, match=f"a stream-stream join in state format {version} .both sides in one "
                                               "store, by column family. is not read by the python engine"):
        read_store(ckpt, reader_store(ckpt, int(op), store), target(ckpt))


@pytest.mark.parametrize("name,op,store", STORES)
def test_rows_equal_spark_reader_rows(name, op, store):
    ckpt = open_checkpoint(str(fixture_checkpoint(name)))
    read = read_store(ckpt, reader_store(ckpt, int(op), store), target(ckpt))
    got = [jsonable(r) for r in pylist(read.raw)]
    want = fixture_facts(name)["state"][op][store]["rows"]
    assert canonical(got) == canonical(want)
    assert len(got) == sum(fixture_facts(name)["state"][op][store]["rows_per_partition"].values())


@pytest.mark.parametrize("name,op,store", STORES)
def test_fast_and_reference_decoders_give_identical_tables(name, op, store, monkeypatch):
    """Every fixture store read with the column-wise decoder and with the row-by-row reference only: the
    same Arrow table; where the fast path applies (plain stores) it proves every chunk itself."""
    from test_unsafe_row import same_arrow

    from wmcheck.statestore.encodings import unsafe_columns
    from wmcheck.statestore.rocksdb import files as rocksdb_files

    ckpt = open_checkpoint(str(fixture_checkpoint(name)))
    chosen = reader_store(ckpt, int(op), store)
    decoded: list = []
    real = unsafe_columns.decode
    monkeypatch.setattr(unsafe_columns, "decode", lambda *args: decoded.append(real(*args)) or decoded[-1])
    snapshots: list = []
    real_rows = rocksdb_files.snapshot_rows
    monkeypatch.setattr(rocksdb_files, "snapshot_rows", lambda *args: snapshots.append(args) or real_rows(*args))
    fast = read_store(ckpt, chosen, target(ckpt))
    got = fast.raw
    tables_read = len(snapshots)
    assert decoded == [] or fast.plan.columns_of is not None
    decoded_fast = list(decoded)
    reference = read_store(ckpt, chosen, target(ckpt), fast=False).raw
    assert len(decoded) == len(decoded_fast)  # the reference never calls the fast decoder
    assert len(snapshots) == tables_read  # nor the table files' reader: RocksDB reads the snapshots
    rocksdb = [p for o in ckpt.operators if o.operator_id == int(op) for p in o.partitions if p.provider == "rocksdb"]
    assert bool(tables_read) == any(f.format.decoder == "rocksdb-zip" for p in rocksdb for f in p.files)
    assert same_arrow(got, reference)
    assert all(d is not None for d in decoded_fast)
    prefixed = fixture_facts(name)["operators"][int(op)]["operator_name"] == "sessionWindowStateStoreSaveExec"
    if fast.plan.columns_of is not None and got.num_rows and not prefixed:  # a plain store: the fast path decoded it
        assert decoded_fast  # (session windows' prefix-scan keys are decoded row by row, chunk by chunk)


@pytest.mark.parametrize("name,op,store", STORES)
def test_evicted_rows_alone_are_the_whole_read_filtered(name, op, store):
    """The rows a watermark evicts, with each chunk's event-time column read first and the evicted rows alone decoded
    (the fast path of --older-than-watermark), are those of the whole read filtered (the reference), table for table,
    at watermarks that evict none, some and all of the store's rows."""
    import dataclasses

    from test_unsafe_row import same_arrow

    from wmcheck.statestore.engine.python_engine import older_tables, state_rows

    ckpt = open_checkpoint(str(fixture_checkpoint(name)))
    read = read_store(ckpt, reader_store(ckpt, int(op), store), target(ckpt))
    whole = dataclasses.replace(read, plan=dataclasses.replace(read.plan, leaf_of=None))
    times = [t for t in state_rows(read.raw, read.store, read.rule, 0).column("event_time_ms").to_pylist() if t is not None]
    evicting = set()
    for wm in sorted({read.target.watermark_ms, -(1 << 50), 1 << 50, *times[:1], *sorted(times)[len(times) // 2:][:1]}):
        at = dataclasses.replace(read, target=dataclasses.replace(read.target, watermark_ms=wm))
        partitions = range(read.store.num_partitions or 0)
        fast = [t for p in partitions for t in older_tables(at, p)]
        reference = [t for p in partitions for t in older_tables(dataclasses.replace(whole, target=at.target), p)]
        assert len(fast) == len(reference) and all(same_arrow(a, b) for a, b in zip(fast, reference)), wm
        evicting.add(sum(t.num_rows for t in fast))
    if read.plan.leaf_of is not None and read.rule.column is not None and times:
        assert len(evicting) > 1  # watermarks that evict different rows were tried


@pytest.mark.parametrize("name,op,store", STORES)
def test_no_evicted_rows_have_the_columns_of_the_whole_read(name, op, store):
    """The empty table the Parquet writer takes its schema from (built without Arrow's compute functions) has the
    columns of the whole read's rows without ``older``, field for field."""
    from wmcheck.statestore.engine.python_engine import reader_schema, state_rows
    from wmcheck.statestore.engine.python_jobs import _empty_older

    ckpt = open_checkpoint(str(fixture_checkpoint(name)))
    read = read_store(ckpt, reader_store(ckpt, int(op), store), target(ckpt))
    whole = state_rows(reader_schema(read.plan).empty_table(), read.store, read.rule, 0).drop_columns(["older"])
    assert _empty_older(read).num_rows == 0
    assert _empty_older(read).schema.equals(whole.schema, check_metadata=True)


NO_JVM = """
import atexit, importlib, os, shutil, tempfile
shadow = tempfile.mkdtemp()  # the packages directory without pyspark and py4j: as if never installed
atexit.register(shutil.rmtree, shadow)
for i, entry in enumerate(sys.path):
    if any(os.path.isdir(os.path.join(entry, name)) for name in ("pyspark", "py4j")):
        for name in os.listdir(entry):
            if not name.startswith(("pyspark", "py4j")):
                os.symlink(os.path.join(entry, name), os.path.join(shadow, name))
        sys.path[i] = shadow
importlib.invalidate_caches()
assert importlib.util.find_spec("pyspark") is None and importlib.util.find_spec("py4j") is None
"""
AGG = fixture_checkpoint("agg_window_hdfs")


def _wmcheck(args: list[str], env: dict[str, str] | None = None, prelude: str = NO_JVM) -> subprocess.CompletedProcess:
    """wmcheck in a new process with pyspark and py4j absent from the import path and Java unreachable."""
    code = f"import sys\n{prelude}\nfrom wmcheck.cli.main import main\nsys.argv = ['wmcheck', *sys.argv[1:]]\nmain()"
    env = {**os.environ, "JAVA_HOME": "/nonexistent", "PATH": "/nonexistent", **(env or {})}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)


@pytest.mark.parametrize("name,args", [
    ("agg_window_hdfs", []),
    ("tws_pandas", ["--older-than-watermark", "--watermark", "watermark+1 hour"]),
    ("checkpoint_v2", ["--batch", "7", "--older-than-watermark", "--watermark", "watermark+1 hour"]),
])
def test_runs_without_java_or_pyspark(name, args):
    """auto picks the python engine: the same JSON as in-process, with no pyspark, py4j or Java reachable."""
    done = _wmcheck(["state", str(fixture_checkpoint(name)), *args, "--format", "json"])
    assert done.returncode == 0 and done.stderr == "", done.stderr
    want = run_cli("state", fixture_checkpoint(name), *args, "--engine", "python", "--format", "json").stdout
    assert json.loads(done.stdout) == json.loads(want)
    if not args:
        assert json.loads(done.stdout)["engine"] == "python"


@pytest.mark.parametrize("args,first_line", [
    ([], f"checkpoint: {AGG}"),
    (["--older-than-watermark", "--watermark", "watermark+1 hour", "--format", "csv"],
     "operator_id,store,partition_id,key,value,event_time_ms"),
    (["--older-than-watermark", "--watermark", "watermark+1 hour", "--format", "parquet", "--output", "{tmp}/rows.parquet"],
     "wrote 4 rows to {tmp}/rows.parquet"),
])
def test_state_loads_neither_pandas_nor_arrows_query_engine(args, first_line, tmp_path):
    """pyarrow imports pandas on its first conversion of Python values (a third of a second), and a group-by
    loads Arrow's query engine: the python engine's command needs neither (numpy it needs: rows are decoded
    column-wise with it)."""
    prelude = ("import atexit\natexit.register(lambda: print(sorted({'pandas', 'pyarrow.acero'} & set(sys.modules)), "
               "file=sys.stderr))")
    done = _wmcheck(["state", str(AGG), *[a.format(tmp=tmp_path) for a in args], "--jobs", "1"], prelude=prelude)
    assert (done.returncode, done.stderr) == (0, "[]\n")
    assert done.stdout.splitlines()[0] == first_line.format(tmp=tmp_path)


@pytest.mark.parametrize("own,hidden", [(True, "No module named 'pandas'"), (False, "None")])
def test_pandas_is_hidden_only_in_wmchecks_own_process_and_only_during_the_command(own, hidden):
    code = ("from wmcheck.cli.process import lean_imports, own_process\n"
            f"{'own_process()' if own else ''}\n"
            "def attempt():\n    with lean_imports():\n        import numpy\n        try:\n            import pandas\n"
            "        except ModuleNotFoundError as exc:\n            return str(exc)\n"
            "print(attempt())\nimport numpy, pandas\nprint(pandas.DataFrame({'a': numpy.arange(2)}).shape)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == f"{hidden}\n(2, 1)\n"


@pytest.mark.skipif((os.cpu_count() or 1) < 2 or not os.path.isdir("/proc/self/task"), reason="one core: BLAS starts no thread")
@pytest.mark.parametrize("own", [True, False])
def test_numpys_blas_gets_one_thread_only_in_wmchecks_own_process_and_only_during_the_command(own):
    """OpenBLAS starts a thread per core when numpy is imported (a twentieth of a second): the python engine
    multiplies no matrices. The variable is set for the command only, and only when wmcheck owns the process."""
    code = ("import os\nfrom wmcheck.cli.process import lean_imports, own_process\n"
            f"{'own_process()' if own else ''}\n"
            "os.environ.pop('OPENBLAS_NUM_THREADS', None)\n"
            "with lean_imports():\n    import numpy\n"
            "print(len(os.listdir('/proc/self/task')) == 1, os.environ.get('OPENBLAS_NUM_THREADS'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "OMP_NUM_THREADS": ""})
    assert done.stdout == f"{own} None\n"


WORKER_CASES = [("agg_window_hdfs", []), ("dedup_rocksdb_p3", []), ("join_stream_stream", ["--join-side", "left"]),
                ("checkpoint_v2", ["--batch", "7"])]


@pytest.mark.parametrize("name,args", WORKER_CASES)
def test_worker_processes_read_what_one_process_reads(name, args, tmp_path):
    """``--jobs 2`` (ranges of a store's partitions per task, in two forked workers streaming Arrow tables back) gives the
    summary and the evicted rows ``--jobs 1`` gives; Parquet streamed from the workers holds the same rows."""
    ckpt = str(fixture_checkpoint(name))
    listing = ["--older-than-watermark", "--watermark", "watermark+1 hour"]
    for extra in ([], listing):
        one = run_cli("state", ckpt, *args, *extra, "--engine", "python", "--jobs", "1", "--format", "json").stdout
        two = _wmcheck(["state", ckpt, *args, *extra, "--engine", "python", "--jobs", "2", "--format", "json"], prelude="")
        assert (two.returncode, two.stderr) == (0, "")
        assert json.loads(two.stdout) == json.loads(one)
    import pyarrow.parquet as pq

    tables = []
    for jobs in ("1", "2"):
        out = tmp_path / f"jobs{jobs}.parquet"
        done = _wmcheck(["state", ckpt, *args, *listing, "--engine", "python", "--jobs", jobs, "--format", "parquet",
                         "--output", str(out)], prelude="")
        assert done.returncode == 0, done.stderr
        tables.append(pq.read_table(out).sort_by([("event_time_ms", "ascending"), ("partition_id", "ascending")]))
    assert tables[0].num_rows and tables[0].equals(tables[1])


def _late_failure(job: float, task: int):
    """Task 1 fails after ``job`` seconds, task 3 at once; the others yield their number."""
    import time

    if task == 1:
        time.sleep(job)
    if task in (1, 3):
        raise ValueError(f"task {task}")
    yield task


def test_workers_raise_the_error_a_run_in_one_process_raises():
    """Two workers, task 3 failing long before task 1: the error raised is task 1's, as with one process, after the
    outputs of the tasks before it."""
    from wmcheck.statestore.engine.workers import run

    for jobs in (1, 2):
        seen: list[int] = []
        with pytest.raises(ValueError, match="^task 1$"):
            seen.extend(run(_late_failure, 0.5, [0, 1, 2, 3, 4], jobs=jobs))
        assert 0 in seen and 1 not in seen and 3 not in seen


def _killed_holding_a_directory(where: str, task: int):
    """Makes a temporary directory with a file in it, says where, and is killed (no clean-up runs)."""
    import signal
    import tempfile

    made = tempfile.mkdtemp(prefix="wmcheck-rocksdb-")
    with open(os.path.join(made, "CURRENT"), "w") as fh:
        fh.write("x")
    with open(where, "w") as fh:
        fh.write(made)
    os.kill(os.getpid(), signal.SIGKILL)
    yield task


def test_a_killed_worker_leaves_no_temporary_files(tmp_path):
    """A worker killed at any instruction (here holding a directory it made) leaves nothing: the workers' temporary
    files live in one directory removed once they have ended."""
    import tempfile

    from wmcheck.checkpoint.errors import CheckpointError
    from wmcheck.statestore.engine.workers import run

    where = str(tmp_path / "made")
    with pytest.raises(CheckpointError, match=r"a state worker process stopped \(exit code -9\)"):
        list(run(_killed_holding_a_directory, where, [0], jobs=2))
    made = open(where).read()
    assert os.path.dirname(os.path.dirname(made)) == tempfile.gettempdir()
    assert os.path.basename(os.path.dirname(made)).startswith("wmcheck-workers-")
    assert not os.path.exists(os.path.dirname(made))


def _growing(held: list, task: int):
    """Holds 8 MiB more every 20 ms (written, so resident) and yields only after 4 s."""
    import time

    for _ in range(200):
        held.append(b"x" * (8 << 20))
        time.sleep(0.02)
    yield task


def test_one_job_past_its_budget_is_interrupted_where_it_is():
    """With one job the tasks run in this process; past the budget the guard interrupts the task where it is (it
    yields nothing for seconds), and the signal's handler is put back."""
    import signal

    from wmcheck.checkpoint.errors import CheckpointError
    from wmcheck.statestore.engine.workers import resident, run

    held: list[bytes] = []
    before = signal.getsignal(signal.SIGUSR1)
    with pytest.raises(CheckpointError, match="of memory, over"):
        list(run(_growing, held, [0], jobs=1, max_memory=resident(os.getpid()) + (64 << 20)))
    assert 8 <= len(held) < 200
    held.clear()
    assert signal.getsignal(signal.SIGUSR1) == before


def test_a_memory_budget_stops_the_read_with_one_line(tmp_path):
    """The error names who held the memory: with workers, fewer of them is a way out; with one job, not."""
    out = tmp_path / "rows.parquet"
    hints = {"2": ("wmcheck and its workers", r"raise --max-memory, or use fewer --jobs \(each worker holds a chunk of a partition\)"),
             "1": ("wmcheck", r"raise --max-memory \(the read holds a chunk of a partition at a time\)")}
    for jobs, (who, hint) in hints.items():
        done = _wmcheck(["state", str(fixture_checkpoint("dedup_rocksdb_p3")), "--older-than-watermark", "--format", "parquet",
                         "--output", str(out), "--max-memory", "1M", "--jobs", jobs], prelude="")
        assert (done.returncode, done.stdout) == (2, "")
        assert re.fullmatch(rf"Error: stopped: {who} used \d+ MiB of memory, over --max-memory 1 MiB \(hint: {hint}\)\n",
                            done.stderr), done.stderr
        assert not out.exists()
    bad = _wmcheck(["state", str(fixture_checkpoint("dedup_rocksdb_p3")), "--max-memory", "lots"], prelude="")
    assert (bad.returncode, bad.stderr) == (2, "Error: --max-memory expects a size such as 2G or 512M, got 'lots' (hint: e.g. --max-memory 4G)\n")


def test_a_row_that_does_not_decode_is_one_line_naming_its_partition(copy_fixture):
    """A value schema wider than the rows Spark wrote (one more long field than the rows hold)."""
    from dataclasses import replace

    from wmcheck.statestore.formats.schema import StructField, StructType, parse_state_schema
    from wmcheck.statestore.formats.schema_write import serialize_state_schema

    ckpt = copy_fixture("agg_window_hdfs") / "checkpoint"
    path = ckpt / "state" / "0" / "0" / "_metadata" / "schema"
    parsed = parse_state_schema(path.read_bytes(), "schema")
    family = parsed.column_families[0]
    wider = StructType((*family.value_schema.fields, StructField("more", "long", True, {})))
    path.write_bytes(serialize_state_schema(replace(parsed, column_families=(replace(family, value_schema=wider),))))
    (path.parent / ".schema.crc").unlink()
    result = run_cli("state", ckpt, "--engine", "python", exit_code=2)
    assert result.stdout == ""
    assert result.stderr == (
        "Error: state/0/0: a row of store 'default' at version 13: bytes do not decode as an UnsafeRow of the schema: "
        "unpack_from requires a buffer of at least 32 bytes for unpacking 8 bytes at offset 24 (actual buffer "
        "size is 24) (hint: the state files or the state schema are not what Spark wrote)\n")


def pinned_copy(copy_fixture, key: str, value: str) -> Path:
    """agg_window_hdfs whose last offsets pin ``key`` to ``value`` (instead of what Spark pinned)."""
    ckpt = copy_fixture("agg_window_hdfs") / "checkpoint"
    last = max((p for p in (ckpt / "offsets").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    text, count = re.subn(f'"{re.escape(key)}":"[^"]*"', f'"{key}":"{value}"', last.read_text())
    assert count == 1
    last.write_text(text)
    return ckpt


def lzf_copy(copy_fixture) -> Path:
    return pinned_copy(copy_fixture, "spark.sql.streaming.stateStore.compression.codec", "lzf")


@pytest.mark.parametrize("key,value,message", [
    ("spark.sql.streaming.stateStore.compression.codec", "lzf",
     "state compression codec 'lzf' is not read by the python engine (it reads lz4, zstd, snappy)"),
    ("spark.sql.streaming.stateStore.encodingFormat", "avro",
     "state encoding format 'avro' is not read by the python engine here (unsaferow; avro for transformWithState on RocksDB)"),
])
def test_python_engine_refuses_unsupported_before_reading(copy_fixture, key, value, message):
    """Spark pins these confs in the offsets log; what the python engine does not read fails before any state file is opened."""
    ckpt = pinned_copy(copy_fixture, key, value)
    for f in (ckpt / "state").rglob("*.delta"):
        f.write_bytes(b"not read")
    result = run_cli("state", ckpt, "--engine", "python", exit_code=2)
    assert result.stdout == ""
    assert result.stderr == f"Error: {message} (hint: use --engine spark)\n"


def test_auto_falls_back_to_spark_with_one_line(copy_fixture):
    done = _wmcheck(["state", str(lzf_copy(copy_fixture))], prelude="")
    assert done.returncode == 2 and done.stdout == ""
    note, error = done.stderr.splitlines()
    assert note == "note: reading with Spark: state compression codec 'lzf' is not read by the python engine (it reads lz4, zstd, snappy)"
    assert error.startswith("Error: no Java found (JAVA_HOME=/nonexistent)")


def test_python_api_returns_arrow_tables():
    import pyarrow as pa

    from wmcheck.statestore import engines

    table = engines.read_state(str(AGG), operator=0, engine="python")
    assert isinstance(table, pa.Table) and table.column_names == ["key", "value", "partition_id"]
    assert table.num_rows == 4 and table.schema.field("key").type.field("window").type.field("end").type == pa.timestamp("us", "UTC")
    older = engines.older_than_watermark(str(AGG), operator=0, watermark_ms=1704067290000, engine="python")
    assert older.column_names == ["operator_id", "store", "partition_id", "key", "value", "event_time_ms"]
    assert sorted(older.column("event_time_ms").to_pylist()) == [1704067290000, 1704067290000]  # windows ending 00:01:30
    doc = engines.summarize(str(AGG), engine="python")
    assert doc.engine == "python" and doc.stores[0].rows_per_partition == {"0": 1, "1": 0, "2": 3}


@pytest.mark.parametrize("type_name", ["interval", "interval year to month", "interval month", "variant"])
def test_types_without_proof_are_refused(type_name):
    from wmcheck.statestore.encodings.unsafe_row import check_supported
    from wmcheck.statestore.formats.schema import StructField, StructType

    with pytest.raises(UnsupportedError, match=f"state column type '{type_name}' is not decoded by the python engine"):
        check_supported(StructType((StructField("k", "long", True, {}), StructField("x", type_name, True, {}))))


def test_checksummed_rocksdb_values_lose_their_framing_and_damage_is_one_error():
    """RocksDB values under rowChecksum.enabled: checksum, little-endian size, row, merged elements joined by ','."""
    from wmcheck.checkpoint.errors import MalformedFileError
    from wmcheck.statestore.formats.row_checksums import RowPlace, verified_values

    place = RowPlace(0, "default", 1, 2, "state/0/1/2.changelog")

    def frame(checksum: int, row: bytes) -> bytes:
        return checksum.to_bytes(4, "little", signed=True) + len(row).to_bytes(4, "little") + row

    # CRC32C("k" + "abc") and CRC32C("k" + "de"), computed independently of google_crc32c
    abc, de = _crc32c_reference(b"kabc"), _crc32c_reference(b"kde")
    framed = frame(abc, b"abc") + b"," + frame(de, b"de")
    assert verified_values(b"k", framed, place) == b"abc,de"
    # elements put in one batch (or compacted into an SST) come without the ','
    assert verified_values(b"k", frame(abc, b"abc") + frame(de, b"de"), place) == b"abc,de"
    for damaged in [framed[:-1], framed[:6]]:
        with pytest.raises(MalformedFileError, match=f"expected a list value of size-framed elements \\({len(damaged)} bytes") as caught:
            verified_values(b"k", damaged, place)
        assert caught.value.path == "state/0/1/2.changelog"
    with pytest.raises(MalformedFileError) as caught:
        verified_values(b"k", frame(abc, b"abc") + b"," + frame(de, b"dx"), place)
    assert str(caught.value) == (
        "state/0/1/2.changelog: row checksum verification failed for stateStore=StateStoreId[ operatorId=0, partitionId=1, "
        f"storeName=default ] at version 2: the row may be corrupted (expected checksum {de}, computed {_crc32c_reference(b'kdx')}; "
        "Spark's reader fails with STATE_STORE_ROW_CHECKSUM_VERIFICATION_FAILED) "
        "(hint: the state files are damaged: restore them from a backup or rewind to a batch before them)")


def _crc32c_reference(data: bytes) -> int:
    """Bitwise CRC32C (Castagnoli, reflected 0x82F63B78), as Java's signed int."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    crc ^= 0xFFFFFFFF
    return crc - (1 << 32) if crc >= 1 << 31 else crc


CHANGES = [("put", b"a", b"9"), ("delete", b"b", None), ("merge", b"c", b"x"), ("merge", b"e", b"y"), ("delete", b"e", None),
           ("merge", b"e", b"z"), ("put", b"f", b"6"), ("merge", b"f", b"7"), ("delete", b"g", None), ("merge", b"d", b"p"),
           ("merge", b"d", b"q"), ("merge", b"h", b"1"), ("merge", b"h", b"2")]


@pytest.mark.parametrize("rows", [1, 2, 64])
def test_increments_over_a_streamed_full_copy_give_the_state_a_whole_load_gives(monkeypatch, rows):
    """Puts, deletes and merges of changelogs applied over a full copy read in chunks: the state of applying
    them in order to the whole copy (a merge appends ',' and the value, onto nothing the value alone)."""
    from types import SimpleNamespace

    from wmcheck.statestore.engine import store_files

    base = {b"a": b"1", b"b": b"2", b"c": b"3", b"d": b"4", b"i": b"5"}
    want = dict(base)
    for kind, key, value in CHANGES:
        if kind == "delete":
            want.pop(key, None)
        elif kind == "merge" and key in want:
            want[key] = want[key] + b"," + value
        else:
            want[key] = value
    items = list(base.items())
    monkeypatch.setattr(store_files, "decompress", lambda data, codec, path: data)
    monkeypatch.setattr(store_files, "changelog_records", lambda data, path: iter(CHANGES))
    monkeypatch.setattr(store_files.PartitionStream, "_full_copy", lambda self, f, n: iter(
        ([k for k, _ in items[i:i + n]], [v for _, v in items[i:i + n]]) for i in range(0, len(items), n)))
    stream = object.__new__(store_files.PartitionStream)
    stream.fs = SimpleNamespace(read_many=lambda paths: {p: b"" for p in paths})
    stream.part = SimpleNamespace(operator_id=0, store="default", partition=0, directory="state/0/0", provider="rocksdb")
    stream.version, stream.codec, stream.checksums, stream.meta, stream.fast = 2, "lz4", False, None, False
    stream.chain = [SimpleNamespace(format=SimpleNamespace(role="base", decoder="rocksdb-zip"), path="1.zip", version=1),
                    SimpleNamespace(format=SimpleNamespace(role="increment", decoder="rocksdb-changelog"), path="2.changelog", version=2)]
    got: dict[bytes, bytes] = {}
    for keys, values in stream.chunks(rows):
        assert len(keys) <= rows and not set(keys) & set(got) and all(type(v) is bytes for v in values)
        got.update(zip(keys, values))
    assert got == want == {b"a": b"9", b"c": b"3,x", b"d": b"4,p,q", b"e": b"z", b"f": b"6,7", b"h": b"1,2", b"i": b"5"}


@pytest.mark.parametrize(("part_rows", "groups"), [(1, [1] * 7), (3, [3, 3, 1]), (10 ** 6, [7])])
def test_parquet_parts_hold_the_evicted_rows_of_several_chunks(monkeypatch, tmp_path, part_rows, groups):
    """A worker encodes the evicted rows of its task ``PART_ROWS`` at a time, across partitions: the file holds every
    evicted row, in row groups of that many rows but the last (chunks of 1 row here; one job: one task)."""
    import pyarrow.parquet as pq

    from wmcheck.statestore.engine import python_jobs
    from wmcheck.statestore.engine.store_files import PartitionStream
    from wmcheck.statestore.output.rows import write_parts
    from wmcheck.statestore.plan import plan_state

    monkeypatch.setattr(PartitionStream.chunks, "__defaults__", (1,))
    monkeypatch.setattr(python_jobs, "PART_ROWS", part_rows)
    engine = python_jobs.PythonEngine(jobs=1)
    ckpt = open_checkpoint(str(fixture_checkpoint("sliding_window")))
    reads = engine.read_stores(plan_state(ckpt, watermark_ms=10 ** 13, engine="python"))
    out = tmp_path / "rows.parquet"
    written = write_parts(str(out), reads, engine.older_parts(reads))
    want = engine.older_tables(reads)[0]
    assert written == want.num_rows == 7
    order = [("partition_id", "ascending"), ("event_time_ms", "ascending")]
    assert pq.read_table(out).sort_by(order).equals(want.sort_by(order))
    meta = pq.ParquetFile(out).metadata  # 5 rows in one partition, 2 in another
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == groups


def test_a_store_is_read_in_ranges_of_partitions_a_few_per_job():
    """One job reads each store in one task; several split a store in up to 4 consecutive ranges per job."""
    from types import SimpleNamespace

    from wmcheck.statestore.engine.python_jobs import _tasks

    reads = [SimpleNamespace(store=SimpleNamespace(num_partitions=n)) for n in (200, 3, 0)]
    assert _tasks("parts", reads, 1) == [("parts", 0, range(0, 200)), ("parts", 1, range(0, 3))]
    two = _tasks("parts", reads, 2)
    assert [t[2] for t in two if t[1] == 0] == [range(k, k + 25) for k in range(0, 200, 25)]
    assert [t[2] for t in two if t[1] == 1] == [range(0, 1), range(1, 2), range(2, 3)]
    assert [t[1] for t in two].count(2) == 0


@pytest.mark.parametrize(("name", "args"), [
    ("join_stream_stream", ()), ("join_stream_stream", ("--operator", "0", "--format", "csv")),
    ("agg_then_agg", ("--older-than-watermark",)), ("agg_then_agg", ("--older-than-watermark", "--format", "json")),
    ("agg_then_agg", ("--older-than-watermark", "--limit", "1")), ("join_stream_stream", ("--older-than-watermark",))])
def test_state_plans_its_read_once(monkeypatch, tmp_path, name, args):
    """One planning pass: the stores are selected once, each store's file plan and the operators' watermarks are
    worked out once, whatever the output (the output renders what the engine read, it does not call the engine); a
    join side whose state watermark is unknown is refused before any store's files are planned."""
    from wmcheck.statestore import discovery, plan
    from wmcheck.statestore.engine import presentation, python_engine

    calls: dict[str, int] = {}

    def counted(module, attr):
        real = getattr(module, attr)

        def wrapper(*a, **k):
            calls[attr] = calls.get(attr, 0) + 1
            return real(*a, **k)
        monkeypatch.setattr(module, attr, wrapper)

    stores = len(discovery.select(open_checkpoint(str(fixture_checkpoint(name)))))
    for module, attr in [(plan, "select"), (discovery, "select"), (plan, "operator_watermarks"),
                         (presentation, "plan_store"), (python_engine, "plan_store")]:
        counted(module, attr)
    refused = name == "join_stream_stream" and "--older-than-watermark" in args
    run_cli("state", fixture_checkpoint(name), "--engine", "python", *args, exit_code=2 if refused else 0)
    assert calls == ({"select": 1, "operator_watermarks": 1} if refused else
                     {"select": 1, "operator_watermarks": 1, "plan_store": stores})
