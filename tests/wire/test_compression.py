"""Compression codecs: round trips, the stream formats Kafka's Java client writes, bounded and safe decoding."""

from __future__ import annotations

import gzip
import os
import struct
import zlib

import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import codec as kafka_python_codec

from logway.wire import compression
from logway.wire.batch import CorruptBatch
from logway.wire.compression import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    DecompressedTooLarge,
    DecompressionError,
    codec_for_compression_type,
    compress,
    decompress,
)


@pytest.fixture(autouse=True, params=["native", "python"])
def decoders(request, monkeypatch) -> str:
    """Every test decodes with wire/_decompress_scan.c (when built) and with the Python bindings it stands in for."""
    if request.param == "native" and compression.native is None:
        pytest.skip("wire/_decompress_scan.c was not built")
    if request.param == "python":
        monkeypatch.setattr(compression, "native", None)
    return request.param


CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
COMPRESSING = [GZIP, SNAPPY, LZ4, ZSTD]
# Larger than lz4's 64 KiB and snappy's 32 KiB blocks, part incompressible.
MULTI_BLOCK = os.urandom(50_000) + b"kafka" * 40_000 + os.urandom(30_000)


@settings(max_examples=40, deadline=None)
@given(codec=st.sampled_from(CODECS), data=st.binary(max_size=3000))
def test_round_trip(codec: int, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_across_blocks(codec: int) -> None:
    assert decompress(codec, compress(codec, MULTI_BLOCK)) == MULTI_BLOCK
    assert decompress(codec, memoryview(compress(codec, MULTI_BLOCK))) == MULTI_BLOCK


def test_gzip_header_is_javas() -> None:
    # GZIPOutputStream: no mtime, no flags, XFL 0, OS 255 (JDK 16+); level 6.
    out = compress(GZIP, b"hello kafka" * 100)
    assert out[:10] == bytes.fromhex("1f8b08000000000000ff")
    assert out[10:-8] == _raw_deflate(b"hello kafka" * 100, 6)


def _raw_deflate(data: bytes, level: int) -> bytes:
    deflater = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    return deflater.compress(data) + deflater.flush()


def test_snappy_uses_xerial_framing_in_32k_blocks() -> None:
    out = compress(SNAPPY, MULTI_BLOCK)
    assert out[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, blocks = 16, []
    while pos < len(out):
        (size,) = struct.unpack_from(">i", out, pos)
        blocks.append(snappy.decompress(out[pos + 4 : pos + 4 + size]))
        pos += 4 + size
    assert [len(b) for b in blocks[:-1]] == [32 * 1024] * (len(blocks) - 1)
    assert b"".join(blocks) == MULTI_BLOCK


def test_lz4_frame_is_kafkas_lz4_block_output_stream() -> None:
    out = compress(LZ4, MULTI_BLOCK)
    # Magic, FLG 0x60 (version 1, independent blocks, no checksums, no size), BD 0x40 (64 KiB blocks).
    assert out[:6] == bytes.fromhex("04224d186040")
    info = lz4.frame.get_frame_info(out)
    assert info["content_size"] == 0 and not info["content_checksum"] and not info["block_linked"]
    assert out[-4:] == b"\x00\x00\x00\x00"  # end mark, no content checksum after it


def test_zstd_frame_has_no_content_size() -> None:
    out = compress(ZSTD, MULTI_BLOCK)
    params = zstandard.get_frame_parameters(out)
    assert params.content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert not params.has_checksum


def test_snappy_reads_raw_blocks_too() -> None:
    assert (
        decompress(SNAPPY, snappy.compress(b"raw snappy from a non-java client"))
        == b"raw snappy from a non-java client"
    )


@pytest.mark.parametrize(
    ("codec", "writer"),
    [
        (GZIP, lambda d: gzip.compress(d[:1000]) + gzip.compress(d[1000:])),  # two members
        (GZIP, kafka_python_codec.gzip_encode),
        (GZIP, lambda d: gzip.compress(d) + b"\x00\x00junk"),  # GZIPInputStream ignores a non-gzip tail
        (SNAPPY, kafka_python_codec.snappy_encode),
        (LZ4, lambda d: lz4.frame.compress(d, store_size=True, content_checksum=True, block_checksum=True)),
        (LZ4, lambda d: lz4.frame.compress(d, block_size=lz4.frame.BLOCKSIZE_MAX4MB, block_linked=True)),
        (LZ4, lambda d: compress(LZ4, d) + compress(LZ4, b"a second frame")),  # Lz4BlockInputStream stops at the end mark
        (LZ4, lambda d: compress(LZ4, d) + b"junk"),
        (ZSTD, lambda d: zstandard.ZstdCompressor(write_checksum=True).compress(d)),
        (ZSTD, lambda d: zstandard.ZstdCompressor().compress(d[:1000]) + zstandard.ZstdCompressor().compress(d[1000:])),
    ],
)
def test_reads_other_writers_variants(codec: int, writer) -> None:
    assert decompress(codec, writer(MULTI_BLOCK)) == MULTI_BLOCK


@pytest.mark.parametrize("codec", COMPRESSING)
def test_output_limit_stops_a_decompression_bomb(codec: int) -> None:
    bomb = compress(codec, bytes(8 * 1024 * 1024))
    assert len(bomb) < 400_000
    with pytest.raises(DecompressedTooLarge):
        decompress(codec, bomb, max_size=1024 * 1024)


@pytest.mark.parametrize("codec", CODECS)
def test_output_limit_is_inclusive(codec: int) -> None:
    data = b"0123456789" * 1000
    assert decompress(codec, compress(codec, data), max_size=len(data)) == data
    with pytest.raises(DecompressedTooLarge):
        decompress(codec, compress(codec, data), max_size=len(data) - 1)


def test_errors_are_corrupt_batch() -> None:
    # The broker turns CorruptBatch into CORRUPT_MESSAGE; both errors must be catchable as such.
    assert issubclass(DecompressionError, CorruptBatch)
    assert issubclass(DecompressedTooLarge, DecompressionError)


@pytest.mark.parametrize("codec", [GZIP, LZ4, ZSTD])
def test_every_truncation_is_detected(codec: int) -> None:
    # snappy is left out: xerial framing has no end mark, so a cut at a block boundary is valid framing.
    data = os.urandom(3000) * 3
    whole = compress(codec, data)
    for cut in range(len(whole)):
        with pytest.raises(DecompressionError):
            decompress(codec, whole[:cut])


@pytest.mark.parametrize("codec", COMPRESSING)
def test_truncated_or_garbage_input_raises_decompression_error(codec: int) -> None:
    whole = compress(codec, os.urandom(3000) * 3)
    with pytest.raises(DecompressionError):
        decompress(codec, whole[: len(whole) - 7])
    with pytest.raises(DecompressionError):
        decompress(codec, b"\x00garbage that is no stream at all")


@settings(max_examples=150, deadline=None)
@given(codec=st.sampled_from(COMPRESSING), data=st.binary(max_size=200), prefix=st.booleans())
def test_random_bytes_only_raise_decompression_error(codec: int, data: bytes, prefix: bool) -> None:
    # With prefix, the bytes start like a real stream so the fuzzing reaches past the magic checks.
    if prefix:
        data = compress(codec, b"some kafka records")[:12] + data
    try:
        decompress(codec, data, max_size=1 << 20)
    except DecompressionError:
        pass


@pytest.mark.parametrize("codec", [5, 6, 7, -1])
def test_unknown_codec_is_value_error(codec: int) -> None:
    with pytest.raises(ValueError):
        compress(codec, b"x")
    with pytest.raises(ValueError):
        decompress(codec, b"x")


def test_codec_names_are_kafkas() -> None:
    assert compression.CODEC_NAMES == {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
    assert codec_for_compression_type("producer") is None
    assert codec_for_compression_type("uncompressed") == NONE
    assert codec_for_compression_type("none") == NONE
    assert codec_for_compression_type("ZSTD") == ZSTD
    assert codec_for_compression_type("lz4") == LZ4
    with pytest.raises(ValueError):
        codec_for_compression_type("brotli")
