"""The child process of tests/test_delta_source_check.py, run by the Delta environment's python
(tests/requirements-delta.txt): for each job (a copy of fixtures/delta_source_agg whose source table the test changed
with deltalake), restarts the fixture's query once (availableNow, with the job's extra Delta source ``options`` and
Spark ``conf``) and reports what Spark did: the error (its message's first line), the batches run with their input
rows, and every row of the file sink's output. A job with ``build`` (JSON input files) first writes the source table
from them, one append (one table version) each, partitioned by its ``partition_by`` columns, and starts the query
from a new checkpoint. One JSON document on stdout: {"jobs": [...]}.

    python tests/delta_source_restarts.py JOBS_JSON
"""
from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "fixtures"))

import generate  # noqa: E402
import queries  # noqa: E402
from delta_restarts import serve  # noqa: E402

NAME = "delta_source_agg"


def output_rows(spark, path):
    rows = spark.read.format("parquet").load(path).collect() if os.path.isdir(os.path.join(path, "_spark_metadata")) else []
    return sorted(json.dumps(generate.jsonable(r), sort_keys=True) for r in rows)


def build(spark, root, files, partition_by):
    for path in files:
        df = spark.read.schema(queries.FIXTURES[NAME]["schema"]).json(path).coalesce(1)
        df.write.format("delta").mode("append").partitionBy(*partition_by).save(os.path.join(root, "source"))


def run(spark, job):
    root = job["root"]
    if job.get("build"):
        build(spark, root, job["build"], job.get("partition_by", []))
    session = spark.newSession()
    for key, value in job.get("conf", {}).items():
        session.conf.set(key, value)
    q = queries.delta_source_agg(session, os.path.join(root, "source"), os.path.join(root, "checkpoint"),
                                 os.path.join(root, "output"), job.get("options")).start()
    error = None
    try:
        q.awaitTermination()
    except Exception as exc:  # reported to the test
        error = generate.error_message(exc).splitlines()[0]
    batches = [[p["batchId"], p["numInputRows"]] for p in generate.progress_dicts(q)]
    return {"error": error, "batches": batches, "rows": output_rows(session, os.path.join(root, "output"))}


if __name__ == "__main__":
    serve("delta-source-restarts", NAME, lambda spark, jobs: {"jobs": [run(spark, job) for job in jobs]})
