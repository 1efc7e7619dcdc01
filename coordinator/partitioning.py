"""Which ``__consumer_offsets`` partition owns a group: Kafka's ``Utils.abs(groupId.hashCode) % partitions``."""

from __future__ import annotations

__all__ = ["java_string_hashcode", "partition_for_group"]

_INT32_MIN = -(2**31)


def java_string_hashcode(s: str) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, as a signed int32."""
    h = 0
    units = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_group(group_id: str, num_partitions: int) -> int:
    """The offsets-topic partition for a group, exactly as Kafka's GroupMetadataManager.partitionFor."""
    h = java_string_hashcode(group_id)
    # org.apache.kafka.common.utils.Utils.abs maps Integer.MIN_VALUE to 0 instead of overflowing.
    return (0 if h == _INT32_MIN else abs(h)) % num_partitions
