"""Record batch compression codecs, byte-compatible with what the Java client writes.

The attribute codes are Kafka's (org.apache.kafka.common.record.CompressionType). Each codec
writes the stream format Kafka's own Compression classes produce, so our batches are the
bytes a Java producer would send:

- gzip: a single gzip member, deflate level 6, mtime 0, XFL 0, OS 255 (java.util.zip.GZIPOutputStream).
- snappy: xerial snappy-java framing (SnappyOutputStream): 16-byte header, then 32 KiB input
  blocks, each written as an int32 length plus a raw snappy block. Reading accepts raw snappy too.
- lz4: an LZ4 frame with independent 64 KiB blocks, no content size and no checksums
  (Kafka's Lz4BlockOutputStream).
- zstd: a zstd frame written by a streaming compressor, level 3, so the frame header carries
  no content size (zstd-jni's ZstdOutputStream); reading therefore streams.

gzip, lz4, zstd and uncompressed output equal the Java client's byte for byte. snappy output
has the same framing, but python-snappy's encoder (cramjam) may pick different matches than
the C++ libsnappy inside snappy-java, so the compressed blocks can differ by a few bytes.

Decompression is bounded by ``max_size`` so a small batch cannot expand without limit. Record data
decompresses through `native` (wire/_decompress_scan.c: zlib, liblz4, libzstd, and libsnappy when
it loads, into a reused buffer) when it is built, so the record check on append and every later
read of a batch use the same decoder; otherwise through the Python bindings (`decompress_py`).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import TypeVar

import lz4.frame
import snappy
import zstandard

from logway.wire.batch import CorruptBatch

try:
    from logway.wire import _decompress_scan as native
except ImportError:  # built without liblz4/libzstd headers, or those libraries are missing at run time
    native = None

T = TypeVar("T")

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES: dict[str, int] = {"none": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
CODEC_BY_CODE: dict[int, str] = {code: name for name, code in CODEC_NAMES.items()}

DEFAULT_MAX_SIZE = 64 * 1024 * 1024

# Kafka's default levels (KIP-390): gzip Deflater.DEFAULT_COMPRESSION (= 6), zstd 3.
GZIP_LEVEL = 6
ZSTD_LEVEL = 3

_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK_SIZE = 32 * 1024
_INT32 = struct.Struct(">i")
_CHUNK = 64 * 1024


class DecompressionError(CorruptBatch):
    """Compressed record data that its codec cannot decode."""


class DecompressedTooLarge(DecompressionError):
    """Compressed record data that expands beyond the allowed size."""


def codec_for_compression_type(name: str) -> int | None:
    """Codec for a ``compression.type`` value; None for "producer" (keep what the producer sent).

    Accepts the topic/broker values (uncompressed, gzip, snappy, lz4, zstd, producer) and the
    producer's "none", case-insensitively as Kafka's BrokerCompressionType.forName does.
    """
    lowered = name.strip().lower()
    if lowered == "producer":
        return None
    if lowered == "uncompressed":
        return NONE
    try:
        return CODEC_NAMES[lowered]
    except KeyError:
        raise ValueError(f"unknown compression.type {name!r}") from None


def compress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """Compress record data with ``codec`` in the stream format the Java client writes."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return _gzip_compress(data)
    if codec == SNAPPY:
        return _snappy_compress(data)
    if codec == LZ4:
        return lz4.frame.compress(
            data,
            compression_level=0,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            block_checksum=False,
            store_size=False,
        )
    if codec == ZSTD:
        # zstd-jni flushes its block when Kafka closes the stream, then ends the frame with an
        # empty last block: the same three steps give the same bytes.
        cobj = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_content_size=False).compressobj()
        return (
            cobj.compress(data)
            + cobj.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
            + cobj.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH)
        )
    raise ValueError(f"unknown compression codec {codec}")


def decompress(codec: int, data: bytes | bytearray | memoryview, max_size: int = DEFAULT_MAX_SIZE) -> bytes:
    """Decompress record data written with ``codec``; raise DecompressionError on bad input.

    Raises DecompressedTooLarge when the output would exceed ``max_size`` bytes.
    """
    if native is not None and codec in native.CODECS:
        return call_native(native.decompress, codec, data, max_size)
    return decompress_py(codec, data, max_size)


def decompress_py(codec: int, data: bytes | bytearray | memoryview, max_size: int = DEFAULT_MAX_SIZE) -> bytes:
    """`decompress` through the Python bindings (zlib, python-snappy, python-lz4, zstandard): for the codecs
    `native` does not decode (all of them when it is not built)."""
    if codec == NONE:
        out = bytes(data)
    elif codec == GZIP:
        out = _gzip_decompress(data, max_size)
    elif codec == SNAPPY:
        out = _snappy_decompress(data, max_size)
    elif codec == LZ4:
        out = _lz4_decompress(data, max_size)
    elif codec == ZSTD:
        out = _zstd_decompress(data, max_size)
    else:
        raise ValueError(f"unknown compression codec {codec}")
    if len(out) > max_size:
        raise DecompressedTooLarge(f"{CODEC_BY_CODE[codec]} data expands past {max_size} bytes")
    return out


def call_native(function: Callable[..., T], *args: object) -> T:
    """Call a function of `native`, its errors raised as DecompressionError and DecompressedTooLarge."""
    try:
        return function(*args)
    except native.TooLarge as exc:
        raise DecompressedTooLarge(str(exc)) from None
    except native.DecompressError as exc:
        raise DecompressionError(str(exc)) from None


def _gzip_compress(data: bytes | bytearray | memoryview) -> bytes:
    # A raw deflate stream between a fixed header and the CRC32/ISIZE trailer, exactly what
    # GZIPOutputStream writes (python's gzip module would set XFL and the current mtime).
    deflater = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = deflater.compress(data) + deflater.flush()
    trailer = struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)
    return _GZIP_HEADER + body + trailer


def _gzip_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    # GZIPInputStream reads concatenated members, so we do too.
    parts: list[bytes] = []
    produced = 0
    remaining = bytes(data)
    try:
        while True:
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            chunk = inflater.decompress(remaining, max_size - produced + 1)
            parts.append(chunk)
            produced += len(chunk)
            if produced > max_size:
                raise DecompressedTooLarge(f"gzip data expands past {max_size} bytes")
            if not inflater.eof:
                raise DecompressionError("truncated gzip stream")
            remaining = inflater.unused_data
            # Like GZIPInputStream, bytes after a member that do not start another member are ignored.
            if not remaining.startswith(b"\x1f\x8b"):
                return b"".join(parts)
    except zlib.error as exc:
        raise DecompressionError(f"bad gzip data: {exc}") from None


def _snappy_compress(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data)
    out = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = snappy.compress(bytes(view[start : start + _XERIAL_BLOCK_SIZE]))
        out.append(_INT32.pack(len(block)))
        out.append(block)
    return b"".join(out)


def _snappy_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    raw = bytes(data)
    if not raw.startswith(_XERIAL_MAGIC):
        return _snappy_block(raw, max_size)
    # Version and compat ints are not checked: some writers get their byte order wrong,
    # and snappy-java itself only rejects compat versions newer than it knows.
    if len(raw) < len(_XERIAL_HEADER):
        raise DecompressionError("truncated xerial snappy header")
    pos = len(_XERIAL_HEADER)
    parts: list[bytes] = []
    produced = 0
    while pos < len(raw):
        if len(raw) - pos < 4:
            raise DecompressionError("truncated xerial snappy block length")
        (size,) = _INT32.unpack_from(raw, pos)
        pos += 4
        if size < 0 or size > len(raw) - pos:
            raise DecompressionError(f"xerial snappy block length {size} runs past the data")
        block = _snappy_block(raw[pos : pos + size], max_size - produced)
        produced += len(block)
        parts.append(block)
        pos += size
    return b"".join(parts)


def _snappy_block(block: bytes, budget: int) -> bytes:
    # A raw snappy block starts with its uncompressed length as an unsigned varint: check it
    # against the budget before letting the library allocate that much.
    length = shift = 0
    for i, byte in enumerate(block[:5]):
        length |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            break
        if i == 4:
            raise DecompressionError("bad snappy length preamble")
    else:
        raise DecompressionError("truncated snappy block")
    if length > budget:
        raise DecompressedTooLarge(f"snappy block of {length} bytes exceeds the size limit")
    try:
        return snappy.decompress(block)
    except Exception as exc:  # python-snappy raises its own and cramjam's error types
        raise DecompressionError(f"bad snappy data: {exc}") from None


def _lz4_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    # Kafka's frames carry no content size. The library's one-shot decoder is fast but unbounded, and
    # its bounded one allocates max_length up front and is 4-5x slower (measured); so the block headers
    # bound the output first (each block holds at most the frame's block size) and the one-shot decoder
    # runs when that bound fits. Anything unusual goes to the bounded decoder, which names the problem.
    bound = _lz4_output_bound(data)
    if bound is not None and bound <= max_size:
        try:
            return lz4.frame.decompress(data)
        except RuntimeError:
            pass
    return _lz4_decompress_bounded(data, max_size)


_LZ4_MAGIC = 0x184D2204
_LZ4_BLOCK_MAX = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}


def _lz4_output_bound(data: bytes | bytearray | memoryview) -> int | None:
    """Most bytes an LZ4 frame can decompress to (blocks x block size), from its headers; None if it is not one frame."""
    end = len(data)
    if end < 7 or _UINT32_LE.unpack_from(data, 0)[0] != _LZ4_MAGIC:
        return None
    flags, block_descriptor = data[4], data[5]
    block_max = _LZ4_BLOCK_MAX.get(block_descriptor >> 4 & 7)
    if block_max is None or flags >> 6 != 1:
        return None
    pos = 6 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0) + 1  # content size, dictionary id, checksum
    block_checksum = 4 if flags & 0x10 else 0
    blocks = 0
    while pos + 4 <= end:
        size = _UINT32_LE.unpack_from(data, pos)[0] & 0x7FFFFFFF
        pos += 4
        if size == 0:
            return blocks * block_max
        pos += size + block_checksum
        blocks += 1
    return None


def _lz4_decompress_bounded(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    decompressor = lz4.frame.LZ4FrameDecompressor()
    try:
        out = decompressor.decompress(bytes(data), max_length=max_size + 1)
    except RuntimeError as exc:
        raise DecompressionError(f"bad lz4 data: {exc}") from None
    if len(out) > max_size:
        raise DecompressedTooLarge(f"lz4 data expands past {max_size} bytes")
    if not decompressor.eof:
        raise DecompressionError("truncated lz4 frame")
    # Like Kafka's Lz4BlockInputStream, bytes after the end mark are ignored.
    return out


def _zstd_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    # Streaming, because zstd-jni frames carry no content size; read_across_frames as zstd-jni does.
    # The stream reader returns what it has when the input stops mid-frame, so check first that
    # the input is whole frames.
    raw = bytes(data)
    _check_zstd_frames(raw)
    parts: list[bytes] = []
    produced = 0
    try:
        with zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True) as reader:
            while produced <= max_size:
                chunk = reader.read(min(_CHUNK, max_size + 1 - produced))
                if not chunk:
                    break
                parts.append(chunk)
                produced += len(chunk)
    except zstandard.ZstdError as exc:
        raise DecompressionError(f"bad zstd data: {exc}") from None
    if produced > max_size:
        raise DecompressedTooLarge(f"zstd data expands past {max_size} bytes")
    return b"".join(parts)


_ZSTD_MAGIC = 0xFD2FB528
_UINT32_LE = struct.Struct("<I")


def _check_zstd_frames(raw: bytes) -> None:
    """Walk zstd frame and block headers (RFC 8878) and raise unless ``raw`` is complete frames."""
    pos, end = 0, len(raw)
    if end == 0:
        raise DecompressionError("empty zstd data")
    while pos < end:
        if end - pos < 5:
            raise DecompressionError("truncated zstd frame header")
        (magic,) = _UINT32_LE.unpack_from(raw, pos)
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # skippable frame: magic, size, payload
            if end - pos < 8:
                raise DecompressionError("truncated zstd skippable frame")
            pos += 8 + _UINT32_LE.unpack_from(raw, pos + 4)[0]
            continue
        if magic != _ZSTD_MAGIC:
            raise DecompressionError("bad zstd frame magic")
        descriptor = raw[pos + 4]
        single_segment = descriptor >> 5 & 1
        pos += 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 3]
        pos += (single_segment, 2, 4, 8)[descriptor >> 6]
        while True:
            if end - pos < 3:
                raise DecompressionError("truncated zstd block header")
            block = raw[pos] | raw[pos + 1] << 8 | raw[pos + 2] << 16
            kind = block >> 1 & 3
            if kind == 3:
                raise DecompressionError("reserved zstd block type")
            pos += 3 + (1 if kind == 1 else block >> 3)
            if block & 1:
                break
        pos += 4 if descriptor & 4 else 0  # content checksum
    if pos > end:
        raise DecompressionError("truncated zstd frame")
