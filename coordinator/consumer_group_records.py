"""Kafka's ``__consumer_offsets`` record schemas for KIP-848 consumer groups and KIP-932 share groups.

The keys and values of Kafka 4.3's group-coordinator ``common/message/*.json`` (record types 3-8 and 16 for
consumer groups, 10-15 for share groups), in the form ``record_codec`` encodes, plus the record builders
the state machines use. Kafka's ``kafka-dump-log --offsets-decoder`` reads what is written here.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from logway.coordinator.record_codec import Array, Record, Struct, encode_key, encode_value, spec

__all__ = [
    "ClassicMemberMetadata", "ClassicProtocol", "CurrentAssignmentValue", "GroupEpochValue", "GroupKey",
    "MemberKey", "MemberMetadataValue", "RecordType", "RegexKey", "RegexValue", "TargetAssignmentValue",
    "TargetMetadataValue", "TopicPartitions", "TopicPartitionsWithEpochs", "group_record", "member_record",
    "regex_record", "tombstone",
]


class RecordType:
    """The record types (the schemas' "apiKey") Kafka 4.3's group coordinator writes."""

    CONSUMER_GROUP_METADATA = 3
    CONSUMER_GROUP_PARTITION_METADATA = 4  # replaced by ConsumerGroupMetadataValue.MetadataHash in 4.1 (KIP-1101)
    CONSUMER_GROUP_MEMBER_METADATA = 5
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
    SHARE_GROUP_MEMBER_METADATA = 10
    SHARE_GROUP_METADATA = 11
    SHARE_GROUP_TARGET_ASSIGNMENT_METADATA = 12
    SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER = 13
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT = 14
    SHARE_GROUP_STATE_PARTITION_METADATA = 15
    CONSUMER_GROUP_REGULAR_EXPRESSION = 16


# --- keys (version 0, not flexible) ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupKey:
    """ConsumerGroupMetadataKey, ConsumerGroupTargetAssignmentMetadataKey, ShareGroup...Key: the group id."""

    group_id: str = spec("string")


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberKey:
    """ConsumerGroupMemberMetadataKey, ...TargetAssignmentMemberKey, ...CurrentMemberAssignmentKey."""

    group_id: str = spec("string")
    member_id: str = spec("string")


@dataclass(frozen=True, slots=True, kw_only=True)
class RegexKey:
    """ConsumerGroupRegularExpressionKey."""

    group_id: str = spec("string")
    regular_expression: str = spec("string")


# --- values (version 0, flexible) -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupEpochValue:
    """ConsumerGroupMetadataValue / ShareGroupMetadataValue: the group epoch and (4.1+) its metadata hash."""

    epoch: int = spec("int32")
    metadata_hash: int = spec("int64", tag=0, default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassicProtocol:
    name: str = spec("string")
    metadata: bytes = spec("bytes")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassicMemberMetadata:
    """What a member using the classic protocol inside a consumer group joined with (KIP-848 migration)."""

    session_timeout_ms: int = spec("int32")
    supported_protocols: tuple[ClassicProtocol, ...] = spec(Array(Struct(ClassicProtocol)))


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberMetadataValue:
    """ConsumerGroupMemberMetadataValue."""

    instance_id: str | None = spec("string?")
    rack_id: str | None = spec("string?")
    client_id: str = spec("string")
    client_host: str = spec("string")
    subscribed_topic_names: tuple[str, ...] = spec(Array("string"))
    subscribed_topic_regex: str | None = spec("string?")
    rebalance_timeout_ms: int = spec("int32", default=-1)
    server_assignor: str | None = spec("string?", default=None)
    classic_member_metadata: ClassicMemberMetadata | None = spec(
        Struct(ClassicMemberMetadata, nullable=True), tag=0, default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareMemberMetadataValue:
    """ShareGroupMemberMetadataValue."""

    rack_id: str | None = spec("string?")
    client_id: str = spec("string")
    client_host: str = spec("string")
    subscribed_topic_names: tuple[str, ...] = spec(Array("string"))


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetMetadataValue:
    """...TargetAssignmentMetadataValue: the epoch the target assignment was computed for (4.3: and when)."""

    assignment_epoch: int = spec("int32")
    assignment_timestamp: int = spec("int64", tag=0, default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartitions:
    topic_id: uuid.UUID = spec("uuid")
    partitions: tuple[int, ...] = spec(Array("int32"))


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetAssignmentValue:
    """...TargetAssignmentMemberValue: one member's target partitions."""

    topic_partitions: tuple[TopicPartitions, ...] = spec(Array(Struct(TopicPartitions)))


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartitionsWithEpochs:
    """A topic's partitions in ConsumerGroupCurrentMemberAssignmentValue; ``assignment_epochs`` (4.3) is the
    epoch each partition was assigned at, to fence zombie commits; absent, the member epoch counts."""

    topic_id: uuid.UUID = spec("uuid")
    partitions: tuple[int, ...] = spec(Array("int32"))
    assignment_epochs: tuple[int, ...] | None = spec(Array("int32", nullable=True), tag=0, default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class CurrentAssignmentValue:
    """ConsumerGroupCurrentMemberAssignmentValue."""

    member_epoch: int = spec("int32")
    previous_member_epoch: int = spec("int32")
    state: int = spec("int8")
    assigned_partitions: tuple[TopicPartitionsWithEpochs, ...] = spec(Array(Struct(TopicPartitionsWithEpochs)))
    partitions_pending_revocation: tuple[TopicPartitionsWithEpochs, ...] = spec(
        Array(Struct(TopicPartitionsWithEpochs)))


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareCurrentAssignmentValue:
    """ShareGroupCurrentMemberAssignmentValue."""

    member_epoch: int = spec("int32")
    previous_member_epoch: int = spec("int32")
    state: int = spec("int8")
    assigned_partitions: tuple[TopicPartitions, ...] = spec(Array(Struct(TopicPartitions)))


@dataclass(frozen=True, slots=True, kw_only=True)
class RegexValue:
    """ConsumerGroupRegularExpressionValue: the topics a regex resolved to, at which metadata version and when."""

    topics: tuple[str, ...] = spec(Array("string"))
    version: int = spec("int64")
    timestamp: int = spec("int64")


# --- builders -------------------------------------------------------------------------------------------


def group_record(record_type: int, group_id: str, value: object | None) -> Record:
    """A record keyed by the group id alone (value None: its tombstone)."""
    return encode_key(record_type, GroupKey(group_id=group_id)), None if value is None else encode_value(value)


def member_record(record_type: int, group_id: str, member_id: str, value: object | None) -> Record:
    """A record keyed by group and member id (value None: its tombstone)."""
    return encode_key(record_type, MemberKey(group_id=group_id, member_id=member_id)), None if value is None else encode_value(value)


def regex_record(group_id: str, regex: str, value: RegexValue | None) -> Record:
    """A resolved regular expression of a consumer group (value None: its tombstone)."""
    key = encode_key(RecordType.CONSUMER_GROUP_REGULAR_EXPRESSION, RegexKey(group_id=group_id, regular_expression=regex))
    return key, None if value is None else encode_value(value)


def tombstone(record: Record) -> Record:
    """The tombstone of a record's key."""
    return record[0], None


def topic_partitions(assignment: Mapping[uuid.UUID, Iterable[int]]) -> tuple[TopicPartitions, ...]:
    """An assignment as the records list it: topics and partitions sorted, for a stable encoding."""
    return tuple(TopicPartitions(topic_id=tid, partitions=tuple(sorted(parts))) for tid, parts in sorted(assignment.items()) if parts)


def topic_partitions_with_epochs(
    assignment: Mapping[uuid.UUID, Mapping[int, int]],
) -> tuple[TopicPartitionsWithEpochs, ...]:
    """Partitions with the epoch each was assigned at (4.3's AssignmentEpochs)."""
    out = []
    for tid, epochs in sorted(assignment.items()):
        parts = tuple(sorted(epochs))
        out.append(TopicPartitionsWithEpochs(
            topic_id=tid, partitions=parts, assignment_epochs=tuple(epochs[p] for p in parts)))
    return tuple(out)


def epochs_from_record(
    topics: Iterable[TopicPartitionsWithEpochs], member_epoch: int,
) -> dict[uuid.UUID, dict[int, int]]:
    """Kafka's Utils.assignmentFromTopicPartitions: without assignment epochs a partition counts from the
    member epoch (records written before 4.3)."""
    out: dict[uuid.UUID, dict[int, int]] = {}
    for t in topics:
        epochs = t.assignment_epochs
        if epochs is not None and len(epochs) == len(t.partitions):
            out[t.topic_id] = dict(zip(t.partitions, epochs, strict=True))
        else:
            out[t.topic_id] = dict.fromkeys(t.partitions, member_epoch)
    return out
