"""compat's reading of schemas as Spark's errors print them (``StructType(StructField(...))``), side by side with the
checkpoint's schema files; the translations themselves are checked on real Spark errors in test_compat_matrix.py."""
from __future__ import annotations

from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.statestore.spark.compat.explain import clean_message, kind_of, schemas_in, store_schemas
from wmcheck.statestore.spark.compat.schemas import parse_struct_text, render, side_by_side, struct_fields

from conftest import fixture_checkpoint

WINDOW = "StructField(window,StructType(StructField(start,TimestampType,true),StructField(end,TimestampType,true)),true)"


def test_struct_text_of_every_kind_of_type():
    text = (f"StructType({WINDOW},StructField(id,StringType,false),StructField(d,DecimalType(38,10),true),"
            "StructField(m,MapType(StringType,ArrayType(IntegerType,true),true),true),"
            "StructField(i,DayTimeIntervalType(0,3),true),StructField(n,LongType,true))")
    assert render(parse_struct_text(text) or ()) == (
        "window: struct<start:timestamp,end:timestamp>, id: string not null, d: decimal(38,10), "
        "m: map<string,array<int>>, i: daytimeinterval(0,3), n: bigint")


def test_a_field_name_spark_prints_ambiguously_is_not_guessed():
    assert parse_struct_text("StructType(StructField(a,b,LongType,true))") is None
    assert parse_struct_text("StructType(StructField(a,LongType,true)") is None


def test_fields_side_by_side():
    old = (("count", "bigint", True), ("sum", "bigint", True), ("gone", "string", True), ("k", "int", False))
    new = (("count", "bigint", True), ("sum", "double", True), ("k", "int", True), ("max", "int", True))
    assert [(f.name, f.old, f.new, f.change) for f in side_by_side(old, new)] == [
        ("count", "bigint", "bigint", "same"), ("sum", "bigint", "double", "type"), ("gone", "string", None, "removed"),
        ("k", "int not null", "int", "nullable"), ("max", None, "int", "added")]


def test_schemas_in_either_order_of_spark_messages():
    old, new = "StructType(StructField(count,LongType,true))", "StructType(StructField(count,IntegerType,true))"
    assert schemas_in(f"Existing value_schema={old} and new value_schema={new}.\nIf you want") == (
        "value", (("count", "bigint", True),), (("count", "int", True),))
    assert schemas_in(f"Schema evolution is not possible new value_schema={new} and old value_schema={old}\n") == (
        "value", (("count", "bigint", True),), (("count", "int", True),))
    assert schemas_in("something else") is None


def test_the_checkpoints_schemas_are_rendered_as_spark_prints_them():
    found = {(op, store, cf.name): render(struct_fields(cf.key_schema))
             for op, _, store, cf in store_schemas(open_checkpoint(str(fixture_checkpoint("agg_window_hdfs"))))}
    text = parse_struct_text(f"StructType({WINDOW},StructField(id,StringType,true))")
    assert found == {(0, "default", "default"): render(text or ())}


def test_the_query_dump_is_cut_from_sparks_message():
    text = "[X] boom SQLSTATE: 42K03 SQLSTATE: XXKST\n=== Streaming Query ===\nIdentifier: ..."
    assert clean_message(text) == "[X] boom"


def test_operator_kinds():
    assert [kind_of(n) for n in ("stateStoreSave", "dedupe", "symmetricHashJoin", "applyInPandasWithState",
                                 "transformWithStateInPandasExec", "unknownOp")] == [
        "aggregation", "deduplication", "join", "arbitrary", "transformWithState", None]


def test_the_new_codes_python_exception_is_one_line_at_its_own_frame():
    """Spark's PYTHON_EXCEPTION carries the worker's traceback (its newlines escaped): the user's innermost frame and
    the exception line are kept, pyspark's frames dropped."""
    from wmcheck.statestore.spark.compat.explain import SparkFailure, explain

    message = ("[PYTHON_EXCEPTION] An exception was thrown from the Python worker: Traceback (most recent call last):\\n"
               '  File "/opt/spark/python/pyspark/worker.py", line 1200, in main\\n    process()\\n'
               '  File "/jobs/orders.py", line 11, in parse\\n    raise ValueError(f"bad {v}")\\n'
               '  File "/opt/spark/python/pyspark/util.py", line 90, in wrapper\\n    return f(*args)\\n'
               "ValueError: bad 29\\nSQLSTATE: 39000")
    refusal = explain(open_checkpoint(str(fixture_checkpoint("agg_window_hdfs"))), SparkFailure("PYTHON_EXCEPTION", message))
    assert refusal.message == ("[PYTHON_EXCEPTION] An exception was thrown from the Python worker: ValueError: bad 29 "
                               "(at /jobs/orders.py:11, in parse)")
    assert refusal.explanation == ("the new code raised ValueError: bad 29 (at /jobs/orders.py:11, in parse) while "
                                   "Spark ran the batch: a restart fails the same way on these rows")
    assert refusal.rule is None and refusal.schema is None
