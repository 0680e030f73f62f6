"""A Spark session in a child process that runs streaming queries on request, one JSON line in and one out, so that a
test module starts Spark once (tests/kafka_env.py's ``SparkWorker`` speaks to it). Run by the python of
tests/requirements-spark42.txt, with Spark's Kafka connector from the jar cache (tests/jvm/fetch.sh).

Request: ``{"query": NAME, "bootstrap": ..., "source": {...}, "checkpoint": DIR, "output": DIR, "options": {...},
"conf": {...}}``, NAME one of fixtures/kafka_queries.py's QUERIES; the query runs to its end (availableNow).
Answer: ``{"ok": true, "batches": [batch ids run], "dropped_by_watermark": rows, "dropped_per_batch": {"id": rows}}`` or ``{"ok": false, "error": "Spark's first line"}``.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "fixtures"))

import kafka_queries  # noqa: E402

JARS = Path(os.environ.get("WMCHECK_JARS") or Path.home() / ".cache" / "wmcheck" / "jars") / "spark-kafka"
TIMEOUT_S = 240


def session():
    from pyspark.sql import SparkSession

    jars = sorted(str(p) for p in JARS.glob("*.jar"))
    if not jars:
        raise RuntimeError(f"no Spark Kafka connector jars in {JARS}: run tests/jvm/fetch.sh")
    builder = SparkSession.builder
    delta = os.environ.get("WMCHECK_WORKER_DELTA_JARS")
    if delta:  # Delta Lake beside the Kafka connector: both jar sets in spark.jars, Delta's extension and catalog
        jars += sorted(str(p) for p in Path(delta).glob("*.jar"))
        builder = (builder.config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
                   .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
                   .config("spark.databricks.delta.snapshotPartitions", "2"))
    spark = (builder.master("local[2]").appName("wmcheck-tests-kafka")
             .config("spark.jars", ",".join(jars))
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.streaming.stateStore.maintenanceInterval", "600s")
             .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def error_line(exc: BaseException) -> str:
    text = str(getattr(exc, "desc", None) or exc).strip() or type(exc).__name__
    return text.splitlines()[0][:2000]


def caught_up(query) -> bool:
    """The last batch reported ended at the latest offsets its sources saw (every record then available read)."""
    last = query.lastProgress
    return bool(last and last["sources"]) and all(
        s["latestOffset"] is not None and json.loads(s["endOffset"]) == json.loads(s["latestOffset"])
        for s in last["sources"])


def run(spark, request: dict) -> dict:
    for key, value in request.get("conf", {}).items():
        spark.conf.set(key, value)
    query_fn = kafka_queries.QUERIES[request["query"]]
    writer = query_fn(spark, request["bootstrap"], request["source"], request["checkpoint"], request["output"],
                      request.get("options", {}))
    query = writer.start()
    try:
        if request["query"] in kafka_queries.UNTIL_ALL_AVAILABLE:
            query.processAllAvailable()
            if request["query"] in kafka_queries.REAL_TIME:  # may return before a batch has ended: wait for one
                waited = 0.0
                while not caught_up(query) and waited < TIMEOUT_S and query.isActive:
                    time.sleep(0.5)
                    waited += 0.5
            query.stop()
        elif not query.awaitTermination(TIMEOUT_S):
            query.stop()
            return {"ok": False, "error": f"the query did not finish within {TIMEOUT_S} s"}
    except Exception as exc:  # Spark's StreamingQueryException
        return {"ok": False, "error": error_line(exc)}
    finally:
        for key in request.get("conf", {}):
            spark.conf.unset(key)
    error = query.exception()
    if error is not None:
        return {"ok": False, "error": error_line(error)}
    progress = query.recentProgress
    dropped = sum(op.get("numRowsDroppedByWatermark", 0) for p in progress for op in p["stateOperators"])
    per_batch = {str(p["batchId"]): sum(op.get("numRowsDroppedByWatermark", 0) for op in p["stateOperators"])
                 for p in progress}
    return {"ok": True, "batches": [p["batchId"] for p in progress], "dropped_by_watermark": dropped,
            "dropped_per_batch": per_batch}


def main() -> int:
    spark = session()
    print(json.dumps({"ready": True, "spark": spark.version}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            answer = run(spark, json.loads(line))
        except Exception as exc:
            answer = {"ok": False, "error": error_line(exc), "traceback": traceback.format_exc()[-3000:]}
        print(json.dumps(answer), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
