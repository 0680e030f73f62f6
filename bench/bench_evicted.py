"""Benchmark WM062 on a large windowed aggregation: ``wmcheck check`` against the same command reading the state
files row by row (the reference), in one run.

Usage: python bench/bench_evicted.py [--keys 1000000] [--repeat 3] [--workdir DIR]

Writes, once per state store provider (RocksDB, then HDFS), a windowed aggregation of ``--keys`` keys with a real
streaming query (a file source, a one-hour watermark, ``groupBy(id, window(ts, "10 seconds")).count()`` in append
mode, 4 partitions; a second run of one row moves the watermark so that its last batch evicts about half of the
windows), then times, each in a new process as a user runs it, alternating: ``wmcheck check CKPT`` (WM062 judges
every key the next batch loads, reading the files with NumPy), the same command with
``wmcheck.checkpoint.checks.state.COLUMNAR`` off (the reference, row by row) and with ``AGED_BUDGET = 0`` (WM062
judging nothing). Prints the medians, the ratio of the first two, what judging every key costs in each (their
time less the third's), each command's peak RSS, and whether the whole state was judged (no note on stderr). The
checkpoints are kept in ``--workdir``.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_state import CONF, PUBLISH  # noqa: E402
from bench_state_engine import HDFS_CONF, compare, load  # noqa: E402

GENERATE = """
import os, sys
from pyspark.sql import SparkSession, functions as F
root, keys = sys.argv[1], int(sys.argv[2])
builder = SparkSession.builder.master("local[*]").config("spark.driver.memory", "2g")
for k, v in {conf}.items():
    builder = builder.config(k, v)
spark = builder.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
start = 1704067200
os.makedirs(root + "/input", exist_ok=True)

""" + PUBLISH + """

def run():
    events = spark.readStream.schema("id STRING, ts TIMESTAMP").parquet(root + "/input")
    query = (events.withWatermark("ts", "3600 seconds").groupBy("id", F.window("ts", "10 seconds")).count()
             .writeStream.format("noop").outputMode("append").option("checkpointLocation", root + "/checkpoint")
             .trigger(availableNow=True).start())
    query.awaitTermination()


publish(spark.range(keys).select(F.format_string("id-%d", "id").alias("id"),
                                 F.timestamp_seconds(F.lit(start) + F.col("id") % 1000).alias("ts")), "part0")
run()
publish(spark.createDataFrame([("mover", start + 500 + 3600)], "id STRING, ts LONG")
        .select("id", F.timestamp_seconds("ts").alias("ts")), "part1")
run()
spark.stop()
"""
WITH = ("import sys\nfrom wmcheck.checkpoint.checks import state\nstate.{setting}\n"
        "sys.argv = ['wmcheck', *sys.argv[1:]]\nfrom wmcheck.cli.main import main\nmain()")
PEAK = "import resource, subprocess, sys\nsubprocess.run(sys.argv[1:])\nprint(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"


def aggregation_of(root: Path, keys: int, conf: dict[str, str]) -> Path:
    """The checkpoint of the ``keys``-key windowed aggregation (written once, kept)."""
    ckpt = root / "checkpoint"
    if not (ckpt / "commits" / "1").exists():
        print(f"writing a windowed aggregation of {keys:,} keys in {root} ...", flush=True)
        subprocess.run([sys.executable, "-c", GENERATE.format(conf=conf), str(root), str(keys)], check=True,
                       stderr=subprocess.DEVNULL)
    return ckpt


def peak_mib(cmd: list[str]) -> float:
    done = subprocess.run([sys.executable, "-c", PEAK, *cmd], check=True, capture_output=True, text=True)
    return int(done.stdout.strip().splitlines()[-1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "wmcheck-bench-evicted"))
    args = parser.parse_args()
    print(f"load average before: {load()}")
    for provider, conf in (("rocksdb", CONF), ("hdfs", HDFS_CONF)):
        ckpt = aggregation_of(Path(args.workdir) / provider, args.keys, conf)
        fast = [sys.executable, "-m", "wmcheck.cli", "check", str(ckpt)]
        reference = [sys.executable, "-c", WITH.format(setting="COLUMNAR = False"), "check", str(ckpt)]
        unjudged = [sys.executable, "-c", WITH.format(setting="AGED_BUDGET = 0"), "check", str(ckpt)]
        whole = "note: WM062" not in subprocess.run(fast, capture_output=True, text=True).stderr
        runs = {"check": fast, "check (reference)": reference, "check (nothing judged)": unjudged}
        medians = {name: wall for name, (wall, _) in compare(provider, runs, args.repeat).items()}
        base = medians["check (nothing judged)"]
        print(f"{provider}: {medians['check (reference)'] / medians['check']:.2f}x faster than the reference; judging "
              f"every key (every partition judged: {whole}) costs {medians['check'] - base:.2f} s against "
              f"{medians['check (reference)'] - base:.2f} s; peak RSS {peak_mib(fast):.0f} MiB against "
              f"{peak_mib(reference):.0f} MiB ({peak_mib(unjudged):.0f} MiB judging nothing)")
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
