"""A KIP-848 consumer group, sans-IO: members with their epochs, the target assignment, and the group state.

Kafka's ConsumerGroup and ConsumerGroupMember (group-coordinator ``modern/consumer``). The group changes only
by replaying the records ``consumer_group_store`` builds (the ``replay_*`` methods), the same way whether the
records were just written or are read back at load, so what is in memory is always what the log says.
Partitions are named by topic id, as in the protocol; an assignment maps a topic id to its partitions, and a
member's current assignment also keeps the epoch each partition was assigned at (Kafka 4.3, used to fence
commits from a member that lost a partition).
"""

from __future__ import annotations

import enum
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from logway.coordinator.consumer_group_records import (
    ClassicMemberMetadata,
    CurrentAssignmentValue,
    MemberMetadataValue,
    RegexValue,
    epochs_from_record,
    topic_partitions_with_epochs,
)
from logway.coordinator.offsets_schema import OffsetCommitValue
from logway.coordinator.results import TopicPartition
from logway.wire.errors import ErrorCode

__all__ = [
    "LEAVE_GROUP_MEMBER_EPOCH", "LEAVE_GROUP_STATIC_MEMBER_EPOCH", "Assignment", "ConsumerGroup",
    "ConsumerGroupMember", "ConsumerGroupState", "EpochAssignment", "MemberState", "ResolvedRegex",
]

E = ErrorCode
LEAVE_GROUP_MEMBER_EPOCH = -1  # ConsumerGroupHeartbeatRequest.LEAVE_GROUP_MEMBER_EPOCH
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2  # a static member leaves for now and will rejoin under its instance id

Assignment = Mapping[uuid.UUID, frozenset[int]]
"""Partitions by topic id (a target assignment)."""
EpochAssignment = Mapping[uuid.UUID, Mapping[int, int]]
"""Partitions by topic id, each with the epoch it was assigned at (a member's current assignment)."""


class MemberState(enum.IntEnum):
    """Kafka's MemberState, the value stored in ConsumerGroupCurrentMemberAssignmentValue.State."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1  # the member must revoke partitions before it gets new ones
    UNRELEASED_PARTITIONS = 2  # partitions of its target still owned by others
    UNKNOWN = 127


class ConsumerGroupState(enum.Enum):
    """The consumer group states, as DescribeGroups/ListGroups/ConsumerGroupDescribe name them."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True, eq=True)
class ConsumerGroupMember:
    """One member: what it subscribed to and its current assignment (Kafka's ConsumerGroupMember)."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    subscribed_topic_regex: str | None = ""  # Kafka's default: "" until a regex is sent
    server_assignor: str | None = None
    assigned: EpochAssignment = field(default_factory=dict)
    pending_revocation: EpochAssignment = field(default_factory=dict)
    classic: ClassicMemberMetadata | None = None

    __hash__ = None  # type: ignore[assignment]  # members hold dicts; compared, never hashed

    @property
    def uses_classic_protocol(self) -> bool:
        """The member joined with JoinGroup (KIP-848 migration) rather than ConsumerGroupHeartbeat."""
        return self.classic is not None

    @property
    def regex(self) -> str | None:
        """The subscribed regex, None when there is none (Kafka treats null and "" alike)."""
        return self.subscribed_topic_regex or None

    def is_reconciled_to(self, epoch: int) -> bool:
        """Stable at ``epoch`` (Kafka's isReconciledTo)."""
        return self.state is MemberState.STABLE and self.member_epoch == epoch

    def with_epoch(self, epoch: int) -> ConsumerGroupMember:
        """Move to ``epoch``, remembering the current one as the previous (Kafka's updateMemberEpoch)."""
        return replace(self, member_epoch=epoch, previous_member_epoch=self.member_epoch)

    def metadata_value(self) -> MemberMetadataValue:
        """The member's ConsumerGroupMemberMetadataValue (topic names sorted, as Kafka writes them)."""
        return MemberMetadataValue(
            instance_id=self.instance_id, rack_id=self.rack_id, client_id=self.client_id,
            client_host=self.client_host, subscribed_topic_names=tuple(sorted(self.subscribed_topic_names)),
            subscribed_topic_regex=self.subscribed_topic_regex, rebalance_timeout_ms=self.rebalance_timeout_ms,
            server_assignor=self.server_assignor, classic_member_metadata=self.classic)

    def assignment_value(self) -> CurrentAssignmentValue:
        """The member's ConsumerGroupCurrentMemberAssignmentValue."""
        return CurrentAssignmentValue(
            member_epoch=self.member_epoch, previous_member_epoch=self.previous_member_epoch, state=int(self.state),
            assigned_partitions=topic_partitions_with_epochs(self.assigned),
            partitions_pending_revocation=topic_partitions_with_epochs(self.pending_revocation))

    def assignment_epoch(self, topic_id: uuid.UUID, partition: int) -> int | None:
        """The epoch the partition was assigned at, if the member owns it or still revokes it."""
        epoch = self.assigned.get(topic_id, {}).get(partition)
        return self.pending_revocation.get(topic_id, {}).get(partition) if epoch is None else epoch


@dataclass(frozen=True, slots=True)
class ResolvedRegex:
    """The topics a regex matched, at which topics-image version and when (Kafka's ResolvedRegularExpression)."""

    topics: frozenset[str]
    version: int
    timestamp: int


class ConsumerGroup:
    """A consumer group's epochs, members, target assignment, resolved regexes and committed offsets."""

    group_type = "consumer"
    protocol_type = "consumer"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 1  # Kafka's ModernGroup starts at 1: the first member's join makes it 2
        self.metadata_hash = 0
        self.assignment_epoch = 0
        self.assignment_timestamp = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}
        self.target: dict[str, Assignment] = {}
        self.resolved_regexes: dict[str, ResolvedRegex] = {}
        self.offsets: dict[TopicPartition, OffsetCommitValue] = {}
        self._owner_epochs: dict[tuple[uuid.UUID, int], int] = {}
        self._target_owner: dict[tuple[uuid.UUID, int], str] = {}
        self._regex_members: Counter[str] = Counter()
        self._assignors: Counter[str] = Counter()
        self.has_records = False  # some record of this group is in the log (its deletion needs tombstones)
        self.regex_refreshed_at = 0  # when the regexes were last resolved again (in memory only, as in Kafka)
        self._subscribed: frozenset[str] | None = None

    # --- state --------------------------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        """Kafka's maybeUpdateGroupState, computed when asked."""
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def is_empty(self) -> bool:
        """No members (offsets may remain)."""
        return not self.members

    def member(self, member_id: str) -> ConsumerGroupMember | None:
        return self.members.get(member_id)

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        """The member holding ``instance_id``."""
        member_id = None if instance_id is None else self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """The epoch of the member owning the partition (assigned or still revoking), -1 when it is free."""
        return self._owner_epochs.get((topic_id, partition), -1)

    def target_of(self, member_id: str) -> Assignment:
        return self.target.get(member_id, {})

    def target_owner(self, topic_id: uuid.UUID, partition: int) -> str | None:
        """The member whose target holds the partition (Kafka's invertedTargetAssignment)."""
        return self._target_owner.get((topic_id, partition))

    def num_regex_members(self, regex: str) -> int:
        return self._regex_members[regex]

    def subscribed_regexes(self) -> Counter[str]:
        return Counter(self._regex_members)

    def preferred_assignor(self, default: str) -> str:
        """The server assignor most members asked for (Kafka's preferredServerAssignor), else ``default``."""
        return self._assignors.most_common(1)[0][0] if self._assignors else default

    def subscribed_topics(self) -> frozenset[str]:
        """Topic names the members subscribe to by name or through a resolved regex (Kafka's
        subscribedTopicNames keys); kept until a member or a regex changes, so a heartbeat does not walk every
        member."""
        if self._subscribed is None:
            topics: set[str] = set()
            for m in self.members.values():
                topics |= self.member_topics(m)
            self._subscribed = frozenset(topics)
        return self._subscribed

    def member_topics(self, member: ConsumerGroupMember) -> frozenset[str]:
        """The topics one member subscribes to: its names and what its regex resolved to (unresolved: none)."""
        resolved = self.resolved_regexes.get(member.regex or "")
        return member.subscribed_topic_names | (resolved.topics if member.regex and resolved else frozenset())

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscribed_topics()

    # --- replay (the only way the group changes) ----------------------------------------------------------

    def replay_epoch(self, epoch: int, metadata_hash: int) -> None:
        self.group_epoch, self.metadata_hash = epoch, metadata_hash
        self.has_records = True

    def replay_member_metadata(self, member_id: str, value: MemberMetadataValue | None) -> None:
        """ConsumerGroupMemberMetadataValue: create or update the member; a tombstone removes it."""
        old = self.members.get(member_id)
        if value is None:
            if old is not None:
                self._put(old, None)
            return
        base = old or ConsumerGroupMember(member_id)
        self._put(old, replace(
            base, instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
            client_host=value.client_host, subscribed_topic_names=frozenset(value.subscribed_topic_names),
            subscribed_topic_regex=value.subscribed_topic_regex, rebalance_timeout_ms=value.rebalance_timeout_ms,
            server_assignor=value.server_assignor, classic=value.classic_member_metadata))
        self.has_records = True

    def replay_current_assignment(self, member_id: str, value: CurrentAssignmentValue | None) -> None:
        """ConsumerGroupCurrentMemberAssignmentValue; a tombstone leaves the member at epoch -1, owning nothing."""
        old = self.members.get(member_id)
        if value is None:
            if old is not None:
                self._put(old, replace(old, member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                       previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH, assigned={},
                                       pending_revocation={}))
            return
        base = old or ConsumerGroupMember(member_id)
        state = value.state if value.state in MemberState._value2member_map_ else MemberState.UNKNOWN
        self._put(old, replace(
            base, member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
            state=MemberState(state),
            assigned=epochs_from_record(value.assigned_partitions, value.member_epoch),
            pending_revocation=epochs_from_record(value.partitions_pending_revocation, value.member_epoch)))

    def replay_target(self, member_id: str, assignment: Assignment | None) -> None:
        """ConsumerGroupTargetAssignmentMemberValue (None: its tombstone)."""
        old = self.target.pop(member_id, {})
        for topic_id, parts in old.items():
            for p in parts:
                if self._target_owner.get((topic_id, p)) == member_id:
                    del self._target_owner[(topic_id, p)]
        if assignment is not None:
            self.target[member_id] = assignment
            for topic_id, parts in assignment.items():
                for p in parts:
                    self._target_owner[(topic_id, p)] = member_id

    def replay_target_metadata(self, epoch: int, timestamp: int) -> None:
        self.assignment_epoch, self.assignment_timestamp = epoch, timestamp

    def replay_regex(self, regex: str, value: RegexValue | None) -> None:
        self._subscribed = None
        if value is None:
            self.resolved_regexes.pop(regex, None)
        else:
            self.resolved_regexes[regex] = ResolvedRegex(frozenset(value.topics), value.version, value.timestamp)

    def _put(self, old: ConsumerGroupMember | None, new: ConsumerGroupMember | None) -> None:
        """Swap a member, keeping the owner epochs, static members and the regex/assignor counts in step."""
        self._subscribed = None
        if old is not None:
            self._count(old, -1)
            self._own(old, remove=True)
            if old.instance_id is not None and self.static_members.get(old.instance_id) == old.member_id:
                del self.static_members[old.instance_id]
            del self.members[old.member_id]
        if new is not None:
            self.members[new.member_id] = new
            self._count(new, 1)
            self._own(new, remove=False)
            if new.instance_id is not None:
                self.static_members[new.instance_id] = new.member_id

    def _count(self, member: ConsumerGroupMember, delta: int) -> None:
        for counter, key in ((self._regex_members, member.regex), (self._assignors, member.server_assignor)):
            if key:
                counter[key] += delta
                if counter[key] <= 0:
                    del counter[key]

    def _own(self, member: ConsumerGroupMember, *, remove: bool) -> None:
        """Kafka's add/removePartitionEpochs: a partition is owned at its owner's member epoch."""
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, parts in assignment.items():
                for p in parts:
                    key = (topic_id, p)
                    if not remove:
                        self._owner_epochs[key] = member.member_epoch
                    elif self._owner_epochs.get(key) == member.member_epoch:
                        del self._owner_epochs[key]

    # --- offsets (Kafka's ConsumerGroup.validateOffsetCommit / validateOffsetFetch) ------------------------

    def validate_offset_commit(
        self, member_id: str, instance_id: str | None, epoch: int, *, transactional: bool, api_version: int,
    ) -> tuple[ErrorCode | None, Callable[[uuid.UUID | None, int], ErrorCode | None] | None]:
        """(error for the whole commit, or None and a per-partition check (None: every partition may commit))."""
        if epoch < 0 and not self.members:
            return None, None  # an admin client or a consumer without group management, into an Empty group
        if transactional and epoch == -1 and member_id == "" and instance_id is None:
            return None, None  # TxnOffsetCommit without the consumer's group metadata
        member = self.members.get(member_id)
        if member is None:
            return E.unknown_member_id, None
        if not transactional and not member.uses_classic_protocol and api_version < 9:
            return E.unsupported_version, None  # consumer-protocol members commit with OffsetCommit v9+
        stale = E.illegal_generation if member.uses_classic_protocol else E.stale_member_epoch
        if epoch == member.member_epoch:
            return None, None
        if epoch > member.member_epoch:
            return stale, None

        def check(topic_id: uuid.UUID | None, partition: int) -> ErrorCode | None:
            # An older epoch may still commit a partition it was assigned at or before that epoch.
            assigned_at = None if topic_id is None else member.assignment_epoch(topic_id, partition)
            return stale if assigned_at is None or epoch < assigned_at else None
        return None, check

    def validate_offset_fetch(self, member_id: str | None, epoch: int) -> ErrorCode | None:
        """OffsetFetch v9+ from a member must carry its current epoch; without a member id anyone may fetch."""
        if member_id is None and epoch < 0:
            return None
        member = self.members.get(member_id or "")
        if member is None:
            return E.unknown_member_id
        if epoch != member.member_epoch:
            return E.illegal_generation if member.uses_classic_protocol else E.stale_member_epoch
        return None

    def remove_expired_offsets(self, now_ms: int, retention_ms: int) -> list[TopicPartition]:
        """Offsets of topics nobody subscribes to expire ``retention_ms`` after their commit (Kafka's
        OffsetExpirationConditionImpl on the commit timestamp for consumer groups)."""
        subscribed = self.subscribed_topics()
        expired = [
            tp for tp, value in self.offsets.items()
            if tp[0] not in subscribed and (
                now_ms >= value.expire_timestamp if value.expire_timestamp is not None
                else now_ms - value.commit_timestamp >= retention_ms)
        ]
        for tp in expired:
            del self.offsets[tp]
        return expired
