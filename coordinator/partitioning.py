"""Which coordinator-topic partition owns a key (Kafka's ``Utils.abs(key.hashCode) % partitions``) and which are loaded."""

from __future__ import annotations

from collections.abc import Callable

from logway.wire.java_hash import java_hash_map_order, java_string_hashcode, java_topic_partition_hashcode

__all__ = ["LoadedPartitions", "java_string_hashcode", "kafka_describe_order", "partition_for_group"]

_INT32_MIN = -(2**31)


def partition_for_group(group_id: str, num_partitions: int) -> int:
    """The offsets-topic partition for a group, exactly as Kafka's GroupMetadataManager.partitionFor."""
    h = java_string_hashcode(group_id)
    # org.apache.kafka.common.utils.Utils.abs maps Integer.MIN_VALUE to 0 instead of overflowing.
    return (0 if h == _INT32_MIN else abs(h)) % num_partitions


def kafka_describe_order(group_ids: list[str | None], partition_for: Callable[[str], int],
                         invalid: Callable[[str | None], bool]) -> list[str | None]:
    """``group_ids`` in the order Kafka's GroupCoordinatorService answers DescribeGroups, ConsumerGroupDescribe
    and ShareGroupDescribe: the ``invalid`` ids first (answered INVALID_GROUP_ID at once), then the others
    grouped by their ``__consumer_offsets`` partition, the partitions in the iteration order of the
    ``HashMap<TopicPartition, List<String>>`` it groups them in, each partition's ids in request order."""
    first = [g for g in group_ids if invalid(g)]
    by_partition: dict[int, list[str]] = {}
    for g in group_ids:
        if not invalid(g):
            by_partition.setdefault(partition_for(g), []).append(g)
    order = java_hash_map_order(by_partition, lambda p: java_topic_partition_hashcode("__consumer_offsets", p))
    return first + [g for p in order for g in by_partition[p]]


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
