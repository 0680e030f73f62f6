"""Benchmark ``wmcheck state --older-than-watermark`` against a hand-written PySpark script, in one run.

Usage: python bench/bench_state.py [--keys 1000000] [--repeat 3] [--workdir DIR]

Writes a state of ``--keys`` keys with a real streaming query (a file source, ``withWatermark`` and
``dropDuplicates`` over distinct ids, RocksDB state; two batches: the second one only moves the
watermark, so the next batch would evict about half of the keys), then times, each in a new process
as a user runs them: ``wmcheck state CKPT --older-than-watermark --format parquet --output F`` and a
script that reads the same state with ``spark.read.format("statestore")``, filters it by the same
watermark and writes the same rows to parquet through Arrow. Prints both times and their ratio
(target <= 1.1). The checkpoint is kept in ``--workdir`` for the next run.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DELAY_S = 3600
SPAN_S = 1000
CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.streaming.stateStore.providerClass": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}

PUBLISH = """
def publish(df, name):
    \"\"\"Write one parquet file and move it into the query's input directory (one source path for both runs).\"\"\"
    df.coalesce(1).write.mode("overwrite").parquet(root + "/staging/" + name)
    for f in os.listdir(root + "/staging/" + name):
        if f.endswith(".parquet"):
            os.rename(root + "/staging/" + name + "/" + f, root + "/input/" + name + "-" + f)
"""
"""A generator's helper (``root``: its directory), in the generators' source."""

GENERATE = """
import os, sys
from pyspark.sql import SparkSession, functions as F
root, keys, delay, span = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
builder = SparkSession.builder.master("local[*]").config("spark.driver.memory", "2g")
for k, v in {conf}.items():
    builder = builder.config(k, v)
# no no-data batch: it would evict the keys the bench is about
spark = builder.config("spark.sql.streaming.noDataMicroBatches.enabled", "false").getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
start = 1704067200
os.makedirs(root + "/input", exist_ok=True)


""" + PUBLISH + """

def run():
    events = spark.readStream.schema("id STRING, ts TIMESTAMP").parquet(root + "/input")
    query = (events.withWatermark("ts", f"{{delay}} seconds").dropDuplicates(["id", "ts"])
             .writeStream.format("noop").option("checkpointLocation", root + "/checkpoint")
             .trigger(availableNow=True).start())
    query.awaitTermination()


publish(spark.range(keys).select(F.format_string("id-%d", "id").alias("id"),
                                 F.timestamp_seconds(F.lit(start) + F.col("id") % span).alias("ts")), "part0")
run()
# one row that moves the next batch's watermark to the middle of the keys' event times
publish(spark.createDataFrame([("mover", start + span // 2 + delay)], "id STRING, ts LONG")
        .select("id", F.timestamp_seconds("ts").alias("ts")), "part1")
run()
spark.stop()
"""

BASELINE = """
import json, sys
import pyarrow.parquet as pq
from pyspark.sql import SparkSession, functions as F
ckpt, out = sys.argv[1], sys.argv[2]
builder = SparkSession.builder.master("local[*]")
for k, v in {conf}.items():
    builder = builder.config(k, v)
spark = builder.getOrCreate()
last = max(int(n) for n in __import__("os").listdir(ckpt + "/commits") if n.isdigit())
watermark = json.loads(open(f"{{ckpt}}/commits/{{last}}").read().splitlines()[1])["nextBatchWatermarkMs"]
state = spark.read.format("statestore").option("batchId", last).load(ckpt)
older = state.filter(F.unix_micros("key.ts") <= watermark * 1000).select(
    "partition_id", "key", "value", F.floor(F.unix_micros("key.ts") / 1000).alias("event_time_ms"))
pq.write_table(older.toArrow(), out)
"""


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "wmcheck-bench-state"))
    args = parser.parse_args()
    root = Path(args.workdir) / str(args.keys)
    ckpt = root / "checkpoint"
    env_python = sys.executable
    if not (ckpt / "commits" / "1").exists():
        print(f"writing a state of {args.keys:,} keys with a streaming query in {root} ...", flush=True)
        started = time.perf_counter()
        subprocess.run([env_python, "-c", GENERATE.format(conf=CONF), str(root), str(args.keys), str(DELAY_S), str(SPAN_S)],
                       check=True, stderr=subprocess.DEVNULL)
        print(f"  done in {time.perf_counter() - started:.0f} s")
    ours_out, base_out = root / "wmcheck.parquet", root / "baseline.parquet"
    ours = [env_python, "-m", "wmcheck.cli", "state", str(ckpt), "--engine", "spark", "--older-than-watermark", "--format", "parquet",
            "--output", str(ours_out)]
    base = [env_python, "-c", BASELINE.format(conf=CONF), str(ckpt), str(base_out)]
    times: dict[str, list[float]] = {"wmcheck": [], "script": []}
    for _ in range(args.repeat):  # alternate, so load from other processes hits both alike
        times["script"].append(timed(base))
        times["wmcheck"].append(timed(ours))
    import pyarrow.parquet as pq

    rows_ours, rows_base = pq.read_metadata(ours_out).num_rows, pq.read_metadata(base_out).num_rows
    assert rows_ours == rows_base, (rows_ours, rows_base)
    total = pq.read_metadata(base_out).num_rows
    script, mine = statistics.median(times["script"]), statistics.median(times["wmcheck"])
    print(json.dumps({"keys_in_state": args.keys + 1, "keys_older_than_watermark": total, "repeat": args.repeat}))
    print(f"hand-written PySpark script   median {script:6.1f} s  runs {', '.join(f'{t:.1f}' for t in times['script'])}")
    print(f"wmcheck --older-than-watermark median {mine:6.1f} s  runs {', '.join(f'{t:.1f}' for t in times['wmcheck'])}")
    print(f"ratio wmcheck / script: {mine / script:.2f}x (target <= 1.10)")


if __name__ == "__main__":
    main()
