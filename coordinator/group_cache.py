"""The groups of the loaded ``__consumer_offsets`` partitions and the log they persist to (Kafka's GroupMetadataManager).

Membership, offsets and group administration share one ``GroupCache``. Groups that Kafka would mark Dead
are removed from the cache in the same call (there is no other thread to observe the Dead state), so the
Dead checks Kafka makes on every request are not needed. Classic groups and KIP-848 consumer groups share
one namespace (a group id is one or the other), kept in two maps.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from logway.coordinator.consumer_group import ConsumerGroup
from logway.coordinator.consumer_group_store import group_tombstones
from logway.coordinator.group import GroupMetadata, GroupState
from logway.coordinator.group_store import Record, group_record, replay
from logway.coordinator.offsets_log import OffsetsLog
from logway.coordinator.partitioning import LoadedPartitions
from logway.coordinator.share_group import ShareGroup
from logway.wire.errors import ErrorCode, KafkaError

__all__ = ["AnyGroup", "GroupCache"]

log = logging.getLogger(__name__)

E = ErrorCode
AnyGroup = GroupMetadata | ConsumerGroup | ShareGroup


class GroupCache:
    """Groups by id, the partitions loaded so far, and appends to ``__consumer_offsets`` that answer an error code."""

    def __init__(self, offsets_log: OffsetsLog, num_partitions: int) -> None:
        self.log = offsets_log
        self.partitions = LoadedPartitions(num_partitions)
        self.groups: dict[str, GroupMetadata] = {}
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.share_groups: dict[str, ShareGroup] = {}

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition that stores ``group_id``."""
        return self.partitions.partition_for(group_id)

    def get(self, group_id: str) -> GroupMetadata | None:
        """The cached classic group, or None."""
        return self.groups.get(group_id)

    def consumer(self, group_id: str) -> ConsumerGroup | None:
        """The cached KIP-848 consumer group, or None."""
        return self.consumer_groups.get(group_id)

    def share(self, group_id: str) -> ShareGroup | None:
        """The cached KIP-932 share group, or None."""
        return self.share_groups.get(group_id)

    def any_group(self, group_id: str) -> AnyGroup | None:
        """The cached group of any type, or None."""
        for groups in (self.groups, self.consumer_groups, self.share_groups):
            group = groups.get(group_id)
            if group is not None:
                return group
        return None

    def replace_classic(self, classic: GroupMetadata, group: ConsumerGroup) -> None:
        """An empty classic group becomes a consumer group of the same id; the committed offsets go with the id."""
        if self.groups.get(classic.group_id) is classic:
            del self.groups[classic.group_id]
        group.offsets.update(classic.offsets)
        self.consumer_groups[group.group_id] = group

    def all_groups(self) -> list[AnyGroup]:
        """Every cached group, classic first."""
        return [*self.groups.values(), *self.consumer_groups.values(), *self.share_groups.values()]

    def get_or_create(self, group_id: str, now_ms: int) -> GroupMetadata:
        """The cached group, or a new Empty one (a group may exist only to store offsets). The caller has made
        sure the id is not a group of another type."""
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = GroupMetadata(group_id, now_ms)
        return group

    def replace_consumer(self, group: ConsumerGroup, now_ms: int) -> ErrorCode:
        """An empty consumer group becomes a classic group of the same id (its records are tombstoned; the
        committed offsets go with the id)."""
        records = [r.encode() for r in group_tombstones(group)]
        error = self.append(self.partition_for(group.group_id), records, now_ms, E.unknown_server_error)
        if error == E.none:
            del self.consumer_groups[group.group_id]
            self.get_or_create(group.group_id, now_ms).offsets.update(group.offsets)
        return error

    def replace_consumer_by(self, group: ConsumerGroup, classic: GroupMetadata) -> None:
        """A consumer group becomes a classic group with members (the KIP-848 online downgrade)."""
        if self.consumer_groups.get(group.group_id) is group:
            del self.consumer_groups[group.group_id]
        classic.offsets.update(group.offsets)
        self.groups[classic.group_id] = classic

    def is_cached(self, group: AnyGroup) -> bool:
        """``group`` is still the cached group of its id (a timer or a late write may hold a removed one)."""
        return self.any_group(group.group_id) is group

    def drop(self, group: AnyGroup, now_ms: int) -> None:
        """The group is Dead: remove it from the cache."""
        if isinstance(group, ConsumerGroup):
            del self.consumer_groups[group.group_id]
            return
        if isinstance(group, ShareGroup):
            del self.share_groups[group.group_id]
            return
        group.transition_to(GroupState.DEAD, now_ms)
        del self.groups[group.group_id]

    def replay(
        self, partition: int, now_ms: int, records: Iterable[Record] | None,
    ) -> tuple[list[GroupMetadata], list[ConsumerGroup], list[ShareGroup]]:
        """Cache a partition's groups from its records (read from the log unless given); returns them.

        The caller marks the partition loaded once everything else of the load is done.
        """
        if partition in self.partitions:
            raise ValueError(f"__consumer_offsets partition {partition} is already loaded")
        if not 0 <= partition < self.partitions.num_partitions:
            raise ValueError(f"no __consumer_offsets partition {partition}")
        classic, consumer, share = replay(self.log.read(partition) if records is None else records, now_ms)
        self.groups.update(classic)
        self.consumer_groups.update(consumer)
        self.share_groups.update(share)
        return list(classic.values()), list(consumer.values()), list(share.values())

    def validate_group_status(self, group_id: str | None, *, allow_empty_id: bool = False) -> ErrorCode | None:
        """Kafka's validateGroupStatus; the empty group id is allowed only for offset and admin APIs."""
        if group_id is None or (group_id == "" and not allow_empty_id):
            return E.invalid_group_id
        if not self.partitions.serves(group_id):
            return E.coordinator_load_in_progress
        return None

    def store_group(self, group: GroupMetadata, assignment: Mapping[str, bytes], now_ms: int) -> ErrorCode:
        """Persist the group's metadata record; returns the error to answer with (Kafka's storeGroup)."""
        return self.append(
            self.partition_for(group.group_id), [group_record(group, assignment)], now_ms, E.unknown_server_error
        )

    def append(
        self, partition: int, records: list[Record], now_ms: int, too_large: ErrorCode,
        producer: tuple[int, int] | None = None,
    ) -> ErrorCode:
        """Append and map a storage failure to the coordinator error Kafka's GroupMetadataManager answers."""
        try:
            if producer is None:
                self.log.append(partition, records, now_ms)
            else:
                self.log.append(partition, records, now_ms, producer=producer)
        except KafkaError as e:
            log.warning("append to __consumer_offsets-%d failed: %s", partition, e)
            return _map_append_error(e.error_code, too_large)
        except OSError as e:
            log.warning("append to __consumer_offsets-%d failed: %s", partition, e)
            return E.not_coordinator  # Kafka maps KAFKA_STORAGE_ERROR to NOT_COORDINATOR
        return E.none


    def append_marker(self, partition: int, producer_id: int, producer_epoch: int, commit: bool, now_ms: int) -> bool:
        """Append a transaction's COMMIT or ABORT marker; False (logged) when the write failed."""
        try:
            self.log.append_marker(partition, producer_id, producer_epoch, commit, now_ms)
        except (KafkaError, OSError) as exc:
            log.warning("transaction marker on __consumer_offsets-%d failed: %s", partition, exc)
            return False
        return True

def _map_append_error(error: ErrorCode, too_large: ErrorCode) -> ErrorCode:
    """Kafka's mapping of produce errors on __consumer_offsets to coordinator errors."""
    if error in (
        E.unknown_topic_or_partition,
        E.not_enough_replicas,
        E.not_enough_replicas_after_append,
        E.request_timed_out,
    ):
        return E.coordinator_not_available
    if error in (E.not_leader_or_follower, E.kafka_storage_error):
        return E.not_coordinator
    if error in (E.message_too_large, E.record_list_too_large, E.invalid_fetch_size):
        return too_large
    return error
