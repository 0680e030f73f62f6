"""Thrift's compact protocol, read into and written back from plain values without a schema: what a
Parquet footer (``FileMetaData``) is encoded with.

A struct is a :class:`Struct` (its fields by id, each with its wire type, in the order read), a list or
set a :class:`ListValue`, a map a :class:`MapValue`; integers are ints, binaries bytes, doubles floats,
booleans bools. Writing what was read gives the same bytes back, so a caller edits the few fields it
knows (by id) and leaves everything else as it was.
"""
from __future__ import annotations

import struct
from dataclasses import field
from typing import Any

from wmcheck.checkpoint.records import dataclass

STOP, TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(13)
_DOUBLE = struct.Struct("<d")


class ThriftError(ValueError):
    """The bytes are not a compact-protocol struct."""


@dataclass
class Struct:
    fields: dict[int, tuple[int, Any]] = field(default_factory=dict)
    """field id -> (wire type, value); booleans have type TRUE."""

    def get(self, fid: int, default: Any = None) -> Any:
        return self.fields[fid][1] if fid in self.fields else default

    def set(self, fid: int, value: Any) -> None:
        self.fields[fid] = (self.fields[fid][0], value)


@dataclass
class ListValue:
    element: int
    items: list[Any]


@dataclass
class MapValue:
    key: int
    value: int
    items: list[tuple[Any, Any]]


def read_struct(data: bytes, pos: int = 0) -> tuple[Struct, int]:
    """The struct at ``pos`` of ``data`` and the offset after it."""
    try:
        return _Reader(data, pos).struct()
    except IndexError:
        raise ThriftError("the struct ends before its last field") from None


def write_struct(value: Struct) -> bytes:
    out = bytearray()
    _write_struct(out, value)
    return bytes(out)


class _Reader:
    def __init__(self, data: bytes, pos: int) -> None:
        self.data, self.pos = data, pos

    def struct(self) -> tuple[Struct, int]:
        fields: dict[int, tuple[int, Any]] = {}
        last = 0
        while True:
            header = self.data[self.pos]
            self.pos += 1
            kind = header & 0x0F
            if kind == STOP:
                return Struct(fields), self.pos
            delta = header >> 4
            fid = last + delta if delta else _unzigzag(self.varint())
            if kind in (TRUE, FALSE):
                fields[fid] = (TRUE, kind == TRUE)
            else:
                fields[fid] = (kind, self.value(kind))
            last = fid

    def varint(self) -> int:
        shift = result = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 70:
                raise ThriftError("a varint longer than 10 bytes")

    def value(self, kind: int) -> Any:
        if kind in (TRUE, FALSE):  # a boolean in a container: one byte
            byte = self.data[self.pos]
            self.pos += 1
            return byte == TRUE
        if kind == BYTE:
            byte = self.data[self.pos]
            self.pos += 1
            return byte - 256 if byte > 127 else byte
        if kind in (I16, I32, I64):
            return _unzigzag(self.varint())
        if kind == DOUBLE:
            (number,) = _DOUBLE.unpack_from(self.data, self.pos)
            self.pos += 8
            return number
        if kind == BINARY:
            size = self.varint()
            if self.pos + size > len(self.data):
                raise ThriftError("a binary longer than the bytes left")
            value = bytes(self.data[self.pos:self.pos + size])
            self.pos += size
            return value
        if kind in (LIST, SET):
            header = self.data[self.pos]
            self.pos += 1
            size = header >> 4 if header >> 4 != 15 else self.varint()
            element = header & 0x0F
            return ListValue(element, [self.value(element) for _ in range(size)])
        if kind == MAP:
            size = self.varint()
            if not size:
                return MapValue(0, 0, [])
            types = self.data[self.pos]
            self.pos += 1
            keys, values = types >> 4, types & 0x0F
            return MapValue(keys, values, [(self.value(keys), self.value(values)) for _ in range(size)])
        if kind == STRUCT:
            found, self.pos = self.struct()
            return found
        raise ThriftError(f"unknown compact type {kind}")


def _unzigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def _varint(out: bytearray, n: int) -> None:
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _write_struct(out: bytearray, value: Struct) -> None:
    last = 0
    for fid, (kind, item) in value.fields.items():
        wire = (TRUE if item else FALSE) if kind == TRUE else kind
        if 0 < fid - last <= 15:
            out.append((fid - last) << 4 | wire)
        else:
            out.append(wire)
            _varint(out, _zigzag(fid))
        if kind != TRUE:
            _write_value(out, kind, item)
        last = fid
    out.append(STOP)


def _write_value(out: bytearray, kind: int, item: Any) -> None:
    if kind in (TRUE, FALSE):
        out.append(TRUE if item else FALSE)
    elif kind == BYTE:
        out.append(item & 0xFF)
    elif kind in (I16, I32, I64):
        _varint(out, _zigzag(item))
    elif kind == DOUBLE:
        out += _DOUBLE.pack(item)
    elif kind == BINARY:
        _varint(out, len(item))
        out += item
    elif kind in (LIST, SET):
        size = len(item.items)
        if size < 15:
            out.append(size << 4 | item.element)
        else:
            out.append(0xF0 | item.element)
            _varint(out, size)
        for element in item.items:
            _write_value(out, item.element, element)
    elif kind == MAP:
        _varint(out, len(item.items))
        if item.items:
            out.append(item.key << 4 | item.value)
            for k, v in item.items:
                _write_value(out, item.key, k)
                _write_value(out, item.value, v)
    elif kind == STRUCT:
        _write_struct(out, item)
    else:
        raise ThriftError(f"unknown compact type {kind}")
