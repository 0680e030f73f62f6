"""The child process of tests/test_delta_sink.py, run by the Delta environment's python (tests/requirements-delta.txt):
for each job (a copy of fixtures/agg_window_delta whose checkpoint the test repaired), optionally restores the Delta
table with deltalake first (to a version, with or without a ``txn`` for the query id) and vacuums it (``vacuum``:
retention 0), restarts the fixture's query
once (availableNow) and reports what Spark did (a job may first remove the table, or re-create it empty at the same
path, or add an input file of rows); then the rows of the control run's table (the fixture's own, written
from scratch). A job's ``fixture`` (default agg_window_delta; foreach_batch_delta: its foreachBatch function's
idempotent writes) names the query restarted, its ``app_id`` the txn app id reported (default: the query id), its
``conf`` SQL confs set for its restart only.
One JSON document on stdout: {"jobs": [...], "control": rows, "controls": {fixture: rows}}.

    python tests/delta_restarts.py JOBS_JSON
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "fixtures"))

import generate  # noqa: E402
import queries  # noqa: E402

NAME = "agg_window_delta"


def table_rows(spark, path):
    return sorted(json.dumps(generate.jsonable(r), sort_keys=True) for r in spark.read.format("delta").load(path).collect())


def run(spark, job):
    from deltalake import CommitProperties, DeltaTable, Transaction

    root, name = job["root"], job.get("fixture", NAME)
    table = os.path.join(root, "output")
    query_id = json.load(open(os.path.join(root, "checkpoint", "metadata")))["id"]
    app_id = job.get("app_id") or query_id
    restore = job.get("restore")
    if job.get("table") in ("gone", "recreated"):
        schema = DeltaTable(table).schema().to_arrow()
        shutil.rmtree(table)
        if job["table"] == "recreated":
            import pyarrow as pa
            from deltalake import write_deltalake

            write_deltalake(table, pa.Table.from_pylist([], schema=pa.schema(schema)))
    if job.get("input"):
        with open(os.path.join(root, "input", "run9-000.json"), "w") as out:
            out.writelines(json.dumps(row) + "\n" for row in job["input"])
    if restore is not None:
        txns = [Transaction(app_id=query_id, version=restore["txn"])] if restore.get("txn") is not None else None
        DeltaTable(table).restore(restore["version"], commit_properties=CommitProperties(app_transactions=txns))
    vacuumed = None
    if job.get("vacuum"):  # VACUUM RETAIN 0 HOURS: every file no version at or after the latest one needs
        vacuumed = sorted(DeltaTable(table).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False))
    queries.set_input_mtimes(name, root)
    for key, value in job.get("conf", {}).items():  # SQL confs for this restart only
        spark.conf.set(key, value)
    q = getattr(queries, name)(spark, os.path.join(root, "input"), os.path.join(root, "checkpoint"), table).start()
    error = None
    try:
        q.awaitTermination()
    except Exception as exc:  # reported to the test
        error = generate.error_message(exc)
    for key in job.get("conf", {}):
        spark.conf.unset(key)
    batches = [p["batchId"] for p in generate.progress_dicts(q)]
    if not os.path.isdir(os.path.join(table, "_delta_log")):
        return {"error": error, "batches": batches, "version": None, "txn": None, "rows": [], "vacuumed": vacuumed}
    after = DeltaTable(table)
    return {"error": error, "batches": batches, "version": after.version(),
            "txn": after.transaction_version(app_id), "rows": table_rows(spark, table), "vacuumed": vacuumed}


def serve(app: str, name: str, work) -> None:
    """A restart child's run: the jobs of argv[1] given to ``work(spark, jobs)`` in one Spark with Delta Lake and
    fixture ``name``'s confs, its document printed as one JSON line."""
    jobs = json.loads(sys.argv[1])
    os.environ["TZ"] = "UTC"
    time.tzset()
    conf = {**queries.FIXTURES[name]["conf"], **queries.delta_conf(), "spark.ui.showConsoleProgress": "false"}
    spark = generate.make_spark(app, conf)
    try:
        out = work(spark, jobs)
    finally:
        spark.stop()
    print(json.dumps(out))


def restarts(spark, jobs):
    fixtures = os.path.join(os.path.dirname(HERE), "fixtures")
    return {"jobs": [run(spark, job) for job in jobs],
            "control": table_rows(spark, os.path.join(fixtures, NAME, "output")),
            "controls": {name: table_rows(spark, os.path.join(fixtures, name, "output"))
                         for name in sorted({job.get("fixture", NAME) for job in jobs})}}


if __name__ == "__main__":
    serve("delta-restarts", NAME, restarts)
