"""Legacy message sets (magic 0 and 1) from kafka-python's builder: plain, compressed wrappers, damage."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from logway.wire import compression
from logway.wire.batch import CorruptBatch
from logway.wire.records import NO_TIMESTAMP, Record, build_batch, decode_legacy

# kafka-python writes lz4 for magic 0 with Kafka 0.8's broken frame checksum, which we do not read.
FORMATS = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (1, 3)]
blobs = st.none() | st.binary(max_size=30)
messages = st.lists(st.tuples(blobs, st.binary(max_size=30), st.integers(0, 2**62)), min_size=1, max_size=12)


def legacy_set(magic: int, codec: int, items, base_offset: int = 0) -> bytes:
    builder = LegacyRecordBatchBuilder(magic, codec, 2**30)
    for i, (key, value, timestamp) in enumerate(items):
        builder.append(base_offset + i, timestamp, key, value)
    return bytes(builder.build())


@settings(max_examples=40, deadline=None)
@given(fmt=st.sampled_from(FORMATS), items=messages)
def test_decode_legacy_gives_back_the_messages(fmt: tuple[int, int], items) -> None:
    magic, codec = fmt
    got = list(decode_legacy(legacy_set(magic, codec, items)))
    want = [Record(i, ts if magic == 1 else NO_TIMESTAMP, k, v, ()) for i, (k, v, ts) in enumerate(items)]
    assert got == want


@pytest.mark.parametrize("codec", [1, 2, 3])
def test_v1_compressed_sets_use_the_wrapper_offset(codec: int) -> None:
    # kafka-python, like the Java producer, writes inner offsets 0..n-1 relative to the wrapper;
    # the broker stamps the wrapper with the absolute offset of the last inner message.
    raw = bytearray(legacy_set(1, codec, [(None, b"v%d" % i, 5) for i in range(4)]))
    struct.pack_into(">q", raw, 0, 503)
    assert [r.offset for r in decode_legacy(raw)] == [500, 501, 502, 503]


def test_v1_log_append_time_wrapper_sets_every_timestamp() -> None:
    raw = bytearray(legacy_set(1, compression.GZIP, [(None, b"a", 1), (None, b"b", 2)]))
    raw[17] |= 0x08  # wrapper attributes: LogAppendTime
    struct.pack_into(">q", raw, 18, 99_999)  # wrapper timestamp
    struct.pack_into(">I", raw, 12, zlib.crc32(bytes(raw[16:])))
    assert [r.timestamp for r in decode_legacy(raw)] == [99_999, 99_999]


def test_trailing_partial_message_is_ignored() -> None:
    first = legacy_set(1, 0, [(b"k", b"one", 1)])
    second = legacy_set(1, 0, [(b"k", b"two", 2)], base_offset=1)
    for cut in range(len(first), len(first + second)):
        assert [r.value for r in decode_legacy((first + second)[:cut])] == [b"one"]


@pytest.mark.parametrize(("magic", "codec"), FORMATS)
def test_any_byte_change_after_the_crc_is_detected(magic: int, codec: int) -> None:
    raw = legacy_set(magic, codec, [(b"key", b"value" * 10, 7)] * 3)
    size = struct.unpack_from(">i", raw, 8)[0]
    for pos in range(16, 12 + size):
        damaged = bytearray(raw)
        damaged[pos] ^= 0x41
        with pytest.raises(CorruptBatch):
            list(decode_legacy(damaged))


def _message(magic: int, attributes: int, key: bytes | None, value: bytes | None, offset: int = 0) -> bytes:
    body = struct.pack(">bb", magic, attributes) + (struct.pack(">q", 0) if magic == 1 else b"")
    for blob in (key, value):
        body += struct.pack(">i", -1) if blob is None else struct.pack(">i", len(blob)) + blob
    body = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(body)) + body


def test_inner_messages_must_not_be_compressed() -> None:
    nested = _message(1, compression.GZIP, None, compression.compress(compression.GZIP, _message(1, 0, None, b"x")))
    with pytest.raises(CorruptBatch, match="must not be compressed"):
        list(decode_legacy(_message(1, compression.GZIP, None, compression.compress(compression.GZIP, nested))))


def test_inner_magic_must_match_the_wrapper() -> None:
    inner = _message(0, 0, None, b"x")
    with pytest.raises(CorruptBatch, match="magic"):
        list(decode_legacy(_message(1, compression.GZIP, None, compression.compress(compression.GZIP, inner))))


@pytest.mark.parametrize(
    "raw",
    [
        _message(1, compression.GZIP, None, None),  # compressed wrapper without a value
        _message(1, compression.GZIP, None, compression.compress(compression.GZIP, b"")),  # no inner messages
        _message(1, compression.ZSTD, None, b"x"),  # zstd never existed for magic 0/1
        _message(2, 0, None, b"x"),
        build_batch([(b"k", b"v", [])]),  # a v2 batch is no legacy message set
    ],
)
def test_invalid_message_sets_are_corrupt(raw: bytes) -> None:
    with pytest.raises(CorruptBatch):
        list(decode_legacy(raw))


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=120), fix_crc=st.booleans())
def test_random_bytes_only_raise_corrupt_batch(raw: bytes, fix_crc: bool) -> None:
    if fix_crc and len(raw) >= 17:  # make the first message's CRC right so the field parser is reached
        body = raw[16:]
        raw = raw[:12] + struct.pack(">I", zlib.crc32(body)) + body
    try:
        list(decode_legacy(raw))
    except CorruptBatch:
        pass
