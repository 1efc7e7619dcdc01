"""Turns groups and offsets into ``__consumer_offsets`` records and back (Kafka's GroupMetadataManager codec side)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from logway.coordinator.consumer_group import ConsumerGroup
from logway.coordinator.consumer_group_store import CONSUMER_RECORD_TYPES, replay_bytes
from logway.coordinator.group import GroupMetadata, GroupState
from logway.coordinator.member import MemberMetadata
from logway.coordinator.offsets_schema import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    SchemaError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from logway.coordinator.record_codec import record_type as record_type_of
from logway.coordinator.results import TopicPartition
from logway.coordinator.share_group import SHARE_RECORD_TYPES, ShareGroup, replay_share_bytes

__all__ = ["Record", "group_record", "group_tombstone", "offset_record", "offset_tombstone", "replay"]

log = logging.getLogger(__name__)

Record = tuple[bytes, bytes | None]


def offset_record(group_id: str, tp: TopicPartition, value: OffsetCommitValue) -> Record:
    """The record of one committed offset."""
    return encode_offset_commit_key(group_id, tp[0], tp[1]), encode_offset_commit_value(value)


def offset_tombstone(group_id: str, tp: TopicPartition) -> Record:
    """The tombstone that deletes one committed offset on compaction."""
    return encode_offset_commit_key(group_id, tp[0], tp[1]), None


def group_tombstone(group_id: str) -> Record:
    """The tombstone that deletes a group's metadata on compaction."""
    return encode_group_metadata_key(group_id), None


def group_record(group: GroupMetadata, assignment: Mapping[str, bytes]) -> Record:
    """The group's metadata record: generation, protocol, leader, and each member's subscription and assignment."""
    protocol = group.protocol_name
    if group.members and protocol is None:
        raise ValueError(f"group {group.group_id}: non-empty group metadata needs a protocol")
    members = tuple(
        MemberMetadataValue(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout=m.rebalance_timeout_ms,
            session_timeout=m.session_timeout_ms,
            subscription=m.metadata(protocol),  # type: ignore[arg-type]
            assignment=assignment.get(m.member_id, b""),
        )
        for m in group.members.values()
    )
    value = GroupMetadataValue(
        protocol_type=group.protocol_type or "",
        generation=group.generation_id,
        protocol=protocol,
        leader=group.leader_id,
        current_state_timestamp=-1 if group.current_state_timestamp is None else group.current_state_timestamp,
        members=members,
    )
    return encode_group_metadata_key(group.group_id), encode_group_metadata_value(value)


def replay(
    records: Iterable[Record], now_ms: int,
) -> tuple[dict[str, GroupMetadata], dict[str, ConsumerGroup], dict[str, ShareGroup]]:
    """Rebuild the groups of one partition from its records, last record per key winning, tombstones deleting.

    Like Kafka's GroupMetadataManager.loadGroupsAndOffsets: a classic group with members comes back Stable,
    one without comes back Empty, and offsets of a group with no metadata record belong to a new Empty
    group (a simple consumer that only stores offsets). KIP-848 consumer group records are replayed in log
    order into their groups (consumer_group_store.replay), which also hold their offsets.
    """
    offsets: dict[str, dict[TopicPartition, OffsetCommitValue]] = {}
    groups: dict[str, GroupMetadataValue] = {}
    consumer: dict[str, ConsumerGroup] = {}
    share: dict[str, ShareGroup] = {}
    for key_bytes, value_bytes in records:
        try:
            _replay_one(key_bytes, value_bytes, offsets, groups, consumer, share)
        except SchemaError as e:
            # Kafka fails the whole load on a bad record; skipping one keeps every other group available.
            log.warning("skipping unreadable __consumer_offsets record %r: %s", key_bytes[:64], e)
    loaded: dict[str, GroupMetadata] = {}
    for group_id, value in groups.items():
        loaded[group_id] = _group_from_value(group_id, value, now_ms)
    for group_id, group_offsets in offsets.items():
        if not group_offsets and group_id not in loaded and group_id not in consumer:
            continue
        holder = consumer.get(group_id) or loaded.get(group_id)
        if holder is None:
            holder = loaded[group_id] = GroupMetadata(group_id, now_ms)
        holder.offsets.update(group_offsets)
    return loaded, consumer, share


def _replay_one(
    key_bytes: bytes, value_bytes: bytes | None, offsets: dict[str, dict[TopicPartition, OffsetCommitValue]],
    groups: dict[str, GroupMetadataValue], consumer: dict[str, ConsumerGroup], share: dict[str, ShareGroup],
) -> None:
    """Apply one record to the partition's state being rebuilt."""
    record_type = record_type_of(key_bytes)
    if record_type in CONSUMER_RECORD_TYPES:
        replay_bytes(consumer, key_bytes, value_bytes, record_type)
        return
    if record_type in SHARE_RECORD_TYPES:
        replay_share_bytes(share, key_bytes, value_bytes, record_type)
        return
    key = decode_key(key_bytes)
    if isinstance(key, OffsetCommitKey):
        group_offsets = offsets.setdefault(key.group, {})
        tp = (key.topic, key.partition)
        if value_bytes is None:
            group_offsets.pop(tp, None)
        else:
            group_offsets[tp] = decode_offset_commit_value(value_bytes)
    elif isinstance(key, GroupMetadataKey):
        if value_bytes is None:
            groups.pop(key.group, None)
        else:
            groups[key.group] = decode_group_metadata_value(value_bytes)


def _group_from_value(group_id: str, value: GroupMetadataValue, now_ms: int) -> GroupMetadata:
    """Kafka's GroupMetadata.loadGroup."""
    group = GroupMetadata(group_id, now_ms, GroupState.STABLE if value.members else GroupState.EMPTY)
    group.protocol_type = value.protocol_type or None
    group.generation_id = value.generation
    group.protocol_name = value.protocol
    group.leader_id = value.leader
    group.current_state_timestamp = None if value.current_state_timestamp == -1 else value.current_state_timestamp
    for m in value.members:
        member = MemberMetadata(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout,
            session_timeout_ms=m.session_timeout,
            protocol_type=group.protocol_type or "",
            protocols=[(value.protocol or "", m.subscription)],
            assignment=m.assignment,
        )
        group.add(member, None)
    group.leader_id = value.leader
    group.subscribed_topics = group.compute_subscribed_topics()
    return group
