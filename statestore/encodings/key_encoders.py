"""How state keys and values are laid out around their ``UnsafeRow`` bytes, per provider.

HDFS provider: the row bytes as they are. RocksDB provider (``RocksDBStateEncoder``): a version
byte (0) before every row; with column families (transformWithState) a 2-byte little-endian column
family id before the key. Key encoders: ``NoPrefixKeyStateEncoderSpec`` (version, row);
``PrefixKeyScanStateEncoderSpec`` (int32 little-endian length of the encoded prefix row, the
prefix row of the first ``numColsPrefixKey`` fields, then the encoded row of the others);
``RangeKeyScanStateEncoderSpec`` (the same with the ordering fields first, each stored as binary:
a marker byte (0 negative, 1 positive, 2 null) then the value big-endian, negative floats with all
bits flipped). Values: one encoded row, or for lists (``MultiValuedStateEncoder``) int32
little-endian size + encoded row per element, elements joined by ``,`` (RocksDB's string append).
Elements are not always joined by ``,`` (:mod:`wmcheck.statestore.rocksdb.list_frames` splits them).

With ``encodingFormat=avro`` the rows after the version byte are Avro (:mod:`wmcheck.statestore.encodings.avro_rows`) in the
same layouts; range-scan keys (only internal transformWithState column families) are not read then.
"""
from __future__ import annotations

import struct
from typing import Any, Callable

from wmcheck.checkpoint.errors import UnsupportedError, arg
from wmcheck.statestore.encodings.unsafe_row import atomic_kind, row_decoder
from wmcheck.statestore.formats.schema import KeyEncoderSpec, StructType
from wmcheck.statestore.rocksdb.list_frames import frames

RowDecoder = Callable[[bytes], dict[str, Any]]
RowAt = Callable[[bytes, int], dict[str, Any]]
NO_PREFIX, PREFIX_SCAN, RANGE_SCAN = "NoPrefixKeyStateEncoderSpec", "PrefixKeyScanStateEncoderSpec", "RangeKeyScanStateEncoderSpec"
_RANGE_FORMATS = {"byte": ">b", "short": ">h", "integer": ">i", "long": ">q", "float": ">f", "double": ">d"}
_NULL_MARKER, _NEGATIVE = 2, 0


def _part(fields: tuple) -> StructType:
    return StructType(tuple(fields))


def _rows(schema: StructType, avro: bool, schema_id: bool = True) -> RowAt:
    """The row decoder of the encoding format (an Avro row after the version byte has a schema id
    unless it is the prefix of a prefix-scan key)."""
    if not avro:
        return row_decoder(schema)
    from wmcheck.statestore.encodings.avro_rows import avro_row_decoder

    return avro_row_decoder(schema, schema_id)


def key_decoder(schema: StructType, spec: KeyEncoderSpec | None, rocksdb: bool, column_family: bool,
                avro: bool = False) -> RowDecoder:
    """``key bytes -> {field: value}`` for keys of ``schema`` (``avro``: Avro-encoded rows)."""
    if not rocksdb:
        whole = row_decoder(schema)
        return lambda data: whole(data, 0)
    start = 2 if column_family else 0
    kind = spec.encoder_type if spec else NO_PREFIX
    if kind == NO_PREFIX:
        whole = _rows(schema, avro)
        return lambda data: whole(data, start + 1)
    names = [f.name for f in schema.fields]
    if kind == PREFIX_SCAN:
        n = spec.num_cols_prefix_key or 0  # type: ignore[union-attr]
        first, rest = _rows(_part(schema.fields[:n]), avro, schema_id=False), _rows(_part(schema.fields[n:]), avro)

        def prefixed(data: bytes) -> dict[str, Any]:
            (size,) = struct.unpack_from("<i", data, start)
            out = {**first(data, start + 5), **rest(data, start + 4 + size + 1)}
            return {name: out[name] for name in names}

        return prefixed
    if kind == RANGE_SCAN and not avro:
        return _range_decoder(schema, tuple(spec.ordering_ordinals or ()), start)  # type: ignore[union-attr]
    raise UnsupportedError(f"key encoder {kind}{' of Avro-encoded state' if avro else ''} is not read by the python engine",
                           hint=f"use {arg('engine', 'spark')}")


def _range_decoder(schema: StructType, ordinals: tuple[int, ...], start: int) -> RowDecoder:
    ordered = [schema.fields[i] for i in ordinals]
    formats = []
    for f in ordered:
        kind = atomic_kind(f.data_type) if isinstance(f.data_type, str) else None
        if kind not in _RANGE_FORMATS:
            raise UnsupportedError(f"range-scan key field {f.name!r} of type {f.data_type!r} is not read by the python engine",
                                   hint=f"use {arg('engine', 'spark')}")
        formats.append((f.name, struct.Struct(_RANGE_FORMATS[kind]), kind in ("float", "double")))
    binary = row_decoder(_part(tuple(type(f)(f.name, "binary", True, {}) for f in ordered)))
    others = tuple(f for i, f in enumerate(schema.fields) if i not in ordinals)
    rest = row_decoder(_part(others)) if others else None
    names = [f.name for f in schema.fields]

    def ranged(data: bytes) -> dict[str, Any]:
        (size,) = struct.unpack_from("<i", data, start)
        raw = binary(data, start + 5)
        out: dict[str, Any] = {}
        for name, fmt, floating in formats:
            value = raw[name]
            if value is None or value[0] == _NULL_MARKER:
                out[name] = None
                continue
            body = value[1:1 + fmt.size]
            if floating and value[0] == _NEGATIVE:
                body = bytes(b ^ 0xFF for b in body)
            out[name] = fmt.unpack(body)[0]
        if rest is not None:
            out.update(rest(data, start + 4 + size + 1))
        return {name: out[name] for name in names}

    return ranged


def single_value_decoder(schema: StructType, rocksdb: bool, avro: bool = False) -> RowDecoder:
    """``value bytes -> {field: value}`` for single values."""
    row = _rows(schema, avro)
    skip = 1 if rocksdb else 0
    return lambda data: row(data, skip)


def values_decoder(schema: StructType, avro: bool = False) -> Callable[[bytes], list[dict[str, Any]]]:
    """``value bytes -> [rows]`` for a RocksDB list (``MultiValuedStateEncoder``)."""
    row = _rows(schema, avro)

    def many(data: bytes) -> list[dict[str, Any]]:
        return [row(data, start + 1) for start, _ in frames(data, 4)]

    return many
