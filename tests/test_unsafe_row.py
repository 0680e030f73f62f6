"""The UnsafeRow decoder against rows Spark encoded.

``fixtures/unsafe_rows/rows.json`` holds rows of every type state can hold (``fixtures/unsafe_rows.py``:
nulls at every level, empty and 70-element arrays and maps, extreme integers, decimals at the limits of
every precision class, multi-byte text, timestamps from year 1 to 9999, day-time intervals), encoded and
collected by Spark. Hypothesis (derandomized) draws subsets of them in any order, at any place in a buffer, and
decodes them row by row, into Arrow columns and column-wise with NumPy (the fast path): each decodes to
Spark's value. Mutated rows decode or raise a MalformedFileError, nothing else; the fast path gives the
reference's value or declines (then the reference decodes or refuses the batch). With a Spark session, hypothesis-generated rows are
encoded by Spark in the test and decoded the same way.
"""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wmcheck.checkpoint.errors import MalformedFileError
from wmcheck.statestore.encodings.columnar import StructColumns
from wmcheck.statestore.encodings.unsafe_columns import decode, leaf
from wmcheck.statestore.encodings.unsafe_row import row_decoder
from wmcheck.statestore.formats.schema import StructType, _struct

from conftest import FIXTURES
from fixture_modules import fixture_module

UNSAFE_ROWS = fixture_module("unsafe_rows.py")
CORPUS = json.loads((FIXTURES / "unsafe_rows" / "rows.json").read_text())
NAMES = sorted(CORPUS["schemas"])
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


def schema_of(name: str):
    return _struct(CORPUS["schemas"][name]["type"], name)


def same_arrow(a, b) -> bool:
    """Arrow arrays or tables of one type holding the same values: NaN equal to NaN (unlike ``equals``), struct
    fields compared by position (aggregation buffers repeat field names)."""
    import pyarrow as pa

    if isinstance(a, pa.Table):
        return a.schema == b.schema and all(same_arrow(x, y) for x, y in zip(a.columns, b.columns))
    if isinstance(a, pa.ChunkedArray):
        return same_arrow(a.combine_chunks(), b.combine_chunks())
    if a.type != b.type or a.is_null().to_pylist() != b.is_null().to_pylist():
        return False
    if pa.types.is_struct(a.type):
        return all(same_arrow(x, y) for x, y in zip(a.flatten(), b.flatten()))
    return json.dumps(a.to_pylist(), default=repr) == json.dumps(b.to_pylist(), default=repr)


def decoded_rows(name: str, buf: bytes, starts: list[int], ends: list[int]) -> list:
    """The rows at ``starts`` of ``buf`` (each ending at its ``ends``) decoded by ``row_decoder``, by
    ``StructColumns`` (Arrow) and column-wise by ``unsafe_columns.decode`` (the fast path, which must
    prove every valid row): all must agree; returned as the corpus's canonical values."""
    schema, spark_type = schema_of(name), CORPUS["schemas"][name]["type"]
    one_by_one = [UNSAFE_ROWS.canonical(row_decoder(schema)(buf, s), spark_type) for s in starts]
    columns = StructColumns(schema)
    for s in starts:
        columns.add(buf, s)
    reference = columns.finish()
    arrow = [UNSAFE_ROWS.canonical(r, spark_type) for r in reference.to_pylist()]
    assert arrow == one_by_one
    fast = decode(schema, buf, np.array(starts, np.int64), np.array(ends, np.int64))
    assert fast is not None and same_arrow(fast, reference)
    for keep in (np.arange(0, len(starts), 2), np.arange(len(starts))[::-1][:1], np.zeros(0, np.int64)):
        some = decode(schema, buf, np.array(starts, np.int64), np.array(ends, np.int64), keep)
        assert some is not None and same_arrow(some, reference.take(keep))
    for path, values in integer_leaves(schema, reference):
        got = leaf(schema, buf, np.array(starts, np.int64), np.array(ends, np.int64), path)
        assert got is not None, path
        assert [int(v) if ok else None for v, ok in zip(*got)] == values, path
    return one_by_one


def integer_leaves(schema, rows) -> list:
    """``(path, values)`` of every whole-number, date and timestamp field of ``schema`` (nested structs' too) in the
    Arrow struct array ``rows`` (None where it or a struct on its path is null)."""
    import pyarrow as pa

    out = []
    for i, f in enumerate(schema.fields):
        column = rows.field(i)
        if rows.null_count:
            column = pa.array([None if r is None else v for r, v in zip(rows.to_pylist(), column.to_pylist())], column.type)
        if isinstance(f.data_type, StructType):
            out += [((f.name, *path), values) for path, values in integer_leaves(f.data_type, column)]
        elif pa.types.is_integer(column.type):
            out.append(((f.name,), column.to_pylist()))
    return out


def test_corpus_covers_every_type_with_nulls_at_every_level():
    """The corpus is what the docstring says: Spark 4.3 rows of every atomic type, null and not, nested."""
    assert CORPUS["spark_version"] == "4.3.0"
    atomic = CORPUS["schemas"]["atomic"]
    assert len(atomic["type"]["fields"]) == 70
    assert {f["type"] for f in atomic["type"]["fields"]} == set(UNSAFE_ROWS.ATOMIC)
    for f in atomic["type"]["fields"]:
        values = [r["value"][f["name"]] for r in atomic["rows"]]
        assert None in values and any(v is not None for v in values), f["name"]
    nested = [r["value"] for r in CORPUS["schemas"]["nested"]["rows"]]
    assert any(r["s"] is not None and r["s"]["w"] is None for r in nested)  # a null struct in a struct
    assert any(r["ints"] and None in r["ints"] for r in nested)  # a null array element
    assert any(r["structs"] and None in r["structs"] for r in nested)  # a null struct in an array
    assert any(r["counts"] and None in [v for _, v in r["counts"]] for r in nested)  # a null map value
    assert any(r["matrix"] == [] for r in nested) and any(r["counts"] == [] for r in nested)


@pytest.mark.parametrize("name", NAMES)
def test_every_corpus_row_decodes_to_sparks_value(name):
    rows = CORPUS["schemas"][name]["rows"]
    buf = b"".join(bytes.fromhex(r["hex"]) for r in rows)
    starts, at = [], 0
    for r in rows:
        starts.append(at)
        at += len(r["hex"]) // 2
    assert decoded_rows(name, buf, starts, [*starts[1:], len(buf)]) == [r["value"] for r in rows]


@SETTINGS
@given(st.data())
def test_any_selection_of_rows_anywhere_in_a_buffer_decodes_to_sparks_values(data):
    name = data.draw(st.sampled_from(NAMES))
    rows = CORPUS["schemas"][name]["rows"]
    chosen = data.draw(st.lists(st.sampled_from(range(len(rows))), min_size=1, max_size=12))
    buf, starts, ends = b"", [], []
    for i in chosen:  # rows at any offset, between other bytes (as in RocksDB keys and values)
        buf += data.draw(st.binary(max_size=9))
        starts.append(len(buf))
        buf += bytes.fromhex(rows[i]["hex"])
        ends.append(len(buf))
    buf += data.draw(st.binary(max_size=9))
    assert decoded_rows(name, buf, starts, ends) == [rows[i]["value"] for i in chosen]


def mutations(row: bytes, seed: int) -> list[bytes]:
    """``row`` with bytes flipped, overwritten, cut or appended: offsets and sizes pointing anywhere."""
    rng = random.Random(seed)
    out = [row[:rng.randrange(len(row))], row + rng.randbytes(rng.randrange(1, 64))]
    for _ in range(6):
        data = bytearray(row)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(data))
            data[at] = rng.choice([0, 0xFF, 0x7F, 0x80, rng.randrange(256), data[at] ^ (1 << rng.randrange(8))])
        out.append(bytes(data))
    return out


@SETTINGS
@given(st.sampled_from(NAMES), st.integers(0, 59), st.integers(0, 2 ** 32))
def test_mutated_rows_decode_or_raise_malformed_file_error(name, index, seed):
    rows = CORPUS["schemas"][name]["rows"]
    row = bytes.fromhex(rows[index % len(rows)]["hex"])
    schema = schema_of(name)
    for data in mutations(row, seed):
        try:
            row_decoder(schema)(data, 0)
        except MalformedFileError as exc:
            assert "\n" not in str(exc)
        columns = StructColumns(schema)
        fast = decode(schema, data, np.array([0]), np.array([len(data)]))
        none_kept = decode(schema, data, np.array([0]), np.array([len(data)]), np.zeros(0, np.int64))
        try:
            columns.add(data, 0)
        except MalformedFileError:
            assert fast is None and none_kept is None  # the fast path proves no row the reference refuses, kept or not
            continue
        reference = columns.finish()
        assert fast is None or same_arrow(fast, reference)


def test_bytes_past_the_end_are_a_clear_error():
    key = schema_of("window_key")
    row = bytes.fromhex(next(r["hex"] for r in CORPUS["schemas"]["window_key"]["rows"] if r["value"]["id"] == "x" * 100))
    with pytest.raises(MalformedFileError, match=r"^string of 100 bytes at byte 48 ends past the buffer.s 147 bytes$"):
        row_decoder(key)(row[:-5], 0)  # the string and its 4 bytes of padding
    with pytest.raises(MalformedFileError, match=r"^struct of 24 bytes at byte 24 ends past the buffer's 16 bytes$"):
        row_decoder(key)(row[:16], 0)
    with pytest.raises(MalformedFileError, match=r"^bytes do not decode as an UnsafeRow of the schema: unpack_from "
                       r"requires a buffer of at least 16 bytes for unpacking 8 bytes at offset 8 \(actual buffer size is 12\)$"):
        row_decoder(key)(row[:12], 0)
    atomic = bytes.fromhex(CORPUS["schemas"]["atomic"]["rows"][1]["hex"])
    with pytest.raises(MalformedFileError, match=r"^bytes do not decode as an UnsafeRow of the schema: unpack_from "
                       r"requires a buffer of at least 44 bytes for unpacking 4 bytes at offset 40 \(actual buffer size is 40\)$"):
        row_decoder(schema_of("atomic"))(atomic[:40], 0)
    with pytest.raises(MalformedFileError, match=r"^an array of -1 elements at byte 16 does not fit in 24 bytes$"):
        row_decoder(_struct({"type": "struct", "fields": [{"name": "a", "type": {"type": "array", "elementType": "long",
                    "containsNull": True}, "nullable": True, "metadata": {}}]}, "a"))(
            bytes(8) + (16 << 32 | 8).to_bytes(8, "little") + (-1).to_bytes(8, "little", signed=True), 0)


# --------------------------------------------------------------------------
# rows Spark encodes in the test
# --------------------------------------------------------------------------
def spark_values(data_type):
    """Hypothesis values of a Spark JSON type, as createDataFrame takes them (nulls at every level)."""
    import datetime as dt
    from decimal import Context, Decimal

    if isinstance(data_type, dict):
        kind = data_type["type"]
        if kind == "struct":
            inner = st.tuples(*[spark_values(f["type"]) for f in data_type["fields"]])
        elif kind == "array":
            inner = st.lists(spark_values(data_type["elementType"]), max_size=10)
        else:
            inner = st.dictionaries(spark_values(data_type["keyType"]).filter(lambda k: k is not None),
                                    spark_values(data_type["valueType"]), max_size=5)
        return st.none() | inner
    bits = {"byte": 7, "short": 15, "integer": 31, "long": 63}
    if data_type in bits:
        atomic = st.integers(-2 ** bits[data_type], 2 ** bits[data_type] - 1)
    elif data_type == "boolean":
        atomic = st.booleans()
    elif data_type in ("float", "double"):
        atomic = st.floats(width=32 if data_type == "float" else 64)
    elif data_type == "string":
        atomic = st.text(max_size=20)
    elif data_type == "binary":
        atomic = st.binary(max_size=20).map(bytearray)
    elif data_type == "date":
        atomic = st.dates()
    elif data_type == "timestamp":  # one day away from the ends, whatever the local time zone
        atomic = st.datetimes(dt.datetime(1, 1, 2), dt.datetime(9999, 12, 30), timezones=st.just(dt.timezone.utc))
    elif data_type == "timestamp_ntz":
        atomic = st.datetimes()
    elif data_type.startswith("interval"):  # day-time
        atomic = st.integers(-2 ** 62, 2 ** 62).map(lambda m: dt.timedelta(microseconds=m))
    else:
        precision, scale = (int(p) for p in data_type[len("decimal("):-1].split(","))
        atomic = st.integers(1 - 10 ** precision, 10 ** precision - 1).map(
            lambda u: Decimal(u).scaleb(-scale, Context(prec=80)))
    return st.none() | atomic


@pytest.mark.spark
@pytest.mark.parametrize("name", NAMES)
def test_rows_spark_encodes_now_decode_to_the_values_spark_collects(name, spark):
    """Hypothesis draws rows of each corpus schema; Spark (the session of the whole run) encodes and
    collects them; the decoder returns Spark's values."""
    spark_type = CORPUS["schemas"][name]["type"]

    @settings(max_examples=8, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(st.tuples(*[spark_values(f["type"]) for f in spark_type["fields"]]), min_size=1, max_size=8))
    def check(rows):
        pairs = UNSAFE_ROWS.encoded(spark, spark_type, rows)
        buf, starts = b"", []
        for data, _ in pairs:
            starts.append(len(buf))
            buf += data
        assert decoded_rows(name, buf, starts, [*starts[1:], len(buf)]) == [UNSAFE_ROWS.canonical(row, spark_type) for _, row in pairs]

    check()
