"""Record batch v2 codec: round trips, Kafka's decoding rules, corruption and truncation detection, fuzzing."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logway.wire import compression
from logway.wire.batch import (
    BATCH_HEADER_SIZE,
    CRC_POS,
    CorruptBatch,
    UnsupportedMagic,
    validate_batch,
)
from logway.wire.compression import DecompressedTooLarge
from logway.wire.records import (
    NO_TIMESTAMP,
    ControlType,
    Header,
    NewRecord,
    Record,
    build_batch,
    build_end_txn_marker,
    control_type,
    decode_batch,
    decode_batches,
)

INT64 = st.integers(-(2**63), 2**63 - 1)
CODECS = st.sampled_from(sorted(compression.CODEC_BY_CODE))
blobs = st.none() | st.binary(max_size=40)
headers = st.lists(st.tuples(st.text(max_size=8), blobs), max_size=3)
new_records = st.builds(NewRecord, key=blobs, value=blobs, headers=headers, timestamp=INT64)
batches = st.lists(new_records, max_size=25)
ROUND_TRIP = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def expected(records: list[NewRecord], base_offset: int) -> list[Record]:
    return [
        Record(base_offset + i, r.timestamp, r.key, r.value, tuple(Header(k, v) for k, v in r.headers))
        for i, r in enumerate(records)
    ]


@ROUND_TRIP
@given(records=batches, codec=CODECS, base_offset=st.integers(0, 2**62))
def test_build_then_decode_gives_back_the_records(records: list[NewRecord], codec: int, base_offset: int) -> None:
    raw = build_batch(records, compression=codec, base_offset=base_offset)
    header = validate_batch(raw)  # what the produce path checks
    assert header.size == len(raw)
    decoded = decode_batch(raw)
    assert decoded.records == expected(records, base_offset)
    assert header.records_count == len(records)
    if records:
        assert header.compression == codec
        assert header.last_offset_delta == len(records) - 1
        assert header.base_timestamp == records[0].timestamp
        # Java's MemoryRecordsBuilder starts maxTimestamp at NO_TIMESTAMP.
        assert header.max_timestamp == max([NO_TIMESTAMP] + [r.timestamp for r in records])


@pytest.mark.parametrize("codec", sorted(compression.CODEC_BY_CODE))
def test_many_records_round_trip(codec: int) -> None:
    records = [(b"key-%d" % i, b"value-%d" % (i * i) * (i % 7), [("i", str(i).encode())]) for i in range(5000)]
    decoded = decode_batch(build_batch(records, compression=codec, base_timestamp=1_700_000_000_000))
    assert [(r.offset, r.key, r.value, r.headers) for r in decoded.records] == [
        (i, k, v, (Header(*hs[0]),)) for i, (k, v, hs) in enumerate(records)
    ]
    assert {r.timestamp for r in decoded.records} == {1_700_000_000_000}


@settings(max_examples=25, deadline=None)
@given(records=st.lists(new_records, min_size=1, max_size=6), codec=CODECS, data=st.data())
def test_any_single_byte_change_after_the_crc_field_is_detected(records, codec, data) -> None:
    raw = bytearray(build_batch(records, compression=codec))
    pos = data.draw(st.integers(CRC_POS, len(raw) - 1), label="pos")
    raw[pos] ^= data.draw(st.integers(1, 255), label="xor")
    with pytest.raises(CorruptBatch):
        decode_batch(raw)


@settings(max_examples=15, deadline=None)
@given(records=st.lists(new_records, max_size=5), codec=CODECS)
def test_truncation_at_every_position_raises_corrupt_batch(records, codec) -> None:
    raw = build_batch(records, compression=codec)
    for cut in range(len(raw)):
        with pytest.raises(CorruptBatch):
            decode_batch(raw[:cut])


def _with_valid_crc(payload: bytes, count: int, attributes: int = 0) -> bytes:
    """A batch header around arbitrary record bytes, CRC correct, so only the record parser can object."""
    header = struct.pack(
        ">qiibIhiqqqhii", 0, BATCH_HEADER_SIZE - 12 + len(payload), -1, 2, 0, attributes, max(count - 1, 0), 0, 0,
        -1, -1, -1, count,
    )  # fmt: skip
    crc = crc32c.crc32c(payload, crc32c.crc32c(header[21:]))
    return header[:CRC_POS] + struct.pack(">I", crc) + header[21:] + payload


@settings(max_examples=300, deadline=None)
@given(payload=st.binary(max_size=120), count=st.integers(0, 8))
def test_random_record_bytes_only_raise_corrupt_batch(payload: bytes, count: int) -> None:
    try:
        decoded = decode_batch(_with_valid_crc(payload, count))
    except CorruptBatch:
        return
    assert len(decoded.records) == count


@settings(max_examples=200, deadline=None)
@given(records=st.lists(new_records, min_size=1, max_size=4), data=st.data())
def test_mutated_records_with_fixed_crc_only_raise_corrupt_batch(records, data) -> None:
    # Damage real record bytes but keep the CRC right: the parser's own checks must catch it.
    body = bytearray(build_batch(records)[BATCH_HEADER_SIZE:])
    for _ in range(data.draw(st.integers(1, 3))):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(body)))
    try:
        decode_batch(_with_valid_crc(bytes(body[:cut]), len(records)))
    except CorruptBatch:
        pass


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=150), verify_crc=st.booleans())
def test_random_bytes_only_raise_corrupt_batch(raw: bytes, verify_crc: bool) -> None:
    for parse in (lambda: decode_batch(raw, verify_crc=verify_crc), lambda: list(decode_batches(raw))):
        try:
            parse()
        except CorruptBatch:
            pass


@settings(max_examples=100, deadline=None)
@given(codec=st.sampled_from([1, 2, 3, 4, 5, 6, 7]), payload=st.binary(max_size=80), count=st.integers(0, 3))
def test_random_compressed_payload_only_raises_corrupt_batch(codec: int, payload: bytes, count: int) -> None:
    try:
        decode_batch(_with_valid_crc(payload, count, attributes=codec))
    except CorruptBatch:
        pass


def test_unknown_codec_in_attributes_is_corrupt() -> None:
    with pytest.raises(CorruptBatch, match="codec 6"):
        decode_batch(_with_valid_crc(b"", 0, attributes=6))


def test_record_count_must_match_the_record_bytes() -> None:
    body = build_batch([(b"a", b"1", []), (b"b", b"2", [])])[BATCH_HEADER_SIZE:]
    assert len(decode_batch(_with_valid_crc(body, 2)).records) == 2
    with pytest.raises(CorruptBatch, match="left after"):
        decode_batch(_with_valid_crc(body, 1))
    with pytest.raises(CorruptBatch):
        decode_batch(_with_valid_crc(body, 3))
    with pytest.raises(CorruptBatch):
        decode_batch(_with_valid_crc(body, 2**31 - 1))


def test_decompressed_size_is_bounded() -> None:
    raw = build_batch([(None, bytes(2_000_000), [])], compression=compression.ZSTD)
    assert len(decode_batch(raw).records[0].value) == 2_000_000
    with pytest.raises(DecompressedTooLarge):
        decode_batch(raw, max_size=1_000_000)


def test_log_append_time_batch_gives_every_record_the_append_time() -> None:
    records = [NewRecord(None, b"v%d" % i, (), 1000 + i) for i in range(3)]
    raw = build_batch(records, log_append_time=True, max_timestamp=5000)
    decoded = decode_batch(raw)
    assert decoded.header.log_append_time
    assert [r.timestamp for r in decoded.records] == [5000, 5000, 5000]
    assert decoded.header.base_timestamp == 1000  # record deltas kept, as Kafka's LogValidator leaves them


def test_offsets_and_timestamps_are_absolute() -> None:
    raw = build_batch([(b"k", b"v", [])] * 3, base_offset=41, base_timestamp=1_700_000_000_000)
    decoded = decode_batch(raw)
    assert [(r.offset, r.timestamp) for r in decoded.records] == [(o, 1_700_000_000_000) for o in (41, 42, 43)]
    assert decoded.header.last_offset == 43


def test_records_without_timestamps_get_no_timestamp() -> None:
    decoded = decode_batch(build_batch([(b"k", b"v", [])]))
    assert decoded.records[0].timestamp == NO_TIMESTAMP
    assert decoded.header.max_timestamp == NO_TIMESTAMP


def test_rebuilding_kept_records_preserves_offsets_like_compaction() -> None:
    original = decode_batch(build_batch([(b"k%d" % (i % 3), b"v%d" % i, []) for i in range(10)], base_offset=100))
    kept = [r for r in original.records if r.offset in (103, 105, 107)]
    raw = build_batch(
        kept, base_offset=original.header.base_offset, last_offset_delta=original.header.last_offset_delta
    )
    rebuilt = decode_batch(raw)
    assert rebuilt.records == kept
    assert rebuilt.header.last_offset == original.header.last_offset == 109
    assert rebuilt.header.records_count == 3


def test_empty_batch_keeps_producer_state_and_offsets() -> None:
    raw = build_batch(
        [], base_offset=2000, last_offset_delta=9, max_timestamp=777, producer_id=5, producer_epoch=1, base_sequence=10
    )
    decoded = decode_batch(raw)
    assert decoded.records == []
    h = decoded.header
    assert (h.base_offset, h.last_offset, h.records_count, h.max_timestamp) == (2000, 2009, 0, 777)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (5, 1, 10, 19)


def test_header_fields_are_written() -> None:
    raw = build_batch(
        [(b"k", b"v", [])] * 2,
        compression=compression.LZ4,
        producer_id=77,
        producer_epoch=3,
        base_sequence=2**31 - 1,
        is_transactional=True,
        partition_leader_epoch=12,
    )
    h = validate_batch(raw)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.partition_leader_epoch) == (77, 3, 2**31 - 1, 12)
    assert h.is_transactional and not h.is_control and h.compression == compression.LZ4
    assert h.last_sequence == 0  # wraps at Int32.MAX_VALUE


def test_control_batches_decode_and_name_their_type() -> None:
    commit = decode_batch(
        build_end_txn_marker(ControlType.COMMIT, producer_id=9, producer_epoch=2, coordinator_epoch=4, timestamp=10)
    )
    abort = decode_batch(
        build_end_txn_marker(ControlType.ABORT, producer_id=9, producer_epoch=2, coordinator_epoch=4, timestamp=10)
    )
    assert commit.header.is_control and commit.header.is_transactional
    assert control_type(commit.records[0]) == ControlType.COMMIT
    assert control_type(abort.records[0]) == ControlType.ABORT
    assert commit.records[0].value == struct.pack(">hi", 0, 4)
    with pytest.raises(CorruptBatch):
        control_type(Record(0, 0, b"\x00", None, ()))


def test_invalid_utf8_header_key_decodes_like_java() -> None:
    # Java's new String(bytes, UTF_8) replaces malformed bytes with U+FFFD; so do we.
    body = bytes([0, 0, 0, 2]) + b"k" + bytes([2]) + b"v" + bytes([2, 2, 0xFF, 2]) + b"x"
    record = bytes([len(body) * 2]) + body
    decoded = decode_batch(_with_valid_crc(record, 1))
    assert decoded.records[0].headers == (Header("\ufffd", b"x"),)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(is_transactional=True),  # no producer id
        dict(producer_id=1, producer_epoch=-1, base_sequence=0),
        dict(producer_id=1, producer_epoch=0, base_sequence=-1),
        dict(producer_epoch=40000),
        dict(compression=9),
        dict(last_offset_delta=0),
    ],
)
def test_bad_arguments_raise_value_error(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        build_batch([(b"k", b"v", []), (b"k", b"v", [])], **kwargs)


def test_offsets_must_increase() -> None:
    with pytest.raises(ValueError, match="increase"):
        build_batch([NewRecord(b"k", b"v", offset_delta=3), NewRecord(b"k", b"v", offset_delta=3)])
    gaps = build_batch([NewRecord(b"a", None, offset_delta=2), NewRecord(b"b", None)])
    assert [r.offset for r in decode_batch(gaps).records] == [2, 3]


def test_decode_batches_stops_at_a_trailing_partial_batch() -> None:
    first = build_batch([(b"a", b"1", [])], base_offset=0)
    second = build_batch([(b"b", b"2", [])] * 2, base_offset=1, compression=compression.GZIP)
    third = build_batch([(b"c", b"3", [])], base_offset=3)
    whole = first + second + third
    assert [r.offset for b in decode_batches(whole) for r in b.records] == [0, 1, 2, 3]
    for cut in range(len(first + second), len(whole)):
        assert [b.header.base_offset for b in decode_batches(whole[:cut])] == [0, 1]
    assert list(decode_batches(b"")) == []


def test_decode_batches_raises_on_a_corrupt_whole_batch() -> None:
    damaged = bytearray(build_batch([(b"a", b"1", [])]))
    damaged[damaged.rindex(b"1")] = ord("X")  # the value byte
    with pytest.raises(CorruptBatch, match="CRC"):
        list(decode_batches(bytes(damaged) + build_batch([(b"b", b"2", [])])))
    assert [b.records[0].value for b in decode_batches(bytes(damaged), verify_crc=False)] == [b"X"]


def test_legacy_magic_is_refused_by_the_v2_decoder() -> None:
    legacy = bytearray(build_batch([(b"a", b"1", [])]))
    legacy[16] = 1
    with pytest.raises(UnsupportedMagic):
        decode_batch(legacy)
    with pytest.raises(UnsupportedMagic):
        list(decode_batches(legacy))


def test_decode_at_a_position_in_a_larger_buffer() -> None:
    first = build_batch([(b"a", b"1", [])])
    second = build_batch([(b"b", b"2", [])], base_offset=1)
    buf = memoryview(first + second)
    assert decode_batch(buf, len(first)).records[0].key == b"b"
