"""The acceptance matrix of the per-operator answers: chained stateful shapes (tests/matrix_shapes.py, run here in the
session's Spark, and the committed chain fixtures) x wmcheck's answers (each operator's watermarks, the rows evicted
next, the state history, the late rows), each against Spark's own: the plans in its event log, its progress reports
(eventTime watermark, numRowsDroppedByWatermark per operator) and its state reader (the
``statestore`` data source). Asked with and without the event log: a definite answer equals Spark's exactly, an
unknown one names the option that gives it."""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

import pytest
from matrix_shapes import SCHEMA, SHAPES, ShapeRun, run_shape

from wmcheck.checkpoint.errors import CheckpointError, spelled
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.watermarks.operators import UNKNOWN, operator_watermarks
from wmcheck.checkpoint.watermarks.progress import QueryProgress, query_progress
from wmcheck.checkpoint.watermarks.progress_files import load_progress, read_records
from wmcheck.cli.flags import cli_spelling

KINDS = ("watermarks", "global watermark", "evictions", "history", "late rows")
EVENT_TIMERS = "$eventTimers_keyToTimestamp"
EVICTING = ("default", "left", "right", EVENT_TIMERS)
"""The stores whose rows Spark removes only by an operator's own eviction watermark (or timeout / timer) in these shapes."""
OPTIONS = ("--progress", "--event-time", "--window", "--watermark")


@dataclass(frozen=True)
class Answer:
    shape: str
    kind: str
    where: str
    with_log: bool
    got: object
    """wmcheck's answer; None when it says unknown."""
    truth: object
    note: str = ""


def names_an_option(note: str) -> bool:
    return any(o in spelled(note, cli_spelling) for o in OPTIONS)


@pytest.fixture(scope="module")
def matrix(spark, spark_event_log, tmp_path_factory):
    """shape name -> its answers: every shape run first, the event log then read once, each shape asked once."""
    if spark.sparkContext.getConf().get("spark.eventLog.enabled") != "true":  # a session started before the fixture's
        pytest.fail("the test session's Spark writes no event log: start it through conftest's spark fixture")
    runs = {s.name: run_shape(spark, s, tmp_path_factory.mktemp(s.name)) for s in SHAPES}
    records = read_records(str(spark_event_log))
    done: dict[str, list[Answer]] = {}

    def answers(name: str) -> list[Answer]:
        if name not in done:
            run = runs[name]
            done[name] = list(ask(spark, run, query_progress(run.query_id, records.reports, records.plans)))
        return done[name]

    return answers


def ask(spark, run: ShapeRun, prog: QueryProgress):
    name = run.shape.name
    ckpt = open_checkpoint(str(run.checkpoint))
    reports = {r["batchId"]: r for r in run.reports}
    yield from watermark_answers(name, ckpt, prog, reports)
    yield from evictions(spark, name, ckpt, prog, reports)
    yield from late_rows(spark, name, ckpt, prog, reports)


def watermark_answers(name, ckpt, prog, reports):
    """Every batch's global watermark and each operator's own (late, eviction), with and without the event log."""
    planned = {b: {op.operator_id: (op.late_ms, op.evict_ms) for op in plan.root.operators()} for b, plan in prog.plans.items()}
    assert sorted(planned) == sorted(reports), name  # the event log holds every batch's plan

    for with_log in (True, False):
        model = operator_watermarks(ckpt, prog if with_log else None)
        for b, ops in planned.items():
            batch = model.batch(b)
            yield Answer(name, "global watermark", f"batch {b}", with_log, batch.watermark_ms,
                         _ms(reports[b]["eventTime"].get("watermark")))
            for op_id, truth in ops.items():
                own = batch.of(op_id)
                known = own.source != UNKNOWN
                yield Answer(name, "watermarks", f"batch {b} operator {op_id}", with_log,
                             (own.late_ms, own.evict_ms) if known else None, truth, own.note)


def _ms(iso: str | None) -> int | None:
    import datetime as dt

    if iso is None:
        return None
    return int(dt.datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.timezone.utc).timestamp() * 1000)


TIMES = ("expiration_timestamp_ms", "event_time_ms")
"""A timer's time: the reader's column, or older_than_watermark's judged one (a key holds several timers)."""
TIMED = {"tws_timers_agg"}
"""Shapes whose processor never deletes a timer: a timer gone from the state was fired, and is compared with its time
(tws_then_agg's processor deletes and registers one each batch, so its timers are compared by key)."""


def _rows(table, with_value: bool = True, timed: bool = False) -> list[str]:
    """Each row as one string; without its value (a key's new value in the next batch is no removal) unless
    ``with_value`` (a join side keeps several rows a key); a timer with its time when ``timed``."""
    cols = ("partition_id", "key", "value") if with_value else ("partition_id", "key")
    time = next((c for c in TIMES if c in table.column_names), None) if timed else None
    return sorted(json.dumps({**{c: r[c] for c in cols}, **({"time": r[time]} if time else {})}, default=str, sort_keys=True)
                  for r in table.to_pylist())


def _spark_rows(df, timed: bool) -> tuple[list[str], bool]:
    """Spark's rows, and whether they have a value (its reader gives an event-time timer store none)."""
    with_value = "value" in df.columns
    extra = ["value"] if with_value else [c for c in TIMES[:1] if c in df.columns and timed]
    return _rows(df.select("partition_id", "key", *extra).toArrow(), with_value, timed), with_value


def evictions(spark, name, ckpt, prog, reports):
    from wmcheck.statestore import engines
    from wmcheck.statestore.discovery import select

    stores = [s for s in select(ckpt, None, None) if s.name in EVICTING]
    batches = [b for b in ckpt.commit_ids if b >= 1 and b - 1 in ckpt.commit_ids]
    for store in stores:
        tables = {b: engines.read_state(ckpt, store.operator_id, store.name, b, engine="python")
                  for b in [*batches, batches[-1] + 1]}
        join, timed = store.name in ("left", "right"), name in TIMED and store.name == EVENT_TIMERS
        state = {b: _rows(t, join, timed) for b, t in tables.items()}
        for b in batches:
            removed = sorted((Counter(state[b]) - Counter(state[b + 1])).elements())
            for with_log in (True, False):
                where = f"batch {b} operator {store.operator_id} store {store.name}"
                try:
                    got = _rows(engines.older_than_watermark(ckpt, store.operator_id, store.name, b, engine="python",
                                                             progress=prog if with_log else None), join, timed)
                    yield Answer(name, "evictions", where, with_log, got, removed)
                except CheckpointError as exc:
                    yield Answer(name, "evictions", where, with_log, None, removed, f"{exc.message} {exc.hint or ''}")
        sample = batches[len(batches) // 2]
        for b in (sample, sample + 1) if spark is not None else ():  # the history (state --batch N) through Spark's own reader
            by_spark, with_value = _spark_rows(engines.read_state(ckpt, store.operator_id, store.name, b, engine="spark",
                                                                  spark=spark), timed)
            yield Answer(name, "history", f"batch {b} operator {store.operator_id} store {store.name}", False,
                         _rows(tables[b], with_value, timed), by_spark)


def late_rows(spark, name, ckpt, prog, reports):
    """Each operator's late rows in every batch: the replay of each source (summed), its operators judged with and
    without the event log (Spark's own count beside what the replay cannot tell, with it)."""
    from wmcheck.statestore.spark.late_rows import infer_window, window_key
    from wmcheck.statestore.spark.operator_late import operator_late_rows
    from wmcheck.statestore.spark.replay import ReplayOptions, prepare, replay

    sources = [s.source_id for s in ckpt.offsets(ckpt.last_batch).sources]
    replayed = []
    for source in sources:
        opts = ReplayOptions(source=source if len(sources) > 1 else None, source_format="json", schema=SCHEMA,
                             event_time="ts")
        keys: tuple[str, ...] = ()
        stored = window_key(ckpt)
        if stored is not None:
            inferred = infer_window(spark, ckpt, stored)
            opts = ReplayOptions(**{**opts.__dict__, "window": inferred.spec})
            keys = inferred.group_by
        replayed.extend(replay(spark, prepare(ckpt, 0, None, opts), opts, lambda _df, _b: None, keys))
    for with_log in (True, False):
        got: dict[tuple[int, int], int | None] = {}
        notes: dict[tuple[int, int], str] = {}
        shown: dict[tuple[int, int], int | None] = {}
        for row, ops in zip(replayed, operator_late_rows(ckpt, replayed, prog if with_log else None)):
            for op in ops:
                at = (row.batch, op.operator_id)
                before = got.get(at, 0)
                got[at] = None if op.late_rows is None or before is None else before + op.late_rows
                notes[at], shown[at] = op.how, op.spark_late_rows
        for (b, op_id), n in sorted(got.items()):  # what the replay cannot tell, Spark's count beside it (progress) does
            truth = reports[b]["stateOperators"][op_id]["numRowsDroppedByWatermark"]
            yield Answer(name, "late rows", f"batch {b} operator {op_id}", with_log, shown[(b, op_id)] if n is None else n,
                         truth, notes[(b, op_id)])


def wrong(answers: list[Answer]) -> list[Answer]:
    """Answers that are definite and differ from Spark's, or unknown without naming the option that gives them."""
    return [a for a in answers if (a.got is not None and a.got != a.truth) or (a.got is None and not names_an_option(a.note))]


@pytest.mark.spark
@pytest.mark.parametrize("name", [s.name for s in SHAPES])
def test_every_answer_of_the_shape_is_sparks_or_names_the_option(matrix, name):
    answers = matrix(name)
    assert wrong(answers) == []
    assert {a.kind for a in answers} >= {"watermarks", "global watermark", "evictions", "history", "late rows"}
    # with the event log every watermark and every eviction is definite
    assert [a for a in answers if a.with_log and a.kind in ("watermarks", "global watermark", "evictions") and a.got is None] == []


@pytest.mark.spark
def test_no_answer_is_confidently_wrong_on_any_shape(matrix):
    answers = [a for s in SHAPES for a in matrix(s.name)] + [a for n in COMMITTED for a in committed(n)]
    assert [(a.shape, a.kind, a.where, a.with_log, a.got, a.truth) for a in answers
            if a.got is not None and a.got != a.truth] == []
    assert [a for a in answers if a.got is None and not names_an_option(a.note)] == []
    # the answers compared are real ones: late rows and evictions Spark counted are in the matrix
    assert sum(a.truth for a in answers if a.kind == "late rows" and a.with_log) > 0
    assert sum(len(a.truth) for a in answers if a.kind == "evictions" and a.with_log) > 0


COMMITTED = ["join_then_agg", "agg_then_agg", "dedup_then_agg", "fmgws_then_agg", "tws_then_agg", "fmgws_tws_agg",
             "join_then_agg_spark35", "fmgws_then_agg_spark35"]
"""The committed chain fixtures (fixtures/queries.py): their event logs and progress reports (progress.jsonl) are
Spark's; their late rows against Spark's are tests/test_operator_watermarks.py's replay test."""


def committed(name: str) -> list[Answer]:
    from conftest import FIXTURES, fixture_checkpoint

    ckpt = open_checkpoint(str(fixture_checkpoint(name)))
    prog = load_progress(json.loads((fixture_checkpoint(name) / "metadata").read_text())["id"], str(FIXTURES / name / "eventlog"))
    lines = (FIXTURES / name / "progress.jsonl").read_text().splitlines()
    reports = {r["batchId"]: r for r in map(json.loads, lines)}
    return [*watermark_answers(name, ckpt, prog, reports), *evictions(None, name, ckpt, prog, reports)]


@pytest.mark.parametrize("name", COMMITTED)
def test_the_committed_chains_answer_as_spark_did(name):
    """Watermarks and next-batch evictions of the committed chains, with and without their event logs."""
    answers = committed(name)
    assert wrong(answers) == []
    assert [a for a in answers if a.with_log and a.got is None] == []
