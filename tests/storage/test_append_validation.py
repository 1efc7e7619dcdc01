"""Append reads every record first (Kafka's LogValidator): poison batches append nothing, timestamps are per record."""

from __future__ import annotations

import struct

import crc32c
import pytest
from storage_helpers import NOW, keyed_batch, make_batch

from logway.storage.errors import CorruptRecord, InvalidRecord, InvalidTimestamp
from logway.wire import compression
from logway.wire.batch import (
    ATTRIBUTES_POS,
    CRC_POS,
    LAST_OFFSET_DELTA_POS,
    MAX_TIMESTAMP_POS,
    RECORDS_COUNT_POS,
    TIMESTAMP_TYPE_MASK,
    parse_header,
)
from logway.wire.records import decode_batches


def _patched(batch: bytearray, fmt: str, pos: int, value: int) -> bytearray:
    """``batch`` with one header field changed and the CRC-32C made valid again (a lie, not corruption)."""
    out = bytearray(batch)
    struct.pack_into(fmt, out, pos, value)
    struct.pack_into(">I", out, CRC_POS, crc32c.crc32c(bytes(out[ATTRIBUTES_POS:])))
    return out


def _values(plog) -> list[tuple[int, bytes]]:
    return [(r.offset, r.value) for b in decode_batches(plog.read_bytes(0, 1 << 20)) for r in b.records]


def _count_lie(claimed: int) -> bytearray:
    lie = _patched(make_batch([b"a", b"b", b"c"]), ">i", RECORDS_COUNT_POS, claimed)
    return _patched(lie, ">i", LAST_OFFSET_DELTA_POS, claimed - 1)


POISON = {
    "count below the records": (lambda: _count_lie(2), InvalidRecord),
    "count above the records": (lambda: _count_lie(4), InvalidRecord),
    "unknown codec": (lambda: _patched(make_batch([b"a"]), ">h", ATTRIBUTES_POS, 6), CorruptRecord),
    "lz4 over plain bytes": (lambda: _patched(make_batch([b"a"]), ">h", ATTRIBUTES_POS, compression.LZ4), CorruptRecord),
}


@pytest.mark.parametrize("name", sorted(POISON))
def test_a_poison_batch_appends_nothing_even_after_a_good_batch_in_the_same_request(open_log, name):
    plog = open_log()
    plog.append(make_batch([b"first"]), now_ms=NOW)
    make, error = POISON[name]
    with pytest.raises(error):
        plog.append(make_batch([b"good"]) + make(), now_ms=NOW)
    assert plog.log_end_offset == 1
    plog.append(make_batch([b"second"]), now_ms=NOW)
    assert _values(plog) == [(0, b"first"), (1, b"second")]


def test_every_record_timestamp_is_checked_not_only_the_batch_fields(open_log):
    plog = open_log({"message.timestamp.before.max.ms": "1000", "message.timestamp.after.max.ms": "1000"})
    # Base and max timestamps are in range, the middle record is not (its delta is negative).
    lying = _patched(make_batch([b"a", b"b", b"c"], timestamps=[NOW, NOW - 5000, NOW]), ">q", MAX_TIMESTAMP_POS, NOW)
    with pytest.raises(InvalidTimestamp) as err:
        plog.append(lying, now_ms=NOW)
    assert plog.log_end_offset == 0
    # Kafka's RecordValidationException names the record (Produce v8+ record_errors).
    assert err.value.name_records() == ((1, f"Timestamp {NOW - 5000} of message with offset 1 is out of range. The "
                                           f"timestamp should be within [{NOW - 1000}, {NOW + 1000}]"),)


def test_max_timestamp_is_rewritten_to_the_records_largest(open_log):
    plog = open_log()
    lying = _patched(make_batch([b"a", b"b"], timestamps=[NOW, NOW + 500]), ">q", MAX_TIMESTAMP_POS, NOW + 9999)
    plog.append(lying, now_ms=NOW)
    stored = parse_header(plog.read_bytes(0, 1 << 20))
    assert stored.max_timestamp == NOW + 500
    assert plog.max_timestamp() == (1, NOW + 500)
    assert _values(plog) == [(0, b"a"), (1, b"b")]  # CRC still valid: decode_batches checks it


def test_a_producer_cannot_stamp_log_append_time(open_log):
    batch = make_batch([b"a"])
    flagged = _patched(batch, ">h", ATTRIBUTES_POS, TIMESTAMP_TYPE_MASK)
    with pytest.raises(InvalidTimestamp):
        open_log({"message.timestamp.type": "LogAppendTime"}).append(bytearray(flagged), now_ms=NOW)


def test_compacted_topic_refuses_a_null_key_anywhere_in_the_batch(open_log):
    plog = open_log({"cleanup.policy": "compact"})
    with pytest.raises(InvalidRecord, match="1 record errors") as err:
        plog.append(keyed_batch([(b"k1", b"v"), (None, b"v"), (b"k2", b"v")], codec=compression.LZ4), now_ms=NOW)
    assert [(i, "without key" in m) for i, m in err.value.name_records()] == [(1, True)]
    plog.append(keyed_batch([(b"k1", b"v")], codec=compression.LZ4), now_ms=NOW)
    assert plog.log_end_offset == 1
