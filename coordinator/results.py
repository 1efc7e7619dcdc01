"""Request inputs and the results the coordinator hands to ``respond`` callbacks, one small type per Kafka API.

The gateway maps these onto kio response types per version; they carry exactly what those responses need.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from logway.wire.errors import ErrorCode

__all__ = [
    "CommitOffset",
    "DeleteGroupsResult",
    "DescribedGroup",
    "DescribedMember",
    "DescribeGroupsResult",
    "HeartbeatResult",
    "JoinGroupMember",
    "JoinGroupRequest",
    "JoinGroupResult",
    "LeaveGroupResult",
    "LeaveMemberResult",
    "ListedGroup",
    "ListGroupsResult",
    "MemberIdentity",
    "OffsetCommitResult",
    "OffsetDeleteResult",
    "OffsetFetchResult",
    "FetchedOffset",
    "Respond",
    "SyncGroupResult",
    "TopicPartition",
]

TopicPartition = tuple[str, int]
"""(topic, partition)."""

R = TypeVar("R")
Respond = Callable[[R], None]
"""Called by the coordinator exactly once per request, now or later (inside another call or ``tick``)."""


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    """A JoinGroup request's fields. ``require_known_member_id`` is v4+ (KIP-394), ``support_skip_assignment`` v9+.

    For v0 pass the session timeout as the rebalance timeout, as Kafka's JoinGroupRequest does.
    """

    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: Sequence[tuple[str, bytes]]
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    require_known_member_id: bool
    support_skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class JoinGroupMember:
    """A member as the leader sees it in its JoinGroup response: id, instance id, metadata for the chosen protocol."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResult:
    """JoinGroup response fields. ``members`` is non-empty only for the leader."""

    error_code: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinGroupMember, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncGroupResult:
    """SyncGroup response fields: this member's assignment from the leader."""

    error_code: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """Heartbeat response: REBALANCE_IN_PROGRESS tells the member to rejoin."""

    error_code: ErrorCode


@dataclass(frozen=True, slots=True)
class MemberIdentity:
    """A member named in a LeaveGroup request (v3+ may name it by group.instance.id with an empty member id)."""

    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveMemberResult:
    """Per-member LeaveGroup outcome (v3+)."""

    member_id: str
    group_instance_id: str | None
    error_code: ErrorCode


@dataclass(frozen=True, slots=True)
class LeaveGroupResult:
    """LeaveGroup response. For v0-v2 Kafka answers the first member error when the top-level error is NONE."""

    error_code: ErrorCode
    members: tuple[LeaveMemberResult, ...] = ()

    @property
    def legacy_error_code(self) -> ErrorCode:
        """The single error code of LeaveGroup v0-v2 (Kafka's LeaveGroupResponse.getError)."""
        if self.error_code != ErrorCode.none:
            return self.error_code
        for m in self.members:
            if m.error_code != ErrorCode.none:
                return m.error_code
        return ErrorCode.none


@dataclass(frozen=True, slots=True)
class CommitOffset:
    """One partition of an OffsetCommit request. ``commit_timestamp`` is v1's explicit timestamp (None: now)."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    commit_timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class OffsetCommitResult:
    """Per-partition OffsetCommit errors, in request order."""

    partitions: dict[TopicPartition, ErrorCode]


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    """A committed offset as OffsetFetch returns it; offset -1 and metadata "" when nothing is committed."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    error_code: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True)
class OffsetFetchResult:
    """OffsetFetch response for one group (v8+ batches are a loop over groups)."""

    error_code: ErrorCode
    partitions: tuple[FetchedOffset, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribedMember:
    """A member in DescribeGroups: metadata/assignment are empty unless the group is Stable."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    """One group in DescribeGroups. On an error every field is empty (Kafka's DescribeGroupsResponse.groupError)."""

    group_id: str
    error_code: ErrorCode
    state: str = ""
    protocol_type: str = ""
    protocol: str = ""
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribeGroupsResult:
    """DescribeGroups response, groups in request order."""

    groups: tuple[DescribedGroup, ...]


@dataclass(frozen=True, slots=True)
class ListedGroup:
    """One group in ListGroups; ``group_type`` (v5, KIP-848) is "classic" or "consumer"."""

    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


@dataclass(frozen=True, slots=True)
class ListGroupsResult:
    """ListGroups response; COORDINATOR_LOAD_IN_PROGRESS while any partition loads, with the groups known so far."""

    error_code: ErrorCode
    groups: tuple[ListedGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class DeleteGroupsResult:
    """Per-group DeleteGroups errors, in request order."""

    groups: dict[str, ErrorCode]


@dataclass(frozen=True, slots=True)
class OffsetDeleteResult:
    """OffsetDelete response: a group error, or per-partition errors."""

    error_code: ErrorCode
    partitions: dict[TopicPartition, ErrorCode] = field(default_factory=dict)
