"""Benchmark the python state engine against a hand-written PySpark read of the same state, in one run.

Usage: python bench/bench_state_engine.py [--keys 1000000] [--repeat 3] [--workdir DIR]

Two checkpoints, each read in a new process as a user runs them, alternating:

* small: fixture ``agg_window_hdfs`` (HDFS state, 3 partitions): ``wmcheck state CKPT --engine python
  --format json`` against a script that reads every row with ``spark.read.format("statestore")`` and
  prints them as JSON (target: python engine >= 20x faster);
* large: the ``--keys`` RocksDB state of ``bench_state.py`` (written there, kept in ``--workdir``):
  ``wmcheck state --engine python --older-than-watermark --format parquet`` against that bench's
  PySpark script doing the same read, filter and Arrow write (target: faster), with the peak memory
  (max RSS) of both; and ``wmcheck check`` of that checkpoint, which decodes every state file Spark loads
  for the next batch, against the same PySpark script's time to load and read that store (target: faster).
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
SMALL_BASELINE = """
import json, sys
from pyspark.sql import SparkSession
ckpt = sys.argv[1]
spark = SparkSession.builder.master("local[*]").config("spark.ui.enabled", "false").getOrCreate()
last = max(int(n) for n in __import__("os").listdir(ckpt + "/commits") if n.isdigit())
rows = spark.read.format("statestore").option("batchId", last).load(ckpt).collect()
print(json.dumps([r.asDict(recursive=True) for r in rows], default=str))
"""


MEASURED = ("import atexit, resource, sys\n"
            "atexit.register(lambda: print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr))\n"
            "sys.argv = ['wmcheck', *sys.argv[1:]]\nfrom wmcheck.cli.main import main\nmain()")


def timed(cmd: list[str]) -> tuple[float, float]:
    """``(wall, CPU)`` seconds of ``cmd`` (CPU: user + system of it and the children it waits for; not of
    a JVM pyspark leaves to exit on its own, so only the python engine's CPU is printed)."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def peak_rss_mib(args: list[str]) -> float:
    """The peak RSS of ``wmcheck ARGS`` in a new process."""
    done = subprocess.run([sys.executable, "-c", MEASURED, *args], check=True, capture_output=True, text=True)
    return int(done.stderr.strip().splitlines()[-1]) / 1024


def compare(label: str, ours: list[str], base: list[str], repeat: int) -> dict[str, tuple[float, float]]:
    times: dict[str, list[tuple[float, float]]] = {"python engine": [], "PySpark script": []}
    for _ in range(repeat):  # alternate, so load from other processes hits both alike
        times["PySpark script"].append(timed(base))
        times["python engine"].append(timed(ours))
    medians = {name: (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)) for name, runs in times.items()}
    for name, runs in times.items():
        cpu = f" (CPU {medians[name][1]:.2f} s)" if name == "python engine" else ""
        print(f"{label}: {name:15} median {medians[name][0]:7.2f} s{cpu}  runs {', '.join(f'{w:.2f}' for w, _ in runs)}")
    print(f"{label}: PySpark script / python engine = {medians['PySpark script'][0] / medians['python engine'][0]:.1f}x")
    return medians


def verify_against_load(ckpt: Path, spark_read_s: float, repeat: int) -> None:
    """``wmcheck check`` (every state file the next batch loads decoded, the SST files present with their sizes)
    against the PySpark script's median in the same run, which loads the same store in Spark."""
    runs = [timed([sys.executable, "-m", "wmcheck.cli", "check", str(ckpt)]) for _ in range(repeat)]
    wall, cpu = statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)
    print(f"large: wmcheck check (state contents) median {wall:7.2f} s (CPU {cpu:.2f} s)  runs "
          f"{', '.join(f'{w:.2f}' for w, _ in runs)}; Spark's read of the same store {spark_read_s:.2f} s: "
          f"{spark_read_s / wall:.1f}x faster (target: faster)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "wmcheck-bench-state"))
    args = parser.parse_args()
    py = sys.executable
    compile_wmcheck()
    compare("small", [py, "-m", "wmcheck.cli", "state", str(SMALL), "--engine", "python", "--format", "json"],
            [py, "-c", SMALL_BASELINE, str(SMALL)], args.repeat)
    root = Path(args.workdir) / str(args.keys)
    ckpt = root / "checkpoint"
    if not (ckpt / "commits" / "1").exists():
        print(f"writing a state of {args.keys:,} keys with a streaming query in {root} ...", flush=True)
        subprocess.run([py, "-c", GENERATE.format(conf=CONF), str(root), str(args.keys), str(DELAY_S), str(SPAN_S)],
                       check=True, stderr=subprocess.DEVNULL)
    ours_out, base_out = root / "python-engine.parquet", root / "baseline.parquet"
    ours = [py, "-m", "wmcheck.cli", "state", str(ckpt), "--engine", "python", "--older-than-watermark", "--format", "parquet",
            "--output", str(ours_out)]
    base = [py, "-c", BASELINE.format(conf=CONF), str(ckpt), str(base_out)]
    medians = compare("large", ours, base, args.repeat)
    verify_against_load(ckpt, medians["PySpark script"][0], args.repeat)
    import pyarrow.parquet as pq

    rows_ours, rows_base = pq.read_metadata(ours_out).num_rows, pq.read_metadata(base_out).num_rows
    assert rows_ours == rows_base, (rows_ours, rows_base)
    rss = peak_rss_mib(ours[3:])
    print(json.dumps({"keys_in_state": args.keys + 1, "keys_older_than_watermark": rows_ours, "python_engine_max_rss_mib": round(rss)}))


if __name__ == "__main__":
    main()
