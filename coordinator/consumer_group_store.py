"""Consumer group changes as ``__consumer_offsets`` records, and their replay into ``ConsumerGroup`` objects.

Kafka's GroupCoordinatorRecordHelpers (building) and GroupMetadataManager.replay (applying), sans-IO. A
``GroupRecord`` is a typed record: the state machine builds a list of them, the caller appends their bytes
and, once the append succeeded, replays the same objects; at load the bytes are decoded back into
``GroupRecord``s and replayed in log order. One path for both, so memory always matches the log.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any

from logway.coordinator.consumer_group import Assignment, ConsumerGroup, ConsumerGroupMember
from logway.coordinator.consumer_group_records import (
    CurrentAssignmentValue,
    GroupEpochValue,
    GroupKey,
    MemberKey,
    MemberMetadataValue,
    RecordType,
    RegexKey,
    RegexValue,
    TargetAssignmentValue,
    TargetMetadataValue,
    topic_partitions,
)
from logway.coordinator.record_codec import Record, SchemaError, decode_key, decode_value, encode_key, encode_value

__all__ = [
    "CONSUMER_RECORD_TYPES", "GroupRecord", "assignment_record", "decode_record", "epoch_record", "group_tombstones",
    "member_metadata_record", "member_tombstones", "regex_record", "replay", "target_metadata_record",
    "target_record",
]

log = logging.getLogger(__name__)
T = RecordType

# record type -> (key class, value class)
_SCHEMAS: dict[int, tuple[type, type | None]] = {
    T.CONSUMER_GROUP_METADATA: (GroupKey, GroupEpochValue),
    T.CONSUMER_GROUP_PARTITION_METADATA: (GroupKey, None),  # pre-4.1 subscription metadata: read as a marker only
    T.CONSUMER_GROUP_MEMBER_METADATA: (MemberKey, MemberMetadataValue),
    T.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: (GroupKey, TargetMetadataValue),
    T.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: (MemberKey, TargetAssignmentValue),
    T.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: (MemberKey, CurrentAssignmentValue),
    T.CONSUMER_GROUP_REGULAR_EXPRESSION: (RegexKey, RegexValue),
}
CONSUMER_RECORD_TYPES = frozenset(_SCHEMAS)


@dataclass(frozen=True, slots=True)
class GroupRecord:
    """One consumer group record: its type, key and value (None: a tombstone)."""

    record_type: int
    key: Any
    value: Any | None

    @property
    def group_id(self) -> str:
        return self.key.group_id

    def encode(self) -> Record:
        return encode_key(self.record_type, self.key), None if self.value is None else encode_value(self.value)


# --- building -------------------------------------------------------------------------------------------


def epoch_record(group_id: str, epoch: int, metadata_hash: int) -> GroupRecord:
    return GroupRecord(T.CONSUMER_GROUP_METADATA, GroupKey(group_id=group_id),
                       GroupEpochValue(epoch=epoch, metadata_hash=metadata_hash))


def member_metadata_record(group_id: str, member: ConsumerGroupMember) -> GroupRecord:
    return GroupRecord(T.CONSUMER_GROUP_MEMBER_METADATA, MemberKey(group_id=group_id, member_id=member.member_id),
                       member.metadata_value())


def assignment_record(group_id: str, member: ConsumerGroupMember) -> GroupRecord:
    return GroupRecord(T.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
                       MemberKey(group_id=group_id, member_id=member.member_id), member.assignment_value())


def target_record(group_id: str, member_id: str, assignment: Assignment) -> GroupRecord:
    return GroupRecord(T.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, MemberKey(group_id=group_id, member_id=member_id),
                       TargetAssignmentValue(topic_partitions=topic_partitions(assignment)))


def target_metadata_record(group_id: str, epoch: int, timestamp: int) -> GroupRecord:
    return GroupRecord(T.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, GroupKey(group_id=group_id),
                       TargetMetadataValue(assignment_epoch=epoch, assignment_timestamp=timestamp))


def regex_record(group_id: str, regex: str, topics: Iterable[str] | None, version: int, now_ms: int) -> GroupRecord:
    """A resolved regex (``topics`` None: its tombstone)."""
    value = None if topics is None else RegexValue(topics=tuple(sorted(topics)), version=version, timestamp=now_ms)
    return GroupRecord(T.CONSUMER_GROUP_REGULAR_EXPRESSION, RegexKey(group_id=group_id, regular_expression=regex),
                       value)


def member_tombstones(group_id: str, member_id: str) -> list[GroupRecord]:
    """Kafka's removeMember: the current assignment, the target, then the subscription (the order matters)."""
    key = MemberKey(group_id=group_id, member_id=member_id)
    return [GroupRecord(T.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, key, None),
            GroupRecord(T.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, key, None),
            GroupRecord(T.CONSUMER_GROUP_MEMBER_METADATA, key, None)]


def group_tombstones(group: ConsumerGroup) -> list[GroupRecord]:
    """Kafka's ConsumerGroup.createGroupTombstoneRecords: everything the group wrote, group epoch last."""
    gid = group.group_id
    keys = [MemberKey(group_id=gid, member_id=m) for m in group.members]
    group_key = GroupKey(group_id=gid)
    return [
        *(GroupRecord(T.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, k, None) for k in keys),
        *(GroupRecord(T.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, k, None) for k in keys),
        GroupRecord(T.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, group_key, None),
        *(GroupRecord(T.CONSUMER_GROUP_MEMBER_METADATA, k, None) for k in keys),
        *(regex_record(gid, regex, None, 0, 0) for regex in group.resolved_regexes),
        GroupRecord(T.CONSUMER_GROUP_PARTITION_METADATA, group_key, None),
        GroupRecord(T.CONSUMER_GROUP_METADATA, group_key, None),
    ]


# --- reading and replaying ------------------------------------------------------------------------------


def decode_record(key: bytes, value: bytes | None, record_type: int) -> GroupRecord:
    """A consumer group record read back from the log (``record_type`` in CONSUMER_RECORD_TYPES)."""
    key_cls, value_cls = _SCHEMAS[record_type]
    decoded_key = decode_key(key_cls, key)
    if value is None or value_cls is None:
        return GroupRecord(record_type, decoded_key, None)
    return GroupRecord(record_type, decoded_key, decode_value(value_cls, value))


def replay(groups: MutableMapping[str, ConsumerGroup], record: GroupRecord) -> None:
    """Apply one record (Kafka's GroupMetadataManager.replay for consumer group records).

    A record of an unknown group creates it, except tombstones; the group epoch tombstone deletes the group.
    """
    gid = record.group_id
    group = groups.get(gid)
    if group is None:
        if record.value is None:
            return
        group = groups[gid] = ConsumerGroup(gid)
    _APPLY[record.record_type](group, record.key, record.value)
    if record.record_type == T.CONSUMER_GROUP_METADATA and record.value is None:
        del groups[gid]


def _epoch(group: ConsumerGroup, key: GroupKey, value: GroupEpochValue | None) -> None:
    if value is not None:
        group.replay_epoch(value.epoch, value.metadata_hash)


def _member(group: ConsumerGroup, key: MemberKey, value: MemberMetadataValue | None) -> None:
    group.replay_member_metadata(key.member_id, value)


def _current(group: ConsumerGroup, key: MemberKey, value: CurrentAssignmentValue | None) -> None:
    group.replay_current_assignment(key.member_id, value)


def _target(group: ConsumerGroup, key: MemberKey, value: TargetAssignmentValue | None) -> None:
    assignment: dict[uuid.UUID, frozenset[int]] | None = None
    if value is not None:
        assignment = {t.topic_id: frozenset(t.partitions) for t in value.topic_partitions if t.partitions}
    group.replay_target(key.member_id, assignment)


def _target_metadata(group: ConsumerGroup, key: GroupKey, value: TargetMetadataValue | None) -> None:
    if value is None:
        group.replay_target_metadata(-1, 0)
    else:
        group.replay_target_metadata(value.assignment_epoch, value.assignment_timestamp)


def _regex(group: ConsumerGroup, key: RegexKey, value: RegexValue | None) -> None:
    group.replay_regex(key.regular_expression, value)


def _ignored(group: ConsumerGroup, key: GroupKey, value: None) -> None:
    """ConsumerGroupPartitionMetadata (before Kafka 4.1): replaced by the group's metadata hash."""


_APPLY = {
    T.CONSUMER_GROUP_METADATA: _epoch,
    T.CONSUMER_GROUP_PARTITION_METADATA: _ignored,
    T.CONSUMER_GROUP_MEMBER_METADATA: _member,
    T.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: _target_metadata,
    T.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: _target,
    T.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: _current,
    T.CONSUMER_GROUP_REGULAR_EXPRESSION: _regex,
}


def replay_bytes(groups: MutableMapping[str, ConsumerGroup], key: bytes, value: bytes | None,
                 record_type: int) -> None:
    """Decode and replay one record read from the log; an unreadable one is logged and skipped (like the
    classic records: one damaged record costs only itself)."""
    try:
        record = decode_record(key, value, record_type)
    except SchemaError as exc:
        log.warning("skipping unreadable consumer group record (type %d): %s", record_type, exc)
        return
    replay(groups, record)
