"""Zig-zag varints used in records: Kafka's own ByteUtilsTest vectors, round trips, bounds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logway.wire.batch import CorruptBatch
from logway.wire.varint import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    encode_varint,
    read_varint,
    read_varlong,
    size_of_varint,
)

# From Kafka's ByteUtilsTest.testVarintSerde / testVarlongSerde.
KAFKA_VECTORS = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (-65, "8101"),
    (8191, "fe7f"),
    (-8192, "ff7f"),
    (8192, "808001"),
    (-8193, "818001"),
    (1048575, "feff7f"),
    (-1048576, "ffff7f"),
    (1048576, "80808001"),
    (-1048577, "81808001"),
    (134217727, "feffff7f"),
    (-134217728, "ffffff7f"),
    (134217728, "8080808001"),
    (-134217729, "8180808001"),
    (INT32_MAX, "feffffff0f"),
    (INT32_MIN, "ffffffff0f"),
]


@pytest.mark.parametrize(("value", "hex_bytes"), KAFKA_VECTORS)
def test_kafka_varint_vectors(value: int, hex_bytes: str) -> None:
    raw = bytes.fromhex(hex_bytes)
    assert encode_varint(value) == raw
    assert size_of_varint(value) == len(raw)
    assert read_varint(raw, 0) == (value, len(raw))
    assert read_varlong(raw, 0) == (value, len(raw))


def test_varlong_extremes() -> None:
    assert encode_varint(INT64_MAX) == bytes.fromhex("feffffffffffffffff01")
    assert encode_varint(INT64_MIN) == bytes.fromhex("ffffffffffffffffff01")
    assert read_varlong(encode_varint(INT64_MIN), 0) == (INT64_MIN, 10)


@given(st.integers(INT64_MIN, INT64_MAX), st.binary(max_size=3))
def test_varlong_round_trip(value: int, prefix: bytes) -> None:
    raw = prefix + encode_varint(value) + b"\xff"
    assert read_varlong(raw, len(prefix)) == (value, len(raw) - 1)
    assert size_of_varint(value) == len(raw) - len(prefix) - 1


@given(st.integers(INT32_MIN, INT32_MAX))
def test_varint_round_trip(value: int) -> None:
    assert read_varint(encode_varint(value), 0) == (value, size_of_varint(value))


def test_too_long_encodings_are_corrupt() -> None:
    # ByteUtilsTest.testInvalidVarint / testInvalidVarlong.
    with pytest.raises(CorruptBatch):
        read_varint(bytes.fromhex("ffffffffff01"), 0)
    with pytest.raises(CorruptBatch):
        read_varlong(bytes.fromhex("ffffffffffffffffffff01"), 0)


def test_truncated_varint_is_corrupt() -> None:
    for reader in (read_varint, read_varlong):
        with pytest.raises(CorruptBatch):
            reader(b"\x80\x80", 0)
        with pytest.raises(CorruptBatch):
            reader(b"", 0)


def test_values_outside_int64_are_refused() -> None:
    with pytest.raises(ValueError):
        encode_varint(INT64_MAX + 1)
