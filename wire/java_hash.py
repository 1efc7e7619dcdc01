"""Java's hash codes, where Kafka's answers or placements follow them: ``String.hashCode`` (which coordinator
partition owns a group or transactional id) and the iteration order of a ``java.util.HashMap`` of strings (the
order of some answers Kafka builds from one, e.g. DescribeUserScramCredentials)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

__all__ = ["java_hash_map_order", "java_string_hashcode", "java_topic_partition_hashcode"]

K = TypeVar("K")


def java_string_hashcode(s: str) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, as a signed int32."""
    h = 0
    units = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return _int32(h)


def java_hash_map_order(keys: Iterable[K], hashcode: Callable[[K], int] = java_string_hashcode) -> list[K]:
    """The distinct ``keys`` in the order a ``new HashMap<>()`` they were put into in this order iterates them
    (``hashcode``: the keys' Java ``hashCode``, String's by default): by bucket (the spread hash ``h ^ (h >>> 16)``
    masked to the table size: 16, doubled while more than 3/4 full), then in insertion order within a bucket (a
    resize keeps that order; buckets of 8+ become trees, which short lists of names never reach)."""
    distinct = list(dict.fromkeys(keys))
    capacity = 16
    while len(distinct) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: K) -> int:
        h = hashcode(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(distinct, key=bucket)  # stable: insertion order within a bucket


def java_topic_partition_hashcode(topic: str, partition: int) -> int:
    """Kafka's ``TopicPartition.hashCode``: ``31 * (31 + partition) + topic.hashCode()``, as a signed int32."""
    return _int32((31 * (31 + partition) + java_string_hashcode(topic)) & 0xFFFFFFFF)


def _int32(h: int) -> int:
    """An unsigned 32-bit value as Java's signed int."""
    return h - (1 << 32) if h & 0x80000000 else h
