"""A classic consumer group: Kafka's GroupMetadata state machine, members, protocol choice and committed offsets."""

from __future__ import annotations

import enum
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence

from logway.coordinator.consumer_protocol import CONSUMER_PROTOCOL_TYPE, subscribed_topics
from logway.coordinator.member import MemberMetadata
from logway.coordinator.offsets_schema import OffsetCommitValue
from logway.coordinator.results import JoinGroupMember, JoinGroupResult, Respond, SyncGroupResult, TopicPartition
from logway.wire.errors import ErrorCode

__all__ = ["GroupMetadata", "GroupState", "IllegalGroupTransition"]


class GroupState(enum.Enum):
    """The classic protocol's group states; values are the names Kafka reports in DescribeGroups/ListGroups."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# Kafka's GroupState.validPreviousStates.
_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalGroupTransition(RuntimeError):
    """A coordinator bug: a state change Kafka's GroupMetadata forbids."""


class GroupMetadata:
    """Membership, generation, chosen protocol and committed offsets of one group."""

    def __init__(self, group_id: str, now_ms: int, state: GroupState = GroupState.EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.current_state_timestamp: int | None = now_ms
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}
        self.pending_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.num_members_awaiting_join = 0
        self.supported_protocols: Counter[str] = Counter()
        self.new_member_added = False
        self.subscribed_topics: frozenset[str] | None = None
        self.offsets: dict[TopicPartition, OffsetCommitValue] = {}

    # --- state -------------------------------------------------------------------------------

    def is_state(self, state: GroupState) -> bool:
        """True when the group is in ``state``."""
        return self.state is state

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        """Move to ``state``, remembering when (used by offset expiry of Empty groups)."""
        if self.state not in _VALID_PREVIOUS[state]:
            raise IllegalGroupTransition(f"group {self.group_id}: {self.state.value} -> {state.value}")
        self.state = state
        self.current_state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        """PreparingRebalance may be entered from the current state."""
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # --- members -----------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        """``member_id`` is a (non-pending) member."""
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        """The member with this id."""
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        """``member_id`` leads the group."""
        return self.leader_id == member_id

    def is_empty(self) -> bool:
        """No members."""
        return not self.members

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        """Kafka's member id: the group.instance.id (or client id), a dash and a random UUID."""
        return f"{group_instance_id if group_instance_id is not None else client_id}-{uuid.uuid4()}"

    def add(self, member: MemberMetadata, join_respond: Respond[JoinGroupResult] | None) -> None:
        """Add a member; the first one fixes the protocol type and leads until a rebalance says otherwise."""
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names)
        member.join_respond = join_respond
        if member.awaiting_join:
            self.num_members_awaiting_join += 1
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        """Remove a member (or pending member); the leadership passes to another member if it led."""
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(member.protocol_names)
            self.supported_protocols += Counter()  # drop zero counts
            if member.awaiting_join:
                self.num_members_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def update_member(
        self,
        member: MemberMetadata,
        protocols: Sequence[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        join_respond: Respond[JoinGroupResult] | None,
    ) -> None:
        """A known member rejoined: take its new protocols and timeouts and owe it a JoinGroup response."""
        self.supported_protocols.subtract(member.protocol_names)
        member.set_protocols(protocols)
        self.supported_protocols.update(member.protocol_names)
        self.supported_protocols += Counter()
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if join_respond is not None and not member.awaiting_join:
            self.num_members_awaiting_join += 1
        elif join_respond is None and member.awaiting_join:
            self.num_members_awaiting_join -= 1
        member.join_respond = join_respond

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str) -> MemberMetadata:
        """A static member came back with a new member id: fence the old id and keep its place (KIP-345)."""
        member = self.members.pop(old_member_id)
        # Fence a duplicate instance that is still waiting for a response under the old id.
        self.maybe_invoke_join(member, JoinGroupResult(ErrorCode.fenced_instance_id, member_id=old_member_id))
        self.maybe_invoke_sync(member, SyncGroupResult(ErrorCode.fenced_instance_id))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        if old_member_id in self.pending_sync_members:  # the SyncGroup is now owed under the new id
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        self.static_members[group_instance_id] = new_member_id
        return member

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        """The member id currently holding a group.instance.id."""
        return None if group_instance_id is None else self.static_members.get(group_instance_id)

    def is_static_member_fenced(self, group_instance_id: str | None, member_id: str) -> bool:
        """The instance id is held by a different member id (the caller is a stale duplicate)."""
        current = self.static_member_id(group_instance_id)
        return current is not None and current != member_id

    def maybe_invoke_join(self, member: MemberMetadata, result: JoinGroupResult) -> None:
        """Send the member its owed JoinGroup response, if any."""
        respond = member.join_respond
        if respond is not None:
            member.join_respond = None
            self.num_members_awaiting_join -= 1
            respond(result)

    def maybe_invoke_sync(self, member: MemberMetadata, result: SyncGroupResult) -> bool:
        """Send the member its owed SyncGroup response, if any; True when one was sent."""
        respond = member.sync_respond
        if respond is None:
            return False
        member.sync_respond = None
        respond(result)
        return True

    def has_all_members_joined(self) -> bool:
        """Every member has rejoined and no MEMBER_ID_REQUIRED member is still due back."""
        return len(self.members) == self.num_members_awaiting_join and not self.pending_members

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        """Members that have not sent JoinGroup in this rebalance."""
        return [m for m in self.members.values() if not m.awaiting_join]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did; False when nobody rejoined."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.awaiting_join:
                self.leader_id = member_id
                return True
        return False

    @property
    def rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout among members (Kafka waits for the slowest)."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # --- protocols ---------------------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, protocol_names: Iterable[str]) -> bool:
        """A joiner fits: same protocol type and at least one protocol every current member supports."""
        names = set(protocol_names)
        if not self.members:
            return bool(protocol_type) and bool(names)
        n = len(self.members)
        return self.protocol_type == protocol_type and any(self.supported_protocols[p] == n for p in names)

    def select_protocol(self) -> str:
        """Kafka's selectProtocol: each member votes its preferred protocol among those all support; most votes wins."""
        n = len(self.members)
        candidates = {p for p, count in self.supported_protocols.items() if count == n}
        votes = Counter(m.vote(candidates) for m in self.members.values())
        # Kafka breaks ties by hash-map order; we break them by first vote in member order, which is stable.
        return max(votes, key=lambda p: votes[p])

    def current_member_metadata(self) -> tuple[JoinGroupMember, ...]:
        """What the leader gets in its JoinGroup response: every member's metadata for the chosen protocol."""
        assert self.protocol_name is not None
        return tuple(
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        )

    def init_next_generation(self, now_ms: int) -> None:
        """Bump the generation: pick the protocol and go to CompletingRebalance, or to Empty with no members."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """Union of members' subscriptions for the consumer protocol; None when unknown (Kafka's computeSubscribedTopics)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            parsed = subscribed_topics(m.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Some member's subscription names ``topic`` (False when subscriptions are unknown, as in Kafka)."""
        return self.subscribed_topics is not None and topic in self.subscribed_topics

    # --- offsets -----------------------------------------------------------------------------

    def remove_expired_offsets(self, now_ms: int, retention_ms: int) -> list[TopicPartition]:
        """Drop and return offsets past retention under Kafka's GroupMetadata.removeExpiredOffsets rules."""
        if self.protocol_type is not None and self.is_state(GroupState.EMPTY):
            # Nobody in the group: retention counts from when it became Empty (or the commit, for old records).
            base_of = self._empty_base
            keep_topics: frozenset[str] = frozenset()
        elif (
            self.protocol_type == CONSUMER_PROTOCOL_TYPE
            and self.subscribed_topics is not None
            and self.is_state(GroupState.STABLE)
        ):
            # Active consumers: only offsets of topics nobody subscribes to expire, counted from the commit.
            base_of = self._commit_base
            keep_topics = self.subscribed_topics
        elif self.protocol_type is None:
            # Simple consumer using Kafka only for offset storage.
            base_of = self._commit_base
            keep_topics = frozenset()
        else:
            return []
        expired = [
            tp
            for tp, value in self.offsets.items()
            if tp[0] not in keep_topics
            and (
                now_ms >= value.expire_timestamp
                if value.expire_timestamp is not None
                else now_ms - base_of(value) >= retention_ms
            )
        ]
        for tp in expired:
            del self.offsets[tp]
        return expired

    def _empty_base(self, value: OffsetCommitValue) -> int:
        return self.current_state_timestamp if self.current_state_timestamp is not None else value.commit_timestamp

    @staticmethod
    def _commit_base(value: OffsetCommitValue) -> int:
        return value.commit_timestamp
