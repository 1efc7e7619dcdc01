"""A KIP-932 share group, sans-IO: members, their epochs and assignments, and the group's records.

Kafka's ShareGroup and ShareGroupMember (group-coordinator ``modern/share``). Unlike a consumer group, a
partition may be assigned to several members at once (they share its records), and a member takes its target
assignment at once: there is nothing to revoke first. The group changes only by replaying its records
(record types 10-15 of ``__consumer_offsets``), whether just written or read back at load.
"""

from __future__ import annotations

import enum
import logging
import uuid
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field, replace
from typing import Any

from logway.coordinator.consumer_group_records import (
    GroupEpochValue,
    GroupKey,
    MemberKey,
    RecordType,
    ShareCurrentAssignmentValue,
    ShareMemberMetadataValue,
    TargetAssignmentValue,
    TargetMetadataValue,
    topic_partitions,
)
from logway.coordinator.consumer_group_store import GroupRecord
from logway.coordinator.record_codec import SchemaError, decode_key, decode_value

__all__ = ["SHARE_RECORD_TYPES", "ShareGroup", "ShareGroupMember", "ShareGroupState", "replay_share_bytes"]

log = logging.getLogger(__name__)
T = RecordType
Assignment = Mapping[uuid.UUID, frozenset[int]]


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True, eq=True)
class ShareGroupMember:
    """One member of a share group (Kafka's ShareGroupMember)."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    assigned: Assignment = field(default_factory=dict)

    __hash__ = None  # type: ignore[assignment]

    def metadata_value(self) -> ShareMemberMetadataValue:
        return ShareMemberMetadataValue(rack_id=self.rack_id, client_id=self.client_id, client_host=self.client_host,
                                        subscribed_topic_names=tuple(sorted(self.subscribed_topic_names)))

    def assignment_value(self) -> ShareCurrentAssignmentValue:
        return ShareCurrentAssignmentValue(member_epoch=self.member_epoch,
                                           previous_member_epoch=self.previous_member_epoch, state=0,
                                           assigned_partitions=topic_partitions(self.assigned))


class ShareGroup:
    """A share group's epochs, members and target assignment."""

    group_type = "share"
    protocol_type = "share"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 1  # as Kafka's ModernGroup: the first member's join makes it 2
        self.metadata_hash = 0
        self.assignment_epoch = 0
        self.assignment_timestamp = 0
        self.members: dict[str, ShareGroupMember] = {}
        self.target: dict[str, Assignment] = {}
        self.offsets: dict = {}  # share groups commit no offsets; present for the code that walks all groups

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def is_empty(self) -> bool:
        return not self.members

    def member(self, member_id: str) -> ShareGroupMember | None:
        return self.members.get(member_id)

    def target_of(self, member_id: str) -> Assignment:
        return self.target.get(member_id, {})

    def subscribed_topics(self) -> frozenset[str]:
        topics: set[str] = set()
        for m in self.members.values():
            topics |= m.subscribed_topic_names
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscribed_topics()

    def remove_expired_offsets(self, now_ms: int, retention_ms: int) -> list:
        return []  # nothing committed: the share state lives in __share_group_state

    # --- replay -------------------------------------------------------------------------------------------

    def replay(self, record_type: int, key: Any, value: Any | None) -> None:
        """Apply one share group record (Kafka's GroupMetadataManager.replay for types 10-14)."""
        if record_type == T.SHARE_GROUP_METADATA:
            if value is not None:
                self.group_epoch, self.metadata_hash = value.epoch, value.metadata_hash
        elif record_type == T.SHARE_GROUP_MEMBER_METADATA:
            self._member_metadata(key.member_id, value)
        elif record_type == T.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                self.target.pop(key.member_id, None)
            else:
                self.target[key.member_id] = {t.topic_id: frozenset(t.partitions) for t in value.topic_partitions
                                              if t.partitions}
        elif record_type == T.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA:
            self.assignment_epoch, self.assignment_timestamp = (
                (-1, 0) if value is None else (value.assignment_epoch, value.assignment_timestamp))
        elif record_type == T.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT:
            self._current(key.member_id, value)

    def _member_metadata(self, member_id: str, value: ShareMemberMetadataValue | None) -> None:
        if value is None:
            self.members.pop(member_id, None)
            return
        base = self.members.get(member_id) or ShareGroupMember(member_id)
        self.members[member_id] = replace(base, rack_id=value.rack_id, client_id=value.client_id,
                                          client_host=value.client_host,
                                          subscribed_topic_names=frozenset(value.subscribed_topic_names))

    def _current(self, member_id: str, value: ShareCurrentAssignmentValue | None) -> None:
        member = self.members.get(member_id)
        if value is None:
            if member is not None:
                self.members[member_id] = replace(member, member_epoch=-1, previous_member_epoch=-1, assigned={})
            return
        base = member or ShareGroupMember(member_id)
        self.members[member_id] = replace(
            base, member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
            assigned={t.topic_id: frozenset(t.partitions) for t in value.assigned_partitions if t.partitions})


# --- records ------------------------------------------------------------------------------------------------

_SCHEMAS: dict[int, tuple[type, type | None]] = {
    T.SHARE_GROUP_METADATA: (GroupKey, GroupEpochValue),
    T.SHARE_GROUP_MEMBER_METADATA: (MemberKey, ShareMemberMetadataValue),
    T.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA: (GroupKey, TargetMetadataValue),
    T.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER: (MemberKey, TargetAssignmentValue),
    T.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT: (MemberKey, ShareCurrentAssignmentValue),
    T.SHARE_GROUP_STATE_PARTITION_METADATA: (GroupKey, None),  # Kafka's share state bookkeeping: not needed here
}
SHARE_RECORD_TYPES = frozenset(_SCHEMAS)


def epoch_record(group_id: str, epoch: int, metadata_hash: int) -> GroupRecord:
    return GroupRecord(T.SHARE_GROUP_METADATA, GroupKey(group_id=group_id),
                       GroupEpochValue(epoch=epoch, metadata_hash=metadata_hash))


def member_record(group_id: str, member: ShareGroupMember) -> GroupRecord:
    return GroupRecord(T.SHARE_GROUP_MEMBER_METADATA, MemberKey(group_id=group_id, member_id=member.member_id),
                       member.metadata_value())


def assignment_record(group_id: str, member: ShareGroupMember) -> GroupRecord:
    return GroupRecord(T.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT,
                       MemberKey(group_id=group_id, member_id=member.member_id), member.assignment_value())


def target_record(group_id: str, member_id: str, assignment: Assignment) -> GroupRecord:
    return GroupRecord(T.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, MemberKey(group_id=group_id, member_id=member_id),
                       TargetAssignmentValue(topic_partitions=topic_partitions(assignment)))


def target_metadata_record(group_id: str, epoch: int, timestamp: int) -> GroupRecord:
    return GroupRecord(T.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, GroupKey(group_id=group_id),
                       TargetMetadataValue(assignment_epoch=epoch, assignment_timestamp=timestamp))


def member_tombstones(group_id: str, member_id: str) -> list[GroupRecord]:
    """Kafka's shareGroupFenceMember: current assignment, target, subscription."""
    key = MemberKey(group_id=group_id, member_id=member_id)
    return [GroupRecord(T.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, key, None),
            GroupRecord(T.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, key, None),
            GroupRecord(T.SHARE_GROUP_MEMBER_METADATA, key, None)]


def group_tombstones(group: ShareGroup) -> list[GroupRecord]:
    """Kafka's ShareGroup.createGroupTombstoneRecords."""
    gid = group.group_id
    keys = [MemberKey(group_id=gid, member_id=m) for m in group.members]
    group_key = GroupKey(group_id=gid)
    return [
        *(GroupRecord(T.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, k, None) for k in keys),
        *(GroupRecord(T.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, k, None) for k in keys),
        GroupRecord(T.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, group_key, None),
        *(GroupRecord(T.SHARE_GROUP_MEMBER_METADATA, k, None) for k in keys),
        GroupRecord(T.SHARE_GROUP_STATE_PARTITION_METADATA, group_key, None),
        GroupRecord(T.SHARE_GROUP_METADATA, group_key, None),
    ]


def replay(groups: MutableMapping[str, ShareGroup], record: GroupRecord) -> None:
    """Apply one record; a record of an unknown group creates it (not a tombstone); the epoch tombstone deletes."""
    gid = record.group_id
    group = groups.get(gid)
    if group is None:
        if record.value is None:
            return
        group = groups[gid] = ShareGroup(gid)
    group.replay(record.record_type, record.key, record.value)
    if record.record_type == T.SHARE_GROUP_METADATA and record.value is None:
        del groups[gid]


def replay_share_bytes(groups: MutableMapping[str, ShareGroup], key: bytes, value: bytes | None,
                       record_type: int) -> None:
    """Decode and replay one share group record read from the log; an unreadable one is logged and skipped."""
    key_cls, value_cls = _SCHEMAS[record_type]
    try:
        decoded = decode_key(key_cls, key)
        decoded_value = None if value is None or value_cls is None else decode_value(value_cls, value)
    except SchemaError as exc:
        log.warning("skipping unreadable share group record (type %d): %s", record_type, exc)
        return
    if value_cls is None:
        return  # ShareGroupStatePartitionMetadata: read and ignored
    replay(groups, GroupRecord(record_type, decoded, decoded_value))
