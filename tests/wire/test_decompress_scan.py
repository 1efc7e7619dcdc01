"""Compressed batches validated in one C call (wire/_decompress_scan.c) agree with the Python path (wire/compression.py
decompressing, then the record walk) on every batch: real ones, mutated ones, truncated ones, ones that expand too far."""

from __future__ import annotations

import os
import tracemalloc

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logway.wire import compression
from logway.wire.batch import BATCH_HEADER_SIZE, CorruptBatch, parse_header
from logway.wire.batch_validation import has_native_decompression, scan_compressed, scan_records_py, validate_records
from logway.wire.compression import DecompressedTooLarge
from logway.wire.records import NO_TIMESTAMP, NewRecord, build_batch

pytestmark = pytest.mark.skipif(not has_native_decompression(), reason="wire/_decompress_scan.c was not built")

NATIVE = sorted(compression.native.CODECS) if compression.native else []  # snappy: when libsnappy.so.1 loads
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
INT64 = st.integers(-(2**63), 2**63 - 1)
blobs = st.none() | st.binary(max_size=60)
new_records = st.builds(NewRecord, key=blobs, value=blobs, headers=st.lists(st.tuples(st.text(max_size=6), blobs),
                                                                           max_size=2),
                        timestamp=st.one_of(INT64, st.just(NO_TIMESTAMP)))


def _native(codec: int, data: bytes, count: int, base: int, max_size: int):
    try:
        return scan_compressed(codec, data, count, base, max_size)
    except DecompressedTooLarge:
        return "too large"
    except CorruptBatch:
        return "corrupt"


def _python(codec: int, data: bytes, count: int, base: int, max_size: int):
    try:
        return scan_records_py(compression.decompress_py(codec, data, max_size), count, base)
    except DecompressedTooLarge:
        return "too large"
    except CorruptBatch:
        return "corrupt"


# python-zstandard bundles its own zstd (1.5.7 when written), newer than Debian's libzstd (1.5.4), and a newer zstd
# finds corruption in some damaged frames an older one decodes to other bytes. Both answers are zstd's own; inside
# the broker every zstd batch goes through the one libzstd of wire/_decompress_scan.c.
ZSTD_SKEW = compression.native is not None and (
    compression.native.LIBRARY_VERSIONS["zstd"] != ".".join(map(str, zstandard.ZSTD_VERSION)))


def _agree(codec: int, data: bytes | bytearray, count: int, base: int = 0, max_size: int = 1 << 20):
    """The two paths give the same summary, the same record error, or both refuse the data (naming why alike)."""
    native = _native(codec, bytes(data), count, base, max_size)
    python = _python(codec, bytes(data), count, base, max_size)
    if codec == compression.ZSTD and ZSTD_SKEW and python == "corrupt" and native != python:
        return native
    assert native == python, (codec, bytes(data).hex(), count, base)
    return native


def _mutate(raw: bytearray, data) -> None:
    kind = data.draw(st.sampled_from(["flip", "cut", "insert"]), label="kind")
    if kind == "flip" and raw:
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    elif kind == "cut":
        del raw[data.draw(st.integers(0, len(raw))) :]
    elif kind == "insert":
        at = data.draw(st.integers(0, len(raw)))
        raw[at:at] = data.draw(st.binary(min_size=1, max_size=6))


@PROPERTY
@given(records=st.lists(new_records, min_size=1, max_size=12), codec=st.sampled_from(NATIVE), data=st.data())
def test_native_and_python_agree_on_valid_and_mutated_compressed_data(records, codec, data) -> None:
    raw = build_batch(records, compression=codec)
    header = parse_header(raw)
    body = bytearray(raw[BATCH_HEADER_SIZE:])
    summary = _agree(codec, body, header.records_count, header.base_timestamp)
    assert summary[0] is None
    for _ in range(data.draw(st.integers(1, 4), label="mutations")):
        _mutate(body, data)
        _agree(codec, body, header.records_count, header.base_timestamp)


@PROPERTY
@given(records=st.lists(new_records, min_size=1, max_size=12), codec=st.sampled_from(NATIVE), data=st.data())
def test_native_and_python_agree_on_compressed_records_that_lie(records, codec, data) -> None:
    """Records mutated before compression: the data decompresses, and the walk finds (or not) the same lie."""
    raw = build_batch(records)
    inner = bytearray(raw[BATCH_HEADER_SIZE:])
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        _mutate(inner, data)
    count = data.draw(st.integers(0, len(records) + 2), label="count")
    _agree(codec, compression.compress(codec, inner), count, data.draw(INT64, label="base"))


@pytest.mark.parametrize("codec", NATIVE)
def test_native_and_python_agree_on_every_truncation(codec: int) -> None:
    raw = build_batch([(b"k%d" % i, os.urandom(40) + bytes(40), ()) for i in range(20)], compression=codec)
    body = raw[BATCH_HEADER_SIZE:]
    outcomes = {repr(_agree(codec, body[:cut], 20)) for cut in range(len(body))}
    assert "'corrupt'" in outcomes  # the cut frames are refused, not read as fewer records


@pytest.mark.parametrize("codec", NATIVE)
@pytest.mark.parametrize("tail", [b"", b"\x00", b"garbage!", b"\x1f\x8b", b"\x28\xb5\x2f\xfd"])
def test_native_and_python_agree_on_bytes_after_the_compressed_data(codec: int, tail: bytes) -> None:
    raw = build_batch([(None, b"value %d" % i, ()) for i in range(5)], compression=codec)
    _agree(codec, raw[BATCH_HEADER_SIZE:] + tail, 5)


@pytest.mark.parametrize("codec", [compression.GZIP, compression.LZ4, compression.ZSTD])
def test_concatenated_frames_or_members_read_as_one_stream_in_both(codec: int) -> None:
    inner = build_batch([(None, b"value %d" % i, ()) for i in range(6)])[BATCH_HEADER_SIZE:]
    first, second = _record_split(inner, 3)
    data = compression.compress(codec, first) + compression.compress(codec, second)
    result = _agree(codec, data, 6)
    # gzip members and zstd frames follow one another (GZIPInputStream, zstd-jni); an LZ4 frame ends the data.
    assert (result[0] is None) == (codec != compression.LZ4)


def _record_split(inner: bytes, records: int) -> tuple[bytes, bytes]:
    """Record data cut after its first ``records`` records (each starts with its length varint)."""
    pos = 0
    for _ in range(records):
        length, size = _varint(inner, pos)
        pos += size + length
    return inner[:pos], inner[pos:]


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    raw = shift = 0
    for i in range(5):
        byte = data[pos + i]
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (raw >> 1) ^ -(raw & 1), i + 1
        shift += 7
    raise ValueError


@pytest.mark.parametrize("codec", NATIVE)
def test_a_batch_that_expands_past_the_limit_is_refused_by_both(codec: int) -> None:
    raw = build_batch([(None, bytes(1000), ())] * 100, compression=codec)  # 100 KB of zeros: a few hundred bytes
    body = raw[BATCH_HEADER_SIZE:]
    size = len(compression.decompress(codec, body))
    assert _agree(codec, body, 100, max_size=size)[0] is None
    assert _agree(codec, body, 100, max_size=size - 1) == "too large"
    assert _agree(codec, body, 100, max_size=0) == "too large"


@pytest.mark.parametrize("codec", NATIVE)
def test_batches_larger_than_the_kept_buffer_then_small_ones_read_right(codec: int) -> None:
    """The buffer grows past what it keeps between calls (8 MiB), is let go, and serves the next batches."""
    for count, size in ((12, 1 << 20), (3, 100), (300, 1 << 10), (1, 10)):
        records = [NewRecord(key=None, value=os.urandom(size // 2) + bytes(size - size // 2), headers=[],
                             timestamp=1_700_000_000_000 + i) for i in range(count)]
        raw = build_batch(records, compression=codec)
        summary = validate_records(raw, 0, parse_header(raw), max_size=64 << 20)
        assert (summary.min_timestamp, summary.max_timestamp, summary.null_keys) == (
            1_700_000_000_000, 1_700_000_000_000 + count - 1, count)


def test_a_bomb_is_refused_at_the_limit() -> None:
    """200 MB of zeros in a few KB (zstd; gzip: 100 MB in 100 KB): refused once 64 MiB have come out, as in Python."""
    data = compression.compress(compression.ZSTD, bytes(200 << 20))
    assert len(data) < 64 << 10
    assert _agree(compression.ZSTD, data, 1, max_size=compression.DEFAULT_MAX_SIZE) == "too large"
    gzip_bomb = compression.compress(compression.GZIP, bytes(100 << 20))
    assert _agree(compression.GZIP, gzip_bomb, 1, max_size=compression.DEFAULT_MAX_SIZE) == "too large"


def test_unknown_codec_and_bad_arguments_are_refused() -> None:
    decompress_scan = compression.native.decompress_scan
    with pytest.raises(ValueError):
        decompress_scan(5, b"", 0, 0, 10)
    with pytest.raises(ValueError):
        decompress_scan(compression.LZ4, b"", 0, 0, -1)
    with pytest.raises(TypeError):
        decompress_scan(compression.LZ4, "text", 0, 0, 10)


@pytest.mark.parametrize("codec", NATIVE)
def test_the_buffer_of_a_large_batch_is_let_go(codec: int) -> None:
    """20 MiB of records (compressed small) need a 32 MiB buffer; once checked it is freed, not kept (8 MiB at most)."""
    raw = build_batch([(None, bytes(1 << 20), ())] * 20, compression=codec)
    header = parse_header(raw)
    tracemalloc.start()
    try:
        validate_records(raw, 0, header, max_size=64 << 20)
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak >= 20 << 20  # the decompressed records were there (the buffer is traced memory)
    assert kept < 1 << 20
