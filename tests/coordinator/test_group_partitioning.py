"""Group -> __consumer_offsets partition mapping, checked against values printed by Java's String.hashCode."""

from __future__ import annotations

import pytest

from logway.coordinator.partitioning import java_string_hashcode, partition_for_group


@pytest.mark.parametrize(
    ("group", "hashcode", "partition"),
    [
        ("hello", 99162322, 22),
        ("my-group", -1906497762, 12),
        ("test-consumer-group", -1793216381, 31),
        ("", 0, 0),
        ("😀", 1772899, 49),  # a surrogate pair: two UTF-16 code units
        ("polygenelubricants", -(2**31), 0),  # Integer.MIN_VALUE: Kafka's Utils.abs maps it to 0
    ],
)
def test_matches_java(group: str, hashcode: int, partition: int) -> None:
    assert java_string_hashcode(group) == hashcode
    assert partition_for_group(group, 50) == partition


def test_partition_count_is_respected() -> None:
    assert partition_for_group("my-group", 7) == 1906497762 % 7
    assert all(0 <= partition_for_group(f"g{i}", 3) < 3 for i in range(100))
