"""Classic and KIP-848 members in one group, and the online migration between the two protocols, sans-IO.

Kafka 4's GroupMetadataManager with ``group.consumer.migration.policy`` (bidirectional by default):
- upgrade: a ConsumerGroupHeartbeat to a classic group of the consumer protocol converts it to a consumer group
  (Kafka's convertToConsumerGroup): every classic member becomes a member of it at the group's generation, with
  the partitions of its last assignment;
- classic members in a consumer group: JoinGroup answers at once with the member epoch as the generation and
  no leader (the coordinator assigns), SyncGroup hands out the member's current assignment, Heartbeat says
  REBALANCE_IN_PROGRESS when the member must rejoin to move on, LeaveGroup fences;
- downgrade: when the last member using ConsumerGroupHeartbeat leaves and classic members remain, the group
  becomes a classic group again (convertToClassicGroup) and rebalances.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace

from logway.coordinator.consumer_group import ConsumerGroup, ConsumerGroupMember, MemberState
from logway.coordinator.consumer_group_records import ClassicMemberMetadata, ClassicProtocol
from logway.coordinator.consumer_group_store import (
    GroupRecord,
    assignment_record,
    epoch_record,
    group_tombstones,
    member_metadata_record,
    target_metadata_record,
    target_record,
)
from logway.coordinator.consumer_membership import ConsumerMembership, GroupError, MemberChange, new_member_id
from logway.coordinator.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    encode_assignment,
    parse_assignment,
    parse_subscription,
    version_of,
)
from logway.coordinator.group import GroupMetadata, GroupState
from logway.coordinator.group_cache import GroupCache
from logway.coordinator.group_config import GroupConfig
from logway.coordinator.group_store import group_record, group_tombstone
from logway.coordinator.member import MemberMetadata
from logway.coordinator.membership import Membership
from logway.coordinator.results import (
    HeartbeatResult,
    JoinGroupRequest,
    JoinGroupResult,
    LeaveGroupResult,
    LeaveMemberResult,
    MemberIdentity,
    Respond,
    SyncGroupResult,
)
from logway.coordinator.timers import Timers
from logway.coordinator.topics_image import TopicsImage
from logway.wire.errors import ErrorCode

__all__ = ["GroupMigration"]

log = logging.getLogger(__name__)
E = ErrorCode
_UPGRADES = ("bidirectional", "upgrade")
_DOWNGRADES = ("bidirectional", "downgrade")


class GroupMigration:
    """Classic requests to consumer groups and the conversions between the group types."""

    def __init__(self, cache: GroupCache, timers: Timers, config: GroupConfig, topics: TopicsImage,
                 consumers: ConsumerMembership, classic: Membership) -> None:
        self._cache, self._timers, self._config, self._topics = cache, timers, config, topics
        self._consumers, self._classic = consumers, classic
        consumers.upgrade = self.upgrade
        consumers.downgrade = self.downgrade
        consumers.extra_timers = ("consumer-join", "consumer-sync")

    # --- routing: classic requests for a group id that is a consumer group ----------------------------------

    def consumer_group(self, group_id: str | None, *, joining: bool = False) -> ConsumerGroup | None:
        """The consumer group a classic request goes to (a JoinGroup only when it has members: an empty one
        becomes a classic group instead)."""
        if group_id is None or self._cache.validate_group_status(group_id) is not None:
            return None
        group = self._cache.consumer(group_id)
        if group is None or (joining and group.is_empty()):
            return None
        return group

    # --- conversions --------------------------------------------------------------------------------------

    def upgrade(self, classic: GroupMetadata, now_ms: int) -> ConsumerGroup:
        """Kafka's validateOnlineUpgrade + convertToConsumerGroup; GroupError (GROUP_ID_NOT_FOUND) when it cannot."""
        gid = classic.group_id
        if self._config.consumer_migration_policy not in _UPGRADES:
            raise GroupError(E.group_id_not_found, f"Cannot upgrade classic group {gid} to consumer group because "
                             "online upgrade is disabled.")
        if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
            raise GroupError(E.group_id_not_found, f"Cannot upgrade classic group {gid} to consumer group because "
                             "the group does not use the consumer embedded protocol.")
        if len(classic.members) > self._config.consumer_max_size:
            raise GroupError(E.group_id_not_found, f"Cannot upgrade classic group {gid} to consumer group because "
                             "the group size exceeds the consumer group maximum size.")
        members = [self._member_from_classic(classic, m) for m in classic.members.values()]
        generation = classic.generation_id
        records: list[GroupRecord] = [member_metadata_record(gid, m) for m in members]
        topics = {t for m in members for t in m.subscribed_topic_names}
        records.append(epoch_record(gid, generation, self._consumers.metadata_hash(topics)))
        records += [target_record(gid, m.member_id, {t: frozenset(p) for t, p in m.assigned.items()}) for m in members]
        records.append(target_metadata_record(gid, generation, 0))
        records += [assignment_record(gid, m) for m in members]
        encoded = [group_tombstone(gid), *(r.encode() for r in records)]
        error = self._cache.append(self._cache.partition_for(gid), encoded, now_ms, E.unknown_server_error)
        if error != E.none:
            raise GroupError(error)
        self._classic.hand_over(classic)
        group = self._consumers.install(ConsumerGroup(gid), records, replacing=classic)
        for member in group.members.values():
            self._consumers.schedule_session(gid, member, now_ms)
        log.info("[GroupId %s] Converted the classic group to a consumer group.", gid)
        return group

    def _member_from_classic(self, classic: GroupMetadata, m: MemberMetadata) -> ConsumerGroupMember:
        """A classic member as a consumer group member (Kafka's ConsumerGroup.fromClassicGroup)."""
        gid, generation = classic.group_id, classic.generation_id
        subscription = parse_subscription(m.metadata(classic.protocol_name)) if classic.protocol_name else None
        assignment = parse_assignment(m.assignment)
        if subscription is None or assignment is None:
            raise GroupError(E.group_id_not_found, f"Cannot upgrade classic group {gid} to consumer group because the "
                             "embedded consumer protocol is malformed.")
        if assignment[1]:
            raise GroupError(E.group_id_not_found, f"Cannot upgrade classic group {gid} to consumer group because an "
                             "unsupported custom assignor is in use.")
        return ConsumerGroupMember(
            m.member_id, member_epoch=generation, previous_member_epoch=generation, state=MemberState.STABLE,
            instance_id=m.group_instance_id, rack_id=subscription.rack_id, rebalance_timeout_ms=m.rebalance_timeout_ms,
            client_id=m.client_id, client_host=m.client_host, subscribed_topic_names=frozenset(subscription.topics),
            assigned={tid: dict.fromkeys(parts, generation) for tid, parts in self._by_id(assignment[0]).items()},
            classic=_classic_metadata(m.session_timeout_ms, m.protocols))

    def downgrade(self, group: ConsumerGroup, leaving: set[str], now_ms: int) -> bool:
        """When only classic members would remain: the group becomes a classic group and rebalances (Kafka's
        validateOnlineDowngradeWithFencedMembers + convertToClassicGroup). False when it stays a consumer group."""
        remaining = [m for mid, m in group.members.items() if mid not in leaving]
        if (not remaining or any(not m.uses_classic_protocol for m in remaining)
                or self._config.consumer_migration_policy not in _DOWNGRADES
                or len(remaining) > self._config.group_max_size):
            return False
        classic = GroupMetadata(group.group_id, now_ms, GroupState.STABLE)
        classic.generation_id = group.group_epoch
        for m in remaining:
            protocols = [(p.name, p.metadata) for p in m.classic.supported_protocols]  # type: ignore[union-attr]
            classic.add(MemberMetadata(
                m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                m.classic.session_timeout_ms, CONSUMER_PROTOCOL_TYPE, protocols), None)  # type: ignore[union-attr]
        classic.protocol_name = classic.select_protocol()
        classic.subscribed_topics = classic.compute_subscribed_topics()
        assignments = {m.member_id: self._classic_assignment(m, group.target_of(m.member_id)) for m in remaining}
        for member in classic.members.values():
            member.assignment = assignments[member.member_id]
        encoded = [*(r.encode() for r in group_tombstones(group)), group_record(classic, assignments)]
        if self._cache.append(self._cache.partition_for(group.group_id), encoded, now_ms, E.unknown_server_error) != E.none:
            return False
        for member_id in group.members:
            self._consumers.cancel_timers(group.group_id, member_id)
        self._cache.replace_consumer_by(group, classic)
        self._classic.take_over(classic, now_ms)
        log.info("[GroupId %s] Converted the consumer group to a classic group.", group.group_id)
        return True

    # --- classic requests to consumer groups --------------------------------------------------------------

    def join(self, group: ConsumerGroup, request: JoinGroupRequest, *, now_ms: int,
             respond: Respond[JoinGroupResult]) -> None:
        """Kafka's classicGroupJoinToConsumerGroup: answered at once, the member epoch as the generation."""
        try:
            result = self._join(group, request, now_ms)
        except GroupError as exc:
            result = JoinGroupResult(exc.code, member_id=request.member_id)
        respond(result)

    def _join(self, group: ConsumerGroup, request: JoinGroupRequest, now_ms: int) -> JoinGroupResult:
        if self._config.consumer_migration_policy == "disabled":
            raise GroupError(E.inconsistent_group_protocol, f"Cannot join the consumer group {group.group_id} with "
                             "the classic protocol because the group migration is disabled.")
        unknown = request.member_id == ""
        member_id = new_member_id() if unknown else request.member_id
        self._consumers.check_size(group, member_id)
        names = [name for name, _ in request.protocols]
        if not _supports(group, request.protocol_type, names) or not request.protocols:
            raise GroupError(E.inconsistent_group_protocol, f"Member {member_id}'s protocols are not supported.")
        if unknown and request.require_known_member_id and request.group_instance_id is None:
            return JoinGroupResult(E.member_id_required, member_id=member_id)
        subscription = parse_subscription(bytes(request.protocols[0][1]))
        if subscription is None:
            raise GroupError(E.inconsistent_group_protocol, f"Member {member_id}'s subscription cannot be read.")
        records: list[GroupRecord] = []
        replaced = None
        if request.group_instance_id is None:
            member = group.member(member_id) or ConsumerGroupMember(member_id)
        else:
            member, replaced = self._consumers.static_member(
                group, member_id, request.group_instance_id, -1, {}, joining=unknown, records=records, classic=True)
        updated = replace(
            member, instance_id=request.group_instance_id or member.instance_id,
            rack_id=subscription.rack_id or member.rack_id, rebalance_timeout_ms=request.rebalance_timeout_ms,
            subscribed_topic_names=frozenset(subscription.topics), subscribed_topic_regex="",
            client_id=request.client_id, client_host=request.client_host,
            classic=_classic_metadata(request.session_timeout_ms, request.protocols))
        change = MemberChange(group, member, updated, records, replaced)
        reconciled = self._consumers.apply(change, owned=self._by_id(subscription.owned), topic_filter=None,
                                           now_ms=now_ms)
        gid = group.group_id
        self._timers.cancel(("consumer-join", gid, reconciled.member_id))
        self._schedule_fence(("consumer-sync", gid, reconciled.member_id), reconciled, now_ms,
                             "it failed to sync within its rebalance timeout")
        return JoinGroupResult(E.none, member_id=reconciled.member_id, generation_id=reconciled.member_epoch,
                               protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=request.protocols[0][0])

    def sync(self, group: ConsumerGroup, generation_id: int, member_id: str, group_instance_id: str | None, *,
             protocol_type: str | None = None, protocol_name: str | None = None, now_ms: int,
             respond: Respond[SyncGroupResult]) -> None:
        """Kafka's classicGroupSyncToConsumerGroup: the member's current assignment, in its protocol's version."""
        try:
            member = self._classic_member(group, member_id, group_instance_id, generation_id)
            ours = member.classic.supported_protocols[0].name  # type: ignore[union-attr]
            if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or (
                    protocol_name is not None and protocol_name != ours):
                raise GroupError(E.inconsistent_group_protocol)
            self._rejoin_if_behind(group, member, now_ms)
        except GroupError as exc:
            respond(SyncGroupResult(exc.code))
            return
        self._timers.cancel(("consumer-sync", group.group_id, member.member_id))
        self._consumers.schedule_session(group.group_id, member, now_ms)
        respond(SyncGroupResult(E.none, protocol_type, protocol_name, self._classic_assignment(member, None)))

    def heartbeat(self, group: ConsumerGroup, member_id: str, group_instance_id: str | None, generation_id: int, *,
                  now_ms: int, respond: Respond[HeartbeatResult]) -> None:
        """Kafka's classicGroupHeartbeatToConsumerGroup: REBALANCE_IN_PROGRESS tells the member to rejoin."""
        try:
            member = self._classic_member(group, member_id, group_instance_id, generation_id)
        except GroupError as exc:
            respond(HeartbeatResult(exc.code))
            return
        self._consumers.schedule_session(group.group_id, member, now_ms)
        behind = member.member_epoch < group.assignment_epoch or member.state is MemberState.UNREVOKED_PARTITIONS or (
            member.state is MemberState.UNRELEASED_PARTITIONS and not _waiting_on_unreleased(group, member))
        if behind:
            self._schedule_join_timeout(group.group_id, member, now_ms)
        respond(HeartbeatResult(E.rebalance_in_progress if behind else E.none))

    def leave(self, group: ConsumerGroup, members: Sequence[MemberIdentity], *, now_ms: int,
              respond: Respond[LeaveGroupResult]) -> None:
        """Kafka's classicGroupLeaveToConsumerGroup: the members found are fenced together (maybe downgrading)."""
        results, leaving = [], []
        for identity in members:
            member, error = _leaving_member(group, identity)
            results.append(LeaveMemberResult(identity.member_id, identity.group_instance_id, error))
            if member is not None and member not in leaving:
                leaving.append(member)
        if leaving:
            try:
                self._consumers.fence(group, leaving, now_ms)
            except GroupError as exc:
                respond(LeaveGroupResult(exc.code))
                return
        respond(LeaveGroupResult(E.none, tuple(results)))

    # --- helpers ------------------------------------------------------------------------------------------

    def _classic_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
                        generation_id: int) -> ConsumerGroupMember:
        """Kafka's validateConsumerGroupMember + throwIfMemberDoesNotUseClassicProtocol + generation check."""
        if instance_id is None:
            member = group.member(member_id)
        else:
            member = group.static_member(instance_id)
            if member is not None and member.member_id != member_id:
                raise GroupError(E.fenced_instance_id)
        if member is None or not member.uses_classic_protocol:
            raise GroupError(E.unknown_member_id)
        if generation_id != member.member_epoch:
            raise GroupError(E.illegal_generation)
        return member

    def _rejoin_if_behind(self, group: ConsumerGroup, member: ConsumerGroupMember, now_ms: int) -> None:
        """Kafka's throwIfRebalanceInProgress."""
        if group.assignment_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            self._schedule_join_timeout(group.group_id, member, now_ms)
            raise GroupError(E.rebalance_in_progress)

    def _schedule_join_timeout(self, group_id: str, member: ConsumerGroupMember, now_ms: int) -> None:
        key = ("consumer-join", group_id, member.member_id)
        if key not in self._timers:
            self._schedule_fence(key, member, now_ms, "it failed to rejoin within its rebalance timeout")

    def _schedule_fence(self, key: tuple, member: ConsumerGroupMember, now_ms: int, reason: str) -> None:
        group_id, member_id = key[1], key[2]
        self._timers.set(key, now_ms + max(member.rebalance_timeout_ms, 0),
                         lambda now: self._consumers.fence_on_timer(group_id, member_id, now, reason))

    def _by_id(self, partitions: Mapping[str, Sequence[int]]) -> dict[uuid.UUID, tuple[int, ...]]:
        """Partitions by topic name to partitions by topic id (topics that no longer exist are left out)."""
        out = {}
        for name, parts in partitions.items():
            topic_id = self._topics.topic_id(name)
            if topic_id is not None and parts:
                out[topic_id] = tuple(parts)
        return out

    def _classic_assignment(self, member: ConsumerGroupMember, target: Mapping | None) -> bytes:
        """A ConsumerProtocolAssignment of the member's partitions (or of ``target``), in the version of its
        subscription (Kafka's prepareAssignment)."""
        source = member.assigned if target is None else target
        by_name: dict[str, list[int]] = {}
        for topic_id, parts in source.items():
            name = self._topics.topic_name(topic_id)
            if name is not None:
                by_name[name] = sorted(parts)
        metadata = member.classic.supported_protocols[0].metadata if member.classic else b""
        return encode_assignment(by_name, version_of(metadata) or 0)


def _classic_metadata(session_timeout_ms: int, protocols: Sequence[tuple[str, bytes]]) -> ClassicMemberMetadata:
    return ClassicMemberMetadata(session_timeout_ms=session_timeout_ms, supported_protocols=tuple(
        ClassicProtocol(name=name, metadata=bytes(metadata)) for name, metadata in protocols))


def _supports(group: ConsumerGroup, protocol_type: str, names: Sequence[str]) -> bool:
    """Kafka's ConsumerGroup.supportsClassicProtocols: the consumer protocol, and a protocol every classic member
    of the group supports."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE:
        return False
    classic = [m for m in group.members.values() if m.uses_classic_protocol]
    if not classic:
        return bool(names)
    return any(all(any(p.name == name for p in m.classic.supported_protocols) for m in classic)  # type: ignore[union-attr]
               for name in names)


def _waiting_on_unreleased(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """Kafka's waitingOnUnreleasedPartition: a partition of its target is still owned by another member."""
    for topic_id, parts in group.target_of(member.member_id).items():
        mine = member.assigned.get(topic_id, {})
        if any(p not in mine and group.current_partition_epoch(topic_id, p) != -1 for p in parts):
            return True
    return False


def _leaving_member(group: ConsumerGroup, identity: MemberIdentity) -> tuple[ConsumerGroupMember | None, ErrorCode]:
    if identity.group_instance_id is None:
        member = group.member(identity.member_id)
        return (member, E.none) if member is not None else (None, E.unknown_member_id)
    member = group.static_member(identity.group_instance_id)
    if member is None:
        return None, E.unknown_member_id
    if identity.member_id and identity.member_id != member.member_id:
        return None, E.fenced_instance_id
    return member, E.none

