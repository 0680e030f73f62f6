"""transformWithStateInPandas event-time timers at exactly the watermark, against a real query.

The processor registers, for every row, one timer at exactly the watermark it is given (``TimerValues``) and one 10 s
after the row's event time (whole seconds, so equal to later batches' watermarks); it emits a row for every timer it
registers and every timer Spark fires (``handleExpiredTimer``). The input comes in four runs of an availableNow
trigger: no-data batches (the watermark moved, no input) fall between data batches, and the second run, without
no-data batches, stops on a moved watermark that only ``commits/N`` records (the next run's first batch fires by it). Spark's own record is the truth:
the timers it fired in each batch, its state reader's timers, its offsets' watermarks.
"""
from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from matrix_shapes import BASE_S

from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.statestore import engines

FILES = [[("a", 5), ("b", 8)], [("a", 25), ("c", 22), ("d", 20)], [("b", 3), ("a", 40)], [("c", 12), ("d", 45)],
         [("a", 60), ("b", 20)], [("e", 60)], [("f", 75)]]
RUNS = ((3, "true"), (5, "false"), (6, "true"), (7, "true"))
"""How many files each availableNow run has read when it ends, and whether it runs no-data batches."""
TIMERS = "$eventTimers_keyToTimestamp"
Timer = tuple[str, int]


@dataclass(frozen=True)
class TimerRun:
    checkpoint: Path
    fired: dict[int, set[Timer]]
    """Batch -> the timers Spark called handleExpiredTimer for in it."""
    registered: dict[int, set[Timer]]
    """Batch -> the timers the processor registered in it."""
    watermark_seen: dict[int, set[int]]
    """Batch -> the watermarks the processor was given in it."""
    predicted_next: dict[int, set[Timer]]
    """Batch -> the timers wmcheck said the next batch fires, asked before the run that ran it."""


def _query(spark, input_dir: str):
    import pandas as pd
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    class Ticks(StatefulProcessor):
        def init(self, handle):
            self.handle = handle

        def handleInputRows(self, key, rows, timerValues):
            wm = timerValues.getCurrentWatermarkInMs()
            out = []
            for pdf in rows:
                for ts in pdf["ts"]:
                    for at in (wm, int(pd.Timestamp(ts).value // 1_000_000) + 10_000):
                        self.handle.registerTimer(at)
                        out.append((key[0], "registered", at, wm))
            yield pd.DataFrame(out, columns=["id", "kind", "t", "wm"])

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            yield pd.DataFrame([(key[0], "fired", expiredTimerInfo.getExpiryTimeInMs(),
                                 timerValues.getCurrentWatermarkInMs())], columns=["id", "kind", "t", "wm"])

    return (spark.readStream.schema("id STRING, ts TIMESTAMP").option("maxFilesPerTrigger", 1).json(input_dir)
            .withWatermark("ts", "10 seconds").groupBy("id")
            .transformWithStateInPandas(statefulProcessor=Ticks(), outputStructType="id STRING, kind STRING, t LONG, wm LONG",
                                        outputMode="Append", timeMode="EventTime"))


def _timers(table, column: str = "expiration_timestamp_ms") -> set[Timer]:
    """(key, time) of each timer row: a reader's rows, or with ``event_time_ms`` the rows older_than_watermark judged."""
    return {(r["key"]["id"], r[column]) for r in table.to_pylist()}


def run_timers(spark, root: Path) -> TimerRun:
    staged, inputs, ckpt = root / "staged", root / "input", root / "checkpoint"
    staged.mkdir(parents=True)
    inputs.mkdir()
    for i, rows in enumerate(FILES):
        path = staged / f"{i:02d}.json"
        path.write_text("".join(json.dumps({"id": k, "ts": dt.datetime.fromtimestamp(BASE_S + s, dt.timezone.utc)
                                            .strftime("%Y-%m-%dT%H:%M:%SZ")}) + "\n" for k, s in rows))
        os.utime(path, (BASE_S + i, BASE_S + i))
    rows: list[tuple[int, dict]] = []
    predicted: dict[int, set[Timer]] = {}
    conf = {"spark.sql.shuffle.partitions": "2", "spark.sql.streaming.noDataMicroBatches.enabled": "true",
            "spark.sql.streaming.stateStore.providerClass":
                "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"}
    before = {k: spark.conf.get(k, None) for k in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        done = 0
        for upto, no_data in RUNS:
            spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", no_data)
            if done:  # what wmcheck says the next batch fires, before it runs
                nxt = open_checkpoint(str(ckpt)).next_batch
                predicted[nxt] = _timers(engines.older_than_watermark(str(ckpt), 0, TIMERS, engine="python"),
                                         "event_time_ms")
            for i in range(done, upto):
                (staged / f"{i:02d}.json").rename(inputs / f"{i:02d}.json")
            done = upto
            query = (_query(spark, str(inputs)).writeStream
                     .foreachBatch(lambda df, batch: rows.extend((batch, r.asDict()) for r in df.collect()))
                     .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
            query.awaitTermination(300)
            if query.exception() is not None:
                raise RuntimeError(str(query.exception()))
    finally:
        for key, value in before.items():
            spark.conf.unset(key) if value is None else spark.conf.set(key, value)

    def by_batch(kind: str, value: str) -> dict[int, set]:
        out: dict[int, set] = {}
        for batch, r in rows:
            if r["kind"] == kind:
                out.setdefault(batch, set()).add((r["id"], r["t"]) if value == "timer" else r["wm"])
        return out

    return TimerRun(ckpt, by_batch("fired", "timer"), by_batch("registered", "timer"),
                    {**by_batch("registered", "wm"), **by_batch("fired", "wm")}, predicted)


@pytest.fixture(scope="module")
def timers(spark, tmp_path_factory) -> TimerRun:
    return run_timers(spark, tmp_path_factory.mktemp("tws_timers"))


def _watermark(ckpt, batch: int) -> int:
    meta = ckpt.offsets(batch).metadata
    return meta.batch_watermark_ms if meta else 0


def _spark_state(spark, run: TimerRun, batch: int) -> set[Timer]:
    """The timers batch ``batch`` starts from, as Spark's state reader shows them (none before batch 0)."""
    if batch == 0:
        return set()
    return _timers(engines.read_state(str(run.checkpoint), 0, TIMERS, batch, engine="spark", spark=spark).toArrow())


@pytest.mark.spark
def test_spark_fires_every_timer_at_or_before_the_eviction_watermark_in_that_batch(spark, timers):
    """Spark's rule, batch by batch: the timers fired are those the batch started with or registered whose time is at
    or before the batch's eviction watermark (offsets/N; one operator), the same watermark the processor is given."""
    ckpt = open_checkpoint(str(timers.checkpoint))
    batches = sorted(ckpt.commit_ids)
    assert len(batches) == 9 and len(timers.predicted_next) == 3
    at_watermark = {"from state": 0, "registered in the batch": 0, "no-data batch": 0}
    for b in batches:
        wm, started = _watermark(ckpt, b), _spark_state(spark, timers, b)
        registered = timers.registered.get(b, set())
        assert timers.fired.get(b, set()) == {t for t in started | registered if t[1] <= wm}, b
        assert timers.watermark_seen.get(b, {wm}) == {wm}, b
        equal = {t for t in timers.fired.get(b, set()) if t[1] == wm}
        at_watermark["from state"] += len(equal & started)
        at_watermark["registered in the batch"] += len(equal - started)
        at_watermark["no-data batch"] += len(equal) if b not in timers.registered else 0
    # the case the test is about happened: timers at exactly the watermark, kept from earlier batches and registered
    # in the batch itself, in data batches and no-data batches
    assert min(at_watermark.values()) >= 1, at_watermark


@pytest.mark.spark
@pytest.mark.parametrize("engine", ["python", "spark"])
def test_older_than_watermark_is_the_timers_spark_fired_in_every_batch(spark, timers, engine):
    """``state --older-than-watermark --batch N`` on the timers = the timers batch N started with that Spark fired."""
    ckpt = open_checkpoint(str(timers.checkpoint))
    checked = 0
    for b in sorted(ckpt.commit_ids)[1:]:
        older = engines.older_than_watermark(str(timers.checkpoint), 0, TIMERS, b, engine=engine, spark=spark)
        got = _timers(older if engine == "python" else older.toArrow(), "event_time_ms")
        assert got == timers.fired.get(b, set()) & _spark_state(spark, timers, b), b
        checked += sum(1 for t in got if t[1] == _watermark(ckpt, b))
    assert checked >= 2


@pytest.mark.spark
def test_the_next_batch_answer_is_what_the_next_run_fired(spark, timers):
    """Asked before each restart (show's next batch), the timers older than the watermark are those the restart's
    first batch fired of the state it started from."""
    for batch, predicted in timers.predicted_next.items():
        assert predicted == timers.fired.get(batch, set()) & _spark_state(spark, timers, batch), batch
    assert any(t[1] == _watermark(open_checkpoint(str(timers.checkpoint)), b)
               for b, p in timers.predicted_next.items() for t in p)
