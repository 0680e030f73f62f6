"""Decompress state files as Spark's ``CompressionCodec`` wrote them (``compression.codec`` of the checkpoint).

* ``lz4``: lz4-java's ``LZ4BlockOutputStream`` framing: per block the magic ``LZ4Block``, a token
  byte (method ``0x10`` raw or ``0x20`` LZ4, low nibble the level), little-endian int32 compressed
  length, decompressed length and checksum, then the block; a block of length 0 ends the stream.
  The checksum is XXHash32 (seed ``0x9747b28c``) of the decompressed block, its low 28 bits; Spark's
  reader fails on a mismatch ("Stream is corrupted"), and so does this one when ``xxhash`` is installed.
* ``zstd``: zstd-jni's ``ZstdOutputStream``: standard zstd frames.
* ``snappy``: snappy-java's ``SnappyOutputStream``: a 16-byte header (``\\x82SNAPPY\\x00``, version,
  compatible version) then big-endian int32 length + raw snappy block, repeated.

Spark's readers decompress lazily, as its record loop asks for bytes: a block, frame or chunk after the one that
holds the stream's end marker is never read (bytes appended to a finished file, a damaged lz4 end block). So a
unit that does not decode ends the decompressed stream here rather than failing it, and the error waits in
:class:`Decompressed` for a reader that needs the bytes past it.

The libraries (lz4, zstandard, cramjam) are imported when a file needs them.
"""
from __future__ import annotations

import struct

from wmcheck.checkpoint.errors import MalformedFileError, UnsupportedError, arg

LZ4_MAGIC = b"LZ4Block"
LZ4_HEADER = 21
SNAPPY_MAGIC = b"\x82SNAPPY\x00"
SNAPPY_HEADER = 16
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_SHORT = {"org.apache.spark.io.lz4compressioncodec": "lz4", "org.apache.spark.io.zstdcompressioncodec": "zstd",
          "org.apache.spark.io.snappycompressioncodec": "snappy", "org.apache.spark.io.lzfcompressioncodec": "lzf"}
LZ4_SEED = 0x9747B28C
MODULES = {"lz4": "lz4", "zstd": "zstandard", "snappy": "cramjam"}
SUPPORTED = tuple(MODULES)
_HINT = "the state file is truncated or damaged: wmcheck check CKPT"


class Decompressed(bytes):
    """The bytes of a state file decompressed up to its first unit that does not decode; ``error``: why that unit
    did not (None when the whole file decoded), raised by a record reader that reads past the bytes."""

    error: MalformedFileError | None = None

    @classmethod
    def of(cls, parts: list[bytes], error: MalformedFileError | None) -> "Decompressed":
        out = cls(b"".join(parts))
        out.error = error
        return out


def codec_name(conf_value: str | None) -> str:
    """The short codec name of a ``compression.codec`` value (Spark's default is lz4)."""
    value = (conf_value or "lz4").strip().lower()
    return _SHORT.get(value, value)


def require_module(module: str, what: str) -> None:
    """Raise UnsupportedError when the package ``module`` (needed for ``what``) is not installed."""
    from importlib.util import find_spec

    if find_spec(module) is None:
        raise UnsupportedError(f"{what} without Spark needs the {module} package, which is not installed",
                               hint=f"pip install {module.replace('_', '-')} (wmcheck depends on it: the install is "
                               f"incomplete), or use {arg('engine', 'spark')}")


def require_codec(name: str) -> None:
    if name not in SUPPORTED:
        raise UnsupportedError(f"state compression codec {name!r} is not read by the python engine (it reads {', '.join(SUPPORTED)})",
                               hint=f"use {arg('engine', 'spark')}")
    require_module(MODULES[name], f"reading {name}-compressed state")


def decompress(data: bytes, codec: str, path: str, limit: int | None = None) -> Decompressed:
    """The decompressed bytes of a whole state file, up to its first unit that does not decode (its ``error``);
    with ``limit``, of its first blocks up to at least ``limit`` bytes (or all of them), as a reader of its header
    reads them."""
    require_codec(codec)
    if codec == "lz4":
        return _lz4_blocks(data, path, limit)
    if codec == "zstd":
        return _zstd(data, path, limit)
    return _snappy(data, path, limit)


def _fail(path: str, at: int, message: str) -> MalformedFileError:
    return MalformedFileError(message, path=path, byte=at, hint=_HINT)


def _lz4_checksum():
    """XXHash32 of lz4-java's block checksums, None when the ``xxhash`` package is not installed."""
    try:
        import xxhash
    except ImportError:
        return None
    return lambda block: xxhash.xxh32_intdigest(block, LZ4_SEED) & 0xFFFFFFF


def _lz4_blocks(data: bytes, path: str, limit: int | None = None) -> Decompressed:
    import lz4.block

    checksum = _lz4_checksum()
    out: list[bytes] = []
    pos, done = 0, 0
    while pos < len(data) and (limit is None or done < limit):
        error, plain, pos = _lz4_block(data, pos, path, lz4, checksum)
        if error is not None:
            return Decompressed.of(out, error)
        if plain is None:
            break
        out.append(plain)
        done += len(plain)
    return Decompressed.of(out, None)


def _lz4_block(data: bytes, pos: int, path: str, lz4, checksum) -> tuple[MalformedFileError | None, bytes | None, int]:
    """(why the block at ``pos`` does not decode or None, its decompressed bytes or None at the end block, where the
    next block starts)."""
    if data[pos:pos + 8] != LZ4_MAGIC:
        return _fail(path, pos, f"expected an LZ4Block header, found {bytes(data[pos:pos + 8])!r}"), None, pos
    if pos + LZ4_HEADER > len(data):
        return _fail(path, pos, "expected a 21-byte LZ4Block header, the file ends"), None, pos
    token = data[pos + 8]
    size, raw_size, expected = struct.unpack_from("<iii", data, pos + 9)
    pos += LZ4_HEADER
    if raw_size == 0:
        return None, None, pos
    block = data[pos:pos + size]
    if len(block) != size:
        return _fail(path, pos, f"expected {size} bytes of an LZ4 block, found {len(block)} (the file ends)"), None, pos
    method = token & 0xF0
    if method == 0x10:
        plain = block
    elif method == 0x20:
        try:
            plain = lz4.block.decompress(block, uncompressed_size=raw_size)
        except lz4.block.LZ4BlockError:
            return _fail(path, pos, "expected an LZ4 block, found bytes that do not decompress"), None, pos
    else:
        return _fail(path, pos - LZ4_HEADER + 8, f"expected an LZ4Block method 0x10 or 0x20, found {method:#x}"), None, pos
    if len(plain) != raw_size or checksum is not None and checksum(plain) != expected & 0xFFFFFFF:
        return _fail(path, pos - LZ4_HEADER, "expected an LZ4 block matching its header's length and checksum "
                                            "(Spark's reader: Stream is corrupted)"), None, pos
    return None, plain, pos + size


def _zstd(data: bytes, path: str, limit: int | None = None) -> Decompressed:
    import zstandard

    context = zstandard.ZstdDecompressor()
    out: list[bytes] = []
    pos, done = 0, 0
    while pos < len(data) and (limit is None or done < limit):
        if not data.startswith(ZSTD_MAGIC, pos):
            return Decompressed.of(out, _fail(path, pos, f"expected a zstd frame, found {bytes(data[pos:pos + 4])!r}"))
        frame = context.decompressobj()
        try:
            plain = frame.decompress(data[pos:])
        except zstandard.ZstdError as exc:
            return Decompressed.of(out, _fail(path, pos, f"expected a zstd frame, found bytes that do not decompress ({exc})"))
        if not frame.eof:
            return Decompressed.of([*out, plain], _fail(path, len(data), "expected the rest of a zstd frame, the file ends"))
        out.append(plain)
        done += len(plain)
        pos = len(data) - len(frame.unused_data)
    return Decompressed.of(out, None)


def _snappy(data: bytes, path: str, limit: int | None = None) -> Decompressed:
    import cramjam

    out: list[bytes] = []
    pos, done = 0, 0
    while pos < len(data) and (limit is None or done < limit):
        if data[pos:pos + 8] == SNAPPY_MAGIC:
            pos += SNAPPY_HEADER
            continue
        if pos + 4 > len(data):
            return Decompressed.of(out, _fail(path, pos, "expected a snappy chunk length, the file ends"))
        (size,) = struct.unpack_from(">i", data, pos)
        chunk = data[pos + 4:pos + 4 + size]
        if size < 0 or len(chunk) != size:
            return Decompressed.of(out, _fail(path, pos, f"expected a snappy chunk of {size} bytes, found {len(chunk)}"))
        try:
            out.append(bytes(cramjam.snappy.decompress_raw(chunk)))
        except Exception:  # cramjam raises its own DecompressionError
            return Decompressed.of(out, _fail(path, pos, "expected a snappy chunk, found bytes that do not decompress"))
        pos += 4 + size
        done += len(out[-1])
    return Decompressed.of(out, None)
