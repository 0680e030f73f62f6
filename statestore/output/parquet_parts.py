"""One Parquet file made of parts encoded apart (each worker process encodes the rows it read): the parts'
column chunks copied as they are, and one footer listing every row group, its offsets moved to where its
bytes now lie. Encoding, the costly half of writing Parquet, runs where the rows are read, in parallel; the
file is written by one process that only copies bytes.

A Parquet file is ``PAR1``, the column chunks of its row groups, the footer (``FileMetaData``, Thrift's
compact protocol: :mod:`wmcheck.statestore.output.thrift_compact`), the footer's length and ``PAR1``. The footer's offsets are
absolute: a row group's ``file_offset``, a column chunk's ``file_offset``, and its metadata's data,
index and dictionary page and bloom filter offsets. Page indexes hold page offsets of their own and are
refused (parts are encoded without them).
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, BinaryIO, Callable

from wmcheck.checkpoint.errors import CheckpointError, MalformedFileError
from wmcheck.checkpoint.records import dataclass
from wmcheck.statestore.output.thrift_compact import STRUCT, ListValue, Struct, ThriftError, read_struct, write_struct

if TYPE_CHECKING:
    import pyarrow as pa

MAGIC = b"PAR1"
_SCHEMA, _NUM_ROWS, _ROW_GROUPS, _KEY_VALUES = 2, 3, 4, 5  # FileMetaData
_COLUMNS, _GROUP_OFFSET, _ORDINAL = 1, 5, 7  # RowGroup
_CHUNK_OFFSET, _CHUNK_META, _OFFSET_INDEX, _COLUMN_INDEX = 2, 3, 4, 6  # ColumnChunk
_PAGE_OFFSETS = (9, 10, 11, 14)  # ColumnMetaData: data, index and dictionary page, bloom filter
_ORDINAL_MAX = (1 << 15) - 1


@dataclass(frozen=True)
class ParquetPart:
    """Rows encoded as a whole Parquet file of their own (``data``), to be stitched into one."""

    rows: int
    data: bytes


DICTIONARY = ("operator_id", "store", "partition_id")
"""The columns of state rows dictionary-encoded: they repeat one value over a part. Keys are unique within a store
partition, so a dictionary of them is tried and dropped (Arrow's writer falls back to plain encoding once it
outgrows its page), which costs a third of the encoding (measured on the 1M-key bench state's evicted rows)."""


def encode_part(table: "pa.Table") -> ParquetPart:
    """``table`` as a :class:`ParquetPart` (one row group, no page index; the :data:`DICTIONARY` columns it has
    dictionary-encoded, the others plain)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=max(table.num_rows, 1), write_page_index=False,
                   use_dictionary=[name for name in DICTIONARY if name in table.column_names])
    return ParquetPart(table.num_rows, sink.getvalue().to_pybytes())


@dataclass(frozen=True)
class _Footer:
    meta: Struct
    data_end: int
    """Where the part's column chunks end (its footer starts)."""


def _footer(data: bytes, path: str) -> _Footer:
    size = len(data)
    length = int.from_bytes(data[size - 8:size - 4], "little") if size >= 12 else -1
    if size < 12 or data[:4] != MAGIC or data[size - 4:] != MAGIC or not 0 < length <= size - 12:
        raise MalformedFileError("expected an encoded Parquet part (PAR1, its row groups, a footer, PAR1)", path=path)
    try:
        meta, _ = read_struct(data, size - 8 - length)
    except ThriftError as exc:
        raise MalformedFileError(f"expected a Parquet footer: {exc}", path=path, byte=size - 8 - length) from None
    return _Footer(meta, size - 8 - length)


class PartsWriter:
    """Writes :class:`ParquetPart` s, as they come, as one Parquet file at ``path``: their rows in order, each
    part's row groups kept. A part with rows of another schema than the first part with rows is refused with
    ``different()``'s error; without any rows the file has the first part's schema. :meth:`close` writes the
    footer; :meth:`abort` (or an error inside ``with``) leaves no file."""

    def __init__(self, path: str, different: Callable[[], CheckpointError]) -> None:
        self.path, self.different = path, different
        self.out: BinaryIO = open(path, "wb")
        self.out.write(MAGIC)
        self.first: Struct | None = None
        """The footer of the first part with rows (else of the first part)."""
        self.schema: tuple[Any, Any] | None = None
        self.groups: list[Struct] = []
        self.rows = 0

    def __enter__(self) -> "PartsWriter":
        return self

    def __exit__(self, kind: Any, *exc: object) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()

    def add(self, part: ParquetPart) -> None:
        footer = _footer(part.data, self.path)
        meta = footer.meta
        if not part.rows:
            self.first = self.first or meta
            return
        schema = (meta.get(_SCHEMA), meta.get(_KEY_VALUES))  # the Parquet schema, and the Arrow schema it keeps
        if self.schema is None:
            self.first, self.schema = meta, schema
        elif schema != self.schema:
            raise self.different()
        shift = self.out.tell() - len(MAGIC)
        self.out.write(memoryview(part.data)[len(MAGIC):footer.data_end])
        self.groups += [_moved(group, shift, self.path) for group in meta.get(_ROW_GROUPS, ListValue(STRUCT, [])).items]
        self.rows += meta.get(_NUM_ROWS, 0)

    def close(self) -> int:
        """Write the footer; the rows written. At least one part must have been added."""
        assert self.first is not None, "a Parquet file needs the schema of one part"
        meta = Struct(dict(self.first.fields))
        meta.set(_NUM_ROWS, self.rows)
        meta.set(_ROW_GROUPS, ListValue(STRUCT, self.groups))
        for ordinal, group in enumerate(self.groups):
            if _ORDINAL in group.fields:
                if ordinal > _ORDINAL_MAX:
                    del group.fields[_ORDINAL]
                else:
                    group.set(_ORDINAL, ordinal)
        footer = write_struct(meta)
        self.out.write(footer + len(footer).to_bytes(4, "little") + MAGIC)
        self.out.close()
        return self.rows

    def abort(self) -> None:
        self.out.close()
        os.remove(self.path)


def _moved(group: Struct, shift: int, path: str) -> Struct:
    """``group`` with every absolute offset moved by ``shift`` bytes (an offset of 0 is unset)."""
    _shift(group, (_GROUP_OFFSET,), shift)
    for chunk in group.get(_COLUMNS).items:
        if _OFFSET_INDEX in chunk.fields or _COLUMN_INDEX in chunk.fields:
            raise MalformedFileError("a Parquet part with a page index cannot be moved", path=path)
        _shift(chunk, (_CHUNK_OFFSET,), shift)
        meta = chunk.get(_CHUNK_META)
        if meta is not None:
            _shift(meta, _PAGE_OFFSETS, shift)
    return group


def _shift(value: Struct, fids: tuple[int, ...], shift: int) -> None:
    for fid in fids:
        offset = value.get(fid)
        if offset:
            value.set(fid, offset + shift)
