"""Kafka's ``__share_group_state`` record schemas (share-coordinator ``common/message``): ShareSnapshot and
ShareUpdate, keyed by group, topic id and partition, and the partition of the topic a share partition's state
goes to (Kafka's ShareCoordinatorService.partitionFor over SharePartitionKey.asCoordinatorKey)."""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass

from logway.coordinator.partitioning import partition_for_group
from logway.coordinator.record_codec import Array, Record, Struct, encode_key, encode_value, spec

__all__ = ["SHARE_SNAPSHOT", "SHARE_UPDATE", "ShareKey", "ShareSnapshotValue", "ShareUpdateValue", "StateBatch",
           "coordinator_key", "snapshot_record", "state_partition_for", "update_record"]

SHARE_SNAPSHOT, SHARE_UPDATE = 0, 1  # the record types ("apiKey") of ShareSnapshotKey/Value, ShareUpdateKey/Value


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareKey:
    """ShareSnapshotKey and ShareUpdateKey: one share partition of one group."""

    group_id: str = spec("string")
    topic_id: uuid.UUID = spec("uuid")
    partition: int = spec("int32")


@dataclass(frozen=True, slots=True, kw_only=True)
class StateBatch:
    """A run of offsets in one state (0 available, 2 acknowledged, 4 archived) with one delivery count."""

    first_offset: int = spec("int64")
    last_offset: int = spec("int64")
    delivery_state: int = spec("int8")
    delivery_count: int = spec("int16")


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareSnapshotValue:
    snapshot_epoch: int = spec("int32")
    state_epoch: int = spec("int32")
    leader_epoch: int = spec("int32")
    start_offset: int = spec("int64")
    delivery_complete_count: int = spec("int32", tag=0, default=-1)  # Kafka 4.2 (KIP-1226)
    create_timestamp: int = spec("int64")
    write_timestamp: int = spec("int64")
    state_batches: tuple[StateBatch, ...] = spec(Array(Struct(StateBatch)))


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareUpdateValue:
    snapshot_epoch: int = spec("int32")
    leader_epoch: int = spec("int32")
    start_offset: int = spec("int64")
    delivery_complete_count: int = spec("int32", tag=0, default=-1)
    state_batches: tuple[StateBatch, ...] = spec(Array(Struct(StateBatch)))


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """Kafka's SharePartitionKey.asCoordinatorKey: "group:topicId:partition", the topic id in Kafka's base64."""
    text = base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")
    return f"{group_id}:{text}:{partition}"


def state_partition_for(group_id: str, topic_id: uuid.UUID, partition: int, num_partitions: int) -> int:
    """The ``__share_group_state`` partition holding this share partition's state."""
    return partition_for_group(coordinator_key(group_id, topic_id, partition), num_partitions)


def snapshot_record(key: ShareKey, value: ShareSnapshotValue | None) -> Record:
    return encode_key(SHARE_SNAPSHOT, key), None if value is None else encode_value(value)


def update_record(key: ShareKey, value: ShareUpdateValue) -> Record:
    return encode_key(SHARE_UPDATE, key), encode_value(value)
