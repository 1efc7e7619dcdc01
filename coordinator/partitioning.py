"""Which coordinator-topic partition owns a key (Kafka's ``Utils.abs(key.hashCode) % partitions``) and which are loaded."""

from __future__ import annotations

from logway.wire.java_hash import java_string_hashcode

__all__ = ["LoadedPartitions", "java_string_hashcode", "partition_for_group"]

_INT32_MIN = -(2**31)


def partition_for_group(group_id: str, num_partitions: int) -> int:
    """The offsets-topic partition for a group, exactly as Kafka's GroupMetadataManager.partitionFor."""
    h = java_string_hashcode(group_id)
    # org.apache.kafka.common.utils.Utils.abs maps Integer.MIN_VALUE to 0 instead of overflowing.
    return (0 if h == _INT32_MIN else abs(h)) % num_partitions


class LoadedPartitions:
    """Which partitions of a coordinator topic (``__consumer_offsets``, ``__transaction_state``) are loaded.

    A key (group id, transactional id) whose partition is not loaded yet answers COORDINATOR_LOAD_IN_PROGRESS.
    """

    def __init__(self, num_partitions: int) -> None:
        self.num_partitions = num_partitions
        self._loaded: set[int] = set()

    def __contains__(self, partition: int) -> bool:
        return partition in self._loaded

    @property
    def loading(self) -> frozenset[int]:
        """The partitions not loaded yet."""
        return frozenset(range(self.num_partitions)) - self._loaded

    def partition_for(self, key: str) -> int:
        """The partition that stores ``key`` (Kafka's ``Utils.abs(key.hashCode) % partitions``)."""
        return partition_for_group(key, self.num_partitions)

    def serves(self, key: str) -> bool:
        """``key``'s partition is loaded."""
        return self.partition_for(key) in self._loaded

    def add(self, partition: int) -> None:
        """Mark ``partition`` loaded."""
        self._loaded.add(partition)
