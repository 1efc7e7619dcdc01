"""Record-level batch validation (wire/batch_validation.py): real batches pass, each lie is caught, C agrees with Python."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logway.wire import batch_validation, compression
from logway.wire.batch import (
    ATTRIBUTES_POS,
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    LAST_OFFSET_DELTA_POS,
    LENGTH_POS,
    MAGIC_POS,
    RECORDS_COUNT_POS,
    CorruptBatch,
    parse_header,
    validate_batch,
)
from logway.wire.batch_validation import (
    MalformedRecords,
    has_compiled_scanner,
    scan_records_py,
    validate_records,
)
from logway.wire.records import NO_TIMESTAMP, NewRecord, build_batch, decode_batch
from logway.wire.varint import encode_varint

INT64 = st.integers(-(2**63), 2**63 - 1)
TIMESTAMPS = st.one_of(INT64, st.just(NO_TIMESTAMP), st.integers(1_600_000_000_000, 1_800_000_000_000))
CODECS = st.sampled_from(sorted(compression.CODEC_BY_CODE))
blobs = st.none() | st.binary(max_size=40)
headers = st.lists(st.tuples(st.text(max_size=8), blobs), max_size=3)
new_records = st.builds(NewRecord, key=blobs, value=blobs, headers=headers, timestamp=TIMESTAMPS)
PROPERTY = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

compiled = pytest.mark.skipif(not has_compiled_scanner(), reason="the C scanner was not built")


@pytest.fixture(autouse=True, params=["C", "Python"])
def scanner(request, monkeypatch) -> str:
    """Every test runs with the C scanner (when built) and with the Python fallback an install without a compiler uses."""
    if request.param == "C" and not has_compiled_scanner():
        pytest.skip("the C scanner was not built")
    if request.param == "Python":
        monkeypatch.setattr(batch_validation, "_scan_records_c", None)
        monkeypatch.setattr(batch_validation, "_check_batch_c", None)
        monkeypatch.setattr(compression, "native", None)
    return request.param


def _validate(raw: bytes | bytearray):
    return validate_records(raw, 0, parse_header(raw))


def _set(raw: bytes, struct_format: str, pos: int, value: int) -> bytearray:
    out = bytearray(raw)
    struct.pack_into(struct_format, out, pos, value)
    return out


def _with_records(records_data: bytes, count: int, attributes: int = 0) -> bytearray:
    """A batch header (count, lastOffsetDelta = count - 1 consistent) around hand-made record bytes."""
    batch = bytearray(build_batch([(None, b"v", ())]))[:BATCH_HEADER_SIZE] + records_data
    struct.pack_into(">i", batch, LENGTH_POS, len(batch) - 12)
    struct.pack_into(">h", batch, ATTRIBUTES_POS, attributes)
    struct.pack_into(">i", batch, LAST_OFFSET_DELTA_POS, count - 1)
    struct.pack_into(">i", batch, RECORDS_COUNT_POS, count)
    return batch


def _record(offset_delta: int, value: bytes = b"v", *, size_fix: int = 0, ts_delta: int = 0) -> bytes:
    body = b"\x00" + encode_varint(ts_delta) + encode_varint(offset_delta) + encode_varint(-1)
    body += encode_varint(len(value)) + value + encode_varint(0)
    return encode_varint(len(body) + size_fix) + body


# -- real batches pass, and the summary is what decoding the records says ---------------------------


@PROPERTY
@given(records=st.lists(new_records, min_size=1, max_size=20), codec=CODECS)
def test_batches_from_the_encoder_are_accepted_with_the_records_timestamps_and_keys(records, codec) -> None:
    raw = build_batch(records, compression=codec)
    summary = _validate(raw)
    decoded = decode_batch(raw).records
    stamped = [r.timestamp for r in decoded if r.timestamp != NO_TIMESTAMP]
    assert summary.min_timestamp == (min(stamped) if stamped else None)
    assert summary.max_timestamp == max([NO_TIMESTAMP, *stamped])
    assert summary.null_keys == sum(r.key is None for r in decoded)


def test_log_append_time_batch_reads_as_its_max_timestamp() -> None:
    raw = build_batch([(b"k", b"v", ())] * 3, log_append_time=True, max_timestamp=1_700_000_000_123)
    summary = _validate(raw)
    assert (summary.min_timestamp, summary.max_timestamp) == (1_700_000_000_123, 1_700_000_000_123)


# -- each lie is rejected with the error Kafka gives it ---------------------------------------------


@pytest.mark.parametrize("codec", sorted(compression.CODEC_BY_CODE))
@pytest.mark.parametrize("claimed", [1, 3, 5])
def test_record_count_that_lies_is_invalid_record(codec: int, claimed: int) -> None:
    raw = build_batch([(None, b"value-%d" % i, ()) for i in range(4)], compression=codec)
    lie = _set(_set(raw, ">i", RECORDS_COUNT_POS, claimed), ">i", LAST_OFFSET_DELTA_POS, claimed - 1)
    with pytest.raises(MalformedRecords):
        _validate(lie)


def test_record_length_varint_that_lies_is_invalid_record() -> None:
    for fix in (-1, 1, 50):
        with pytest.raises(MalformedRecords, match="record 1"):
            _validate(_with_records(_record(0) + _record(1, size_fix=fix) + _record(2), 3))


def test_record_length_past_the_batch_is_invalid_record() -> None:
    with pytest.raises(MalformedRecords, match="runs past"):
        _validate(_with_records(_record(0) + encode_varint(1000) + b"\x00" * 5, 2))


def test_trailing_bytes_after_the_last_record_are_invalid_record() -> None:
    with pytest.raises(MalformedRecords, match="bytes left after"):
        _validate(_with_records(_record(0) + _record(1) + b"\x00\x00", 2))


@pytest.mark.parametrize("deltas", [(0, 2), (1, 2), (0, 0), (5, 6)])
def test_inner_offsets_must_be_consecutive_from_zero(deltas) -> None:
    with pytest.raises(MalformedRecords, match="consecutive"):
        _validate(_with_records(b"".join(_record(d) for d in deltas), 2))


def test_negative_header_count_and_header_key_size_are_invalid_record() -> None:
    body = b"\x00\x00\x00" + encode_varint(-1) + encode_varint(-1) + encode_varint(-1)
    with pytest.raises(MalformedRecords, match="headers -1"):
        _validate(_with_records(encode_varint(len(body)) + body, 1))
    body = b"\x00\x00\x00" + encode_varint(-1) + encode_varint(-1) + encode_varint(1) + encode_varint(-2) + b"\x00"
    with pytest.raises(MalformedRecords, match="negative header key size"):
        _validate(_with_records(encode_varint(len(body)) + body, 1))


def test_overlong_varint_is_invalid_record() -> None:
    body = b"\x00" + b"\xff" * 11 + b"\x00" * 5
    with pytest.raises(MalformedRecords, match="varint too long"):
        _validate(_with_records(encode_varint(len(body)) + body, 1))


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec_is_corrupt_message(codec: int) -> None:
    raw = _with_records(_record(0), 1, attributes=codec)
    with pytest.raises(CorruptBatch, match=f"Unknown compression type id: {codec}") as info:
        _validate(raw)
    assert not isinstance(info.value, MalformedRecords)


@pytest.mark.parametrize("codec", sorted(set(compression.CODEC_BY_CODE) - {compression.NONE}))
def test_compression_attribute_over_bytes_that_do_not_decompress_is_corrupt_message(codec: int) -> None:
    raw = _with_records(_record(0) + _record(1), 2, attributes=codec)
    with pytest.raises(CorruptBatch) as info:
        _validate(raw)
    assert not isinstance(info.value, MalformedRecords)


@pytest.mark.parametrize("codec", sorted(set(compression.CODEC_BY_CODE) - {compression.NONE}))
def test_compressed_records_that_lie_are_invalid_record(codec: int) -> None:
    inner = _record(0) + _record(1, size_fix=2) + b"\x00\x00"
    raw = _with_records(compression.compress(codec, inner), 2, attributes=codec)
    with pytest.raises(MalformedRecords, match="record 1"):
        _validate(raw)


# -- the C scanner and the Python loop agree ---------------------------------------------------------


@compiled
@PROPERTY
@given(records=st.lists(new_records, max_size=12), data=st.data())
def test_c_and_python_agree_on_valid_and_mutated_record_data(records, data) -> None:
    from logway.wire._batch_scan import scan_records as scan_c

    raw = bytearray(build_batch(records))
    body = raw[BATCH_HEADER_SIZE:]
    count = len(records)
    base = data.draw(TIMESTAMPS, label="base_timestamp")
    assert scan_c(body, count, base) == scan_records_py(body, count, base)
    for _ in range(data.draw(st.integers(1, 4), label="mutations")):
        if not _mutate(body, data, ["flip", "cut", "insert", "count"]):
            count = data.draw(st.integers(-2, count + 3))
        assert scan_c(bytes(body), count, base) == scan_records_py(body, count, base)


def _mutate(raw: bytearray, data, kinds: list[str]) -> bool:
    """Flip a byte, cut the tail or insert bytes, as drawn from ``kinds``; False for a kind it leaves to the caller."""
    kind = data.draw(st.sampled_from(kinds), label="kind")
    if kind == "flip" and raw:
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    elif kind == "cut":
        del raw[data.draw(st.integers(0, len(raw))) :]
    elif kind == "insert":
        at = data.draw(st.integers(0, len(raw)))
        raw[at:at] = data.draw(st.binary(min_size=1, max_size=6))
    else:
        return kind == "flip"
    return True


@compiled
@PROPERTY
@given(body=st.binary(max_size=200), count=st.integers(-1, 12), base=INT64)
def test_c_and_python_agree_on_random_bytes(body: bytes, count: int, base: int) -> None:
    from logway.wire._batch_scan import scan_records as scan_c

    assert scan_c(body, count, base) == scan_records_py(body, count, base)


@compiled
def test_c_scanner_rejects_what_is_not_a_buffer_or_int64() -> None:
    from logway.wire._batch_scan import scan_records as scan_c

    with pytest.raises(TypeError):
        scan_c("text", 1, 0)
    with pytest.raises(OverflowError):
        scan_c(b"", 2**64, 0)


# -- check_batch: the produce path's one call for a whole uncompressed batch --------------------------


def _general(raw: bytes | bytearray, pos: int):
    """What check_batch must return, from the general path: None where that path raises or would decompress."""
    try:
        header = validate_batch(raw, pos, check_crc=False)
    except CorruptBatch:
        return None
    if header.attributes & COMPRESSION_MASK:
        return None
    body = memoryview(raw)[pos + BATCH_HEADER_SIZE : pos + header.size]
    error, *summary = scan_records_py(body, header.records_count, header.base_timestamp)
    if error is not None:
        return None
    return (tuple(getattr(header, f) for f in header.__slots__), *summary)


@compiled
@PROPERTY
@given(records=st.lists(new_records, min_size=1, max_size=8), producer_id=st.sampled_from([-1, 0, 2**40]),
       data=st.data())
def test_check_batch_agrees_with_the_general_path_on_valid_and_mutated_batches(records, producer_id, data) -> None:
    from logway.wire._batch_scan import check_batch

    raw = bytearray(b"pad" + build_batch(records, producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                         base_sequence=3 if producer_id >= 0 else -1))
    assert check_batch(raw, 3) == _general(raw, 3) is not None
    for _ in range(data.draw(st.integers(1, 4), label="mutations")):
        _mutate(raw, data, ["flip", "cut", "insert"])
        pos = data.draw(st.integers(0, 4), label="pos")
        assert check_batch(raw, pos) == _general(raw, pos)


@compiled
def test_check_batch_leaves_compressed_and_legacy_batches_to_the_general_path() -> None:
    from logway.wire._batch_scan import check_batch

    records = [(b"k", b"v" * 100, ())] * 3
    assert check_batch(build_batch(records, compression=compression.LZ4), 0) is None
    legacy = bytearray(build_batch(records))
    legacy[MAGIC_POS] = 1
    assert check_batch(legacy, 0) is None
    assert check_batch(build_batch(records), -1) is None
