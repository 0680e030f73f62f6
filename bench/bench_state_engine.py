"""Benchmark the python state engine against a hand-written PySpark read of the same state, in one run.

Usage: python bench/bench_state_engine.py [--keys 1000000] [--big-keys 5000000] [--scale-keys 10000000] [--repeat 3]
[--workdir DIR] [--s3]

Every command runs in a new process as a user runs it, alternating with what it is compared with, so
load from other processes hits both alike; the machine's load average is printed before and after.

* small: fixture ``agg_window_hdfs`` (HDFS state, 3 partitions): ``wmcheck state CKPT --engine python
  --format json`` against a script that reads every row with ``spark.read.format("statestore")`` and
  prints them as JSON (target: python engine >= 20x faster);
* large: the ``--keys`` RocksDB state of ``bench_state.py`` (written there, kept in ``--workdir``):
  ``wmcheck state --engine python --older-than-watermark --format parquet`` against that bench's
  PySpark script doing the same read, filter and Arrow write (target: >= 20x faster);
* per core and scaling: the same command with ``--jobs 1`` and ``--jobs 2`` on the ``--keys`` RocksDB
  state, an HDFS state of as many keys, the ``--big-keys`` and the ``--scale-keys`` RocksDB states (the last in
  ``--scale-partitions`` partitions: a state whose read outlasts the command's start-up many times over, in more
  partitions than workers, as production state is, for the scaling of production state): state rows per second of
  wall time with one worker and per CPU second of the whole command (target: >= 1M rows/s, the process's
  start included), per CPU second after the start-up (the CPU of the same command on fixture
  ``dedup_rocksdb_p3``, a few keys, subtracted), and the speed-up of two (target: >= 1.7x on 2 cores), of
  the whole command and of what follows the start-up (its wall time subtracted from both);
* memory: the peak RSS of the whole read (``--jobs 1``: one process) at ``--keys`` and ``--big-keys``
  (target: within 10% of each other);
* remote: the same command on a copy of the ``--keys`` RocksDB checkpoint in a local S3-compatible server
  (moto's, on loopback) against the local read (``--s3``; needs ``moto[server]``);
* wide: the same comparison as large on a RocksDB state of ``--wide-keys`` keys in ``--wide-partitions`` partitions
  (hundreds of small partitions: what each one costs), and its rows per CPU second with ``--jobs 1``;
* ``wmcheck check`` of the ``--keys`` RocksDB checkpoint, which decodes every state file Spark loads for
  the next batch, against the PySpark script's time to load and read that store (target: faster).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from as_installed import compile_wmcheck  # noqa: E402
from bench_state import BASELINE, CONF, DELAY_S, GENERATE, SPAN_S  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "fixtures" / "agg_window_hdfs" / "checkpoint"
TINY = ROOT / "fixtures" / "dedup_rocksdb_p3" / "checkpoint"
"""A RocksDB state of a few keys: the command's start-up and the files it writes, with next to no rows."""
SMALL_BASELINE = """
import json, sys
from pyspark.sql import SparkSession
ckpt = sys.argv[1]
spark = SparkSession.builder.master("local[*]").config("spark.ui.enabled", "false").getOrCreate()
last = max(int(n) for n in __import__("os").listdir(ckpt + "/commits") if n.isdigit())
rows = spark.read.format("statestore").option("batchId", last).load(ckpt).collect()
print(json.dumps([r.asDict(recursive=True) for r in rows], default=str))
"""
HDFS_CONF = {k: v for k, v in CONF.items() if k != "spark.sql.streaming.stateStore.providerClass"}
MEASURED = ("import atexit, resource, sys\n"
            "atexit.register(lambda: print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "
            "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr))\n"
            "sys.argv = ['wmcheck', *sys.argv[1:]]\nfrom wmcheck.cli.main import main\nmain()")


def timed(cmd: list[str]) -> tuple[float, float]:
    """``(wall, CPU)`` seconds of ``cmd`` (CPU: user + system of it and the children it waits for; not of
    a JVM pyspark leaves to exit on its own, so only the python engine's CPU is printed)."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def peak_rss_mib(args: list[str]) -> float:
    """The peak RSS of ``wmcheck ARGS`` in a new process: its own plus its largest worker's."""
    done = subprocess.run([sys.executable, "-c", MEASURED, *args], check=True, capture_output=True, text=True)
    own, worker = done.stderr.strip().splitlines()[-1].split()
    return (int(own) + int(worker)) / 1024


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def compare(label: str, runs: dict[str, list[str]], repeat: int) -> dict[str, tuple[float, float]]:
    """Median ``(wall, CPU)`` of each command, run alternately ``repeat`` times."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, cmd in runs.items():
            times[name].append(timed(cmd))
    medians = {name: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t)) for name, t in times.items()}
    for name, t in times.items():
        cpu = f" (CPU {medians[name][1]:.2f} s)" if "PySpark" not in name else ""
        print(f"{label}: {name:22} median {medians[name][0]:7.2f} s{cpu}  runs {', '.join(f'{w:.2f}' for w, _ in t)}")
    return medians


def verify_against_load(ckpt: Path, spark_read_s: float, repeat: int) -> None:
    """``wmcheck check`` (every state file the next batch loads decoded, the SST files present with their sizes)
    against the PySpark script's median in the same run, which loads the same store in Spark."""
    runs = [timed([sys.executable, "-m", "wmcheck.cli", "check", str(ckpt)]) for _ in range(repeat)]
    wall, cpu = statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)
    print(f"large: wmcheck check (state contents) median {wall:7.2f} s (CPU {cpu:.2f} s)  runs "
          f"{', '.join(f'{w:.2f}' for w, _ in runs)}; Spark's read of the same store {spark_read_s:.2f} s: "
          f"{spark_read_s / wall:.1f}x faster (target: faster)")


def state_of(py: str, root: Path, keys: int, conf: dict[str, str]) -> Path:
    """The checkpoint of a ``keys``-key state written by ``bench_state.py``'s query (written once, kept)."""
    ckpt = root / "checkpoint"
    if not (ckpt / "commits" / "1").exists():
        print(f"writing a state of {keys:,} keys with a streaming query in {root} ...", flush=True)
        subprocess.run([py, "-c", GENERATE.format(conf=conf), str(root), str(keys), str(DELAY_S), str(SPAN_S)],
                       check=True, stderr=subprocess.DEVNULL)
    return ckpt


def engine_cmd(py: str, ckpt: Path, out: Path, *extra: str) -> list[str]:
    return [py, "-m", "wmcheck.cli", "state", str(ckpt), "--engine", "python", "--older-than-watermark", "--format",
            "parquet", "--output", str(out), *extra]


def s3_read(py: str, ckpt: Path, out: Path, repeat: int) -> dict[str, float]:
    """The python engine on ``s3://`` (a copy of ``ckpt`` in moto's S3 server on loopback) against the local read."""
    import logging

    from moto.server import ThreadedMotoServer
    from pyarrow import fs as pafs

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        options = {"endpoint_override": f"http://{host}:{port}", "scheme": "http", "access_key": "test",
                   "secret_key": "test", "region": "us-east-1"}
        s3 = pafs.S3FileSystem(**options, allow_bucket_creation=True)
        s3.create_dir("bucket")
        pafs.copy_files(str(ckpt), "bucket/ckpt", destination_filesystem=s3)
        remote = [py, "-m", "wmcheck.cli", "state", "s3://bucket/ckpt", "--engine", "python", "--older-than-watermark",
                  "--format", "parquet", "--output", str(out), *[a for k, v in options.items() for a in ("--fs-option", f"{k}={v}")]]
        medians = compare("s3", {"s3://": remote, "local": engine_cmd(py, ckpt, out)}, repeat)
    finally:
        server.stop()
    return {"s3_s": round(medians["s3://"][0], 2), "local_s": round(medians["local"][0], 2),
            "s3_over_local": round(medians["s3://"][0] / medians["local"][0], 2)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--big-keys", type=int, default=5_000_000)
    parser.add_argument("--scale-keys", type=int, default=20_000_000)
    parser.add_argument("--scale-partitions", type=int, default=16)
    parser.add_argument("--wide-keys", type=int, default=400_000)
    parser.add_argument("--wide-partitions", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--s3", action="store_true", help="also read the RocksDB state from a local S3 server")
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "wmcheck-bench-state"))
    args = parser.parse_args()
    py, work = sys.executable, Path(args.workdir)
    compile_wmcheck()
    states = {"rocksdb": state_of(py, work / str(args.keys), args.keys, CONF),
              "hdfs": state_of(py, work / f"hdfs-{args.keys}", args.keys, HDFS_CONF),
              "rocksdb big": state_of(py, work / str(args.big_keys), args.big_keys, CONF),
              "rocksdb scale": state_of(py, work / f"scale-{args.scale_keys}-{args.scale_partitions}", args.scale_keys,
                                        {**CONF, "spark.sql.shuffle.partitions": str(args.scale_partitions)})}
    sizes = {"rocksdb": args.keys + 1, "hdfs": args.keys + 1, "rocksdb big": args.big_keys + 1,
             "rocksdb scale": args.scale_keys + 1}
    report: dict[str, object] = {"load_before": load()}
    small = compare("small", {"python engine": [py, "-m", "wmcheck.cli", "state", str(SMALL), "--engine", "python", "--format", "json"],
                              "PySpark script": [py, "-c", SMALL_BASELINE, str(SMALL)]}, args.repeat)
    report["small_ratio"] = round(small["PySpark script"][0] / small["python engine"][0], 1)
    ckpt = states["rocksdb"]
    ours, base = ckpt.parent / "python-engine.parquet", ckpt.parent / "baseline.parquet"
    large = compare("large", {"python engine": engine_cmd(py, ckpt, ours),
                              "PySpark script": [py, "-c", BASELINE.format(conf=CONF), str(ckpt), str(base)]}, args.repeat)
    report["large_ratio"] = round(large["PySpark script"][0] / large["python engine"][0], 1)
    verify_against_load(ckpt, large["PySpark script"][0], args.repeat)
    import pyarrow.parquet as pq

    rows_ours, rows_base = pq.read_metadata(ours).num_rows, pq.read_metadata(base).num_rows
    assert rows_ours == rows_base, (rows_ours, rows_base)
    wide_conf = {**CONF, "spark.sql.shuffle.partitions": str(args.wide_partitions)}
    wide = state_of(py, work / f"wide-{args.wide_keys}-{args.wide_partitions}", args.wide_keys, wide_conf)
    out, base = wide.parent / "python-engine.parquet", wide.parent / "baseline.parquet"
    wides = compare("wide", {"python engine": engine_cmd(py, wide, out),
                             "--jobs 1": engine_cmd(py, wide, out, "--jobs", "1"),
                             "PySpark script": [py, "-c", BASELINE.format(conf=wide_conf), str(wide), str(base)]}, args.repeat)
    assert pq.read_metadata(out).num_rows == pq.read_metadata(base).num_rows
    report["wide"] = {"keys": args.wide_keys + 1, "partitions": args.wide_partitions,
                      "ratio": round(wides["PySpark script"][0] / wides["python engine"][0], 1),
                      "rows_per_cpu_s_one_core": round((args.wide_keys + 1) / wides["--jobs 1"][1])}
    start = compare("start-up", {"--jobs 1": engine_cmd(py, TINY, work / "tiny.parquet", "--jobs", "1")}, args.repeat)["--jobs 1"]
    report["start_up"] = {"wall_s": round(start[0], 3), "cpu_s": round(start[1], 3)}
    for name, ckpt in states.items():
        out = ckpt.parent / "python-engine.parquet"
        medians = compare(name, {"--jobs 1": engine_cmd(py, ckpt, out, "--jobs", "1"),
                                 "--jobs 2": engine_cmd(py, ckpt, out, "--jobs", "2")}, args.repeat)
        report[name] = {"keys": sizes[name], "rows_per_s_one_core": round(sizes[name] / medians["--jobs 1"][0]),
                        "rows_per_cpu_s": round(sizes[name] / medians["--jobs 1"][1]),
                        "rows_per_cpu_s_after_start_up": round(sizes[name] / (medians["--jobs 1"][1] - start[1])),
                        "speedup_2_over_1": round(medians["--jobs 1"][0] / medians["--jobs 2"][0], 2),
                        "speedup_2_over_1_after_start_up": round((medians["--jobs 1"][0] - start[0]) / (medians["--jobs 2"][0] - start[0]), 2)}
    small_rss = peak_rss_mib(engine_cmd(py, states["rocksdb"], work / "rss.parquet", "--jobs", "1")[3:])
    big_rss = peak_rss_mib(engine_cmd(py, states["rocksdb big"], work / "rss.parquet", "--jobs", "1")[3:])
    report["peak_rss_mib"] = {str(sizes["rocksdb"]): round(small_rss), str(sizes["rocksdb big"]): round(big_rss),
                              "ratio": round(big_rss / small_rss, 3)}
    report["keys_older_than_watermark"] = rows_ours
    if args.s3:
        report["s3"] = s3_read(py, states["rocksdb"], work / "s3.parquet", args.repeat)
    report["load_after"] = load()
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
