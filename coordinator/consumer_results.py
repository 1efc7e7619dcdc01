"""Inputs and results of the KIP-848 consumer group APIs (ConsumerGroupHeartbeat, ConsumerGroupDescribe).

The gateway maps these onto kio types per version, as ``results`` does for the classic APIs.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from logway.wire.errors import ErrorCode

__all__ = ["ConsumerHeartbeatRequest", "ConsumerHeartbeatResult", "DescribedConsumerGroup", "DescribedConsumerMember",
           "NamedAssignment"]

NamedAssignment = tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]
"""(topic id, topic name, partitions) per topic, as ConsumerGroupDescribe lists an assignment."""


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeatRequest:
    """A ConsumerGroupHeartbeat request's fields (None: "unchanged since the last heartbeat", as in the protocol).

    ``owned`` is the request's TopicPartitions (None when not sent). ``topic_filter`` tells which topics the
    member's principal may DESCRIBE: a regex subscription resolves only to those (Kafka's TopicRegexResolver).
    """

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: Sequence[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Mapping[uuid.UUID, Sequence[int]] | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1
    topic_filter: Callable[[str], bool] | None = None


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeatResult:
    """ConsumerGroupHeartbeat response fields; ``assignment`` None when the member's assignment is not sent."""

    error_code: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Mapping[uuid.UUID, tuple[int, ...]] | None = None


@dataclass(frozen=True, slots=True)
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: NamedAssignment
    target_assignment: NamedAssignment
    member_type: int  # 0: joined with the classic protocol, 1: with ConsumerGroupHeartbeat


@dataclass(frozen=True, slots=True)
class DescribedConsumerGroup:
    """One group of a ConsumerGroupDescribe answer; on an error only the id and the error are set."""

    group_id: str
    error_code: ErrorCode
    error_message: str | None = None
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedConsumerMember, ...] = ()
