"""Parquet parts encoded apart, written as one file: the compact-protocol footer read and written back byte for
byte, and the written file read by pyarrow as the parts' rows in order, row group by row group, with their
statistics (Spark reads one in tests/test_state_spark.py)."""
from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from wmcheck.checkpoint.errors import CheckpointError, MalformedFileError
from wmcheck.statestore.output.parquet_parts import ParquetPart, PartsWriter, encode_part
from wmcheck.statestore.output.thrift_compact import read_struct, write_struct


def _table(start: int, n: int) -> pa.Table:
    return pa.table({
        "id": pa.array(range(start, start + n), pa.int64()),
        "name": pa.array([f"name-{i % 13}" for i in range(n)], pa.string()),
        "key": pa.array([{"window": {"start": i, "end": i + 10}, "tag": None if i % 3 else "t"} for i in range(n)],
                        pa.struct([("window", pa.struct([("start", pa.int64()), ("end", pa.int64())])), ("tag", pa.string())])),
        "value": pa.array([None if i % 5 == 0 else i * 0.5 for i in range(n)], pa.float64()),
        "blob": pa.array([bytes([i % 256]) * (i % 7) for i in range(n)], pa.large_binary()),
        "partition_id": pa.array([start] * n, pa.int32()),  # dictionary-encoded (its dictionary page offsets move)
    })


def _different() -> CheckpointError:
    return CheckpointError("different schemas")


def _write(path, parts) -> int:
    with PartsWriter(str(path), _different) as writer:
        for part in parts:
            writer.add(part)
    return writer.rows


def _footer(data: bytes) -> bytes:
    size = int.from_bytes(data[-8:-4], "little")
    return data[-8 - size:-8]


def test_footers_are_written_back_byte_for_byte():
    for table in (_table(0, 10), _table(10, 3000), _table(0, 0)):
        footer = _footer(encode_part(table).data)
        meta, end = read_struct(footer)
        assert end == len(footer) and write_struct(meta) == footer


@pytest.mark.parametrize("sizes", [[1], [100, 0, 200, 300, 7], [5000, 1, 2, 3, 4, 5]])
def test_parts_read_as_their_rows_in_order(tmp_path, sizes):
    tables = [_table(sum(sizes[:i]), n) for i, n in enumerate(sizes)]
    out = tmp_path / "all.parquet"
    assert _write(out, map(encode_part, tables)) == sum(sizes)
    want = pa.concat_tables(tables)
    assert pq.read_table(out).equals(want)
    written = pq.ParquetFile(out)
    groups = [n for n in sizes if n]
    assert [written.metadata.row_group(i).num_rows for i in range(written.metadata.num_row_groups)] == groups
    starts = [sum(groups[:i]) for i in range(len(groups))]
    for i, (start, n) in enumerate(zip(starts, groups)):
        assert written.read_row_group(i).equals(want.slice(start, n))
        stats = written.metadata.row_group(i).column(0).statistics
        assert (stats.min, stats.max) == (start, start + n - 1)
    last = groups[-1]
    assert pq.read_table(out, filters=[("id", ">=", sum(groups) - last)]).equals(want.slice(sum(groups) - last))


def test_only_the_label_columns_are_dictionary_encoded():
    meta = pq.ParquetFile(pa.BufferReader(encode_part(_table(0, 3000)).data)).metadata.row_group(0)
    dictionary = {meta.column(i).path_in_schema: meta.column(i).has_dictionary_page for i in range(meta.num_columns)}
    assert dictionary == {"id": False, "name": False, "key.window.start": False, "key.window.end": False, "key.tag": False,
                          "value": False, "blob": False, "partition_id": True}


def test_without_rows_the_file_has_the_first_parts_schema(tmp_path):
    out = tmp_path / "empty.parquet"
    other = pa.table({"x": pa.array([], pa.int8())})
    assert _write(out, [encode_part(_table(0, 0)), encode_part(other)]) == 0
    assert pq.read_table(out).equals(_table(0, 0))


def test_empty_parts_of_another_schema_are_not_compared(tmp_path):
    out = tmp_path / "rows.parquet"
    other = pa.table({"x": pa.array([], pa.int8())})
    assert _write(out, [encode_part(other), encode_part(_table(0, 5)), encode_part(other)]) == 5
    assert pq.read_table(out).equals(_table(0, 5))


def test_a_part_of_another_schema_is_refused_and_no_file_is_left(tmp_path):
    out = tmp_path / "rows.parquet"
    other = pa.table({"x": pa.array([1], pa.int8())})
    with pytest.raises(CheckpointError, match="different schemas"):
        _write(out, [encode_part(_table(0, 5)), encode_part(other)])
    assert not os.path.exists(out)


def test_a_part_with_a_page_index_is_refused(tmp_path):
    sink = pa.BufferOutputStream()
    pq.write_table(_table(0, 10), sink, write_page_index=True)
    with pytest.raises(MalformedFileError, match="page index"):
        _write(tmp_path / "all.parquet", [ParquetPart(10, sink.getvalue().to_pybytes())])
    assert not (tmp_path / "all.parquet").exists()


def test_bytes_that_are_not_a_part_are_named(tmp_path):
    out = tmp_path / "all.parquet"
    with pytest.raises(MalformedFileError) as exc:
        _write(out, [ParquetPart(1, b"PAR1 not a footer at all PAR1")])
    assert exc.value.path == str(out) and "PAR1" in exc.value.message
