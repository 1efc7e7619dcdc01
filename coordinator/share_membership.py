"""KIP-932 ShareGroupHeartbeat and ShareGroupDescribe: share group membership, sans-IO.

Kafka's GroupMetadataManager.shareGroupHeartbeat: a member joins (epoch 0) with the topics it subscribes to,
the group epoch moves when a subscription or the subscribed topics change, the ``simple`` share assignor gives
each partition to one or more members, and a member takes its target at once (nothing to revoke: records, not
partitions, are what members hold). A member that leaves or stays silent for ``group.share.session.timeout.ms``
is fenced, and the records it had acquired are released (``member_left``, which the share partitions follow).
Everything is written to ``__consumer_offsets`` with Kafka's share group record schemas before it is answered.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from logway.coordinator.assignors import MemberSpec, share_assign
from logway.coordinator.consumer_group_store import GroupRecord
from logway.coordinator.consumer_membership import GroupError, metadata_hash
from logway.coordinator.consumer_results import (
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResult,
    DescribedConsumerGroup,
    DescribedConsumerMember,
)
from logway.coordinator.group_cache import GroupCache
from logway.coordinator.group_config import GroupConfig
from logway.coordinator.results import Respond
from logway.coordinator.share_group import (
    ShareGroup,
    ShareGroupMember,
    assignment_record,
    epoch_record,
    member_record,
    member_tombstones,
    replay,
    target_metadata_record,
    target_record,
)
from logway.coordinator.timers import Timers
from logway.coordinator.topics_image import TopicsImage
from logway.wire.errors import ErrorCode

__all__ = ["ShareMembership"]

log = logging.getLogger(__name__)
E = ErrorCode
SHARE_ASSIGNOR = "simple"


class ShareMembership:
    """The share groups of a ``GroupCache``: heartbeats, descriptions and the session timers that fence."""

    def __init__(self, cache: GroupCache, timers: Timers, config: GroupConfig, topics: TopicsImage) -> None:
        self._cache, self._timers, self._config, self._topics = cache, timers, config, topics
        self.member_left: Callable[[str, str], None] | None = None  # (group id, member id): release its records

    def start_sessions(self, group: ShareGroup, now_ms: int) -> None:
        for member_id in group.members:
            self._schedule_session(group.group_id, member_id, now_ms)

    # --- ShareGroupHeartbeat ------------------------------------------------------------------------------

    def heartbeat(self, request: ConsumerHeartbeatRequest, *, now_ms: int,
                  respond: Respond[ConsumerHeartbeatResult]) -> None:
        """ShareGroupHeartbeat v1 (the request's consumer-group fields that share groups do not have are unused)."""
        try:
            _validate(request)
            status = self._cache.validate_group_status(request.group_id)
            if status is not None:
                raise GroupError(status)
            if request.member_epoch == -1:
                result = self._leave(request, now_ms)
            else:
                result = self._heartbeat(request, now_ms)
        except GroupError as exc:
            result = ConsumerHeartbeatResult(exc.code, exc.message)
        respond(result)

    def _heartbeat(self, request: ConsumerHeartbeatRequest, now_ms: int) -> ConsumerHeartbeatResult:
        group = self._group_for(request.group_id, create=request.member_epoch == 0)
        member_id = request.member_id
        if len(group.members) >= self._config.share_max_size and member_id not in group.members:
            raise GroupError(E.group_max_size_reached, "The share group has reached its maximum capacity of "
                             f"{self._config.share_max_size} members.")
        member = self._member(group, member_id, request.member_epoch)
        updated = replace(
            member, rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            subscribed_topic_names=member.subscribed_topic_names if request.subscribed_topic_names is None
            else frozenset(request.subscribed_topic_names),
            client_id=request.client_id, client_host=request.client_host)
        records: list[GroupRecord] = []
        changed = False
        if updated != member:
            records.append(member_record(group.group_id, updated))
            changed = updated.subscribed_topic_names != member.subscribed_topic_names
        members = {**group.members, member_id: updated}
        epoch = self._maybe_bump_epoch(group, members, changed, records)
        target_epoch, target = self._maybe_update_target(group, members, epoch, updated, records, now_ms)
        reconciled = updated
        if changed or updated.member_epoch != target_epoch or updated.assigned != target:
            subscribed = self._topic_ids(updated.subscribed_topic_names)
            assigned = {t: p for t, p in target.items() if t in subscribed}
            reconciled = replace(updated, member_epoch=target_epoch, previous_member_epoch=updated.member_epoch,
                                 assigned=assigned)
            if reconciled != updated:
                records.append(assignment_record(group.group_id, reconciled))
        self._write(group, records, now_ms)
        self._schedule_session(group.group_id, member_id, now_ms)
        send = request.member_epoch == 0 or request.subscribed_topic_names is not None or (
            member.assigned != reconciled.assigned)
        return ConsumerHeartbeatResult(
            E.none, member_id=member_id, member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self._config.share_heartbeat_interval_ms,
            assignment={t: tuple(sorted(p)) for t, p in reconciled.assigned.items()} if send else None)

    def _group_for(self, group_id: str, *, create: bool) -> ShareGroup:
        group = self._cache.share(group_id)
        if group is not None:
            return group
        if self._cache.any_group(group_id) is not None:
            raise GroupError(E.group_id_not_found, f"Group {group_id} is not a share group.")
        if not create:
            raise GroupError(E.group_id_not_found, f"Share group {group_id} not found.")
        return ShareGroup(group_id)

    def _member(self, group: ShareGroup, member_id: str, epoch: int) -> ShareGroupMember:
        """Kafka's getOrMaybeSubscribeShareGroupMember + throwIfShareGroupMemberEpochIsInvalid."""
        member = group.member(member_id)
        if member is None:
            if epoch != 0:
                raise GroupError(E.unknown_member_id, f"Member {member_id} is not a member of group "
                                 f"{group.group_id}.")
            return ShareGroupMember(member_id)
        if epoch == 0 or epoch == member.member_epoch:
            return member
        if epoch > member.member_epoch or epoch != member.previous_member_epoch:
            raise GroupError(E.fenced_member_epoch, f"The share group member has a member epoch ({epoch}) the group "
                             f"coordinator does not expect ({member.member_epoch}). The member must abandon all its "
                             "partitions and rejoin.")
        return member

    def _maybe_bump_epoch(self, group: ShareGroup, members: dict[str, ShareGroupMember], changed: bool,
                          records: list[GroupRecord]) -> int:
        topics: set[str] = set()
        for m in members.values():
            topics |= m.subscribed_topic_names
        digest = metadata_hash(self._topics, topics)
        if not changed and digest == group.metadata_hash:
            return group.group_epoch
        records.append(epoch_record(group.group_id, group.group_epoch + 1, digest))
        return group.group_epoch + 1

    def _maybe_update_target(self, group: ShareGroup, members: dict[str, ShareGroupMember], epoch: int,
                             updated: ShareGroupMember, records: list[GroupRecord],
                             now_ms: int) -> tuple[int, dict]:
        if group.assignment_epoch >= epoch:
            return group.assignment_epoch, dict(group.target_of(updated.member_id))
        interval = self._config.share_assignment_interval_ms
        if group.assignment_timestamp and interval and now_ms < group.assignment_timestamp + interval:
            return group.assignment_epoch, dict(group.target_of(updated.member_id))
        specs = {mid: MemberSpec(None, self._topic_ids(m.subscribed_topic_names), group.target_of(mid))
                 for mid, m in members.items()}
        partitions = {t: self._topics.partition_count(self._topics.topic_name(t) or "")
                      for spec in specs.values() for t in spec.topics}
        new = share_assign(specs, partitions)
        for mid in specs:
            if mid not in group.target or group.target[mid] != new.get(mid, {}):
                records.append(target_record(group.group_id, mid, new.get(mid, {})))
        records.append(target_metadata_record(group.group_id, epoch, now_ms))
        return epoch, dict(new.get(updated.member_id, {}))

    def _topic_ids(self, names: Iterable[str]) -> frozenset:
        ids = (self._topics.topic_id(n) for n in names if self._topics.partition_count(n) > 0)
        return frozenset(i for i in ids if i is not None)

    def create_empty(self, group_id: str, now_ms: int) -> ErrorCode | None:
        """An empty share group (its epoch record at 0), as AlterShareGroupOffsets makes one in Kafka."""
        try:
            self._write(ShareGroup(group_id), [epoch_record(group_id, 0, 0)], now_ms)
        except GroupError as exc:
            return exc.code
        return None

    def _write(self, group: ShareGroup, records: list[GroupRecord], now_ms: int) -> None:
        if not records:
            return
        error = self._cache.append(self._cache.partition_for(group.group_id), [r.encode() for r in records], now_ms,
                                   E.unknown_server_error)
        if error != E.none:
            raise GroupError(error)
        groups = self._cache.share_groups
        groups.setdefault(group.group_id, group)
        for record in records:
            replay(groups, record)

    # --- leaving and fencing ------------------------------------------------------------------------------

    def _leave(self, request: ConsumerHeartbeatRequest, now_ms: int) -> ConsumerHeartbeatResult:
        group = self._cache.share(request.group_id)
        if group is None:
            raise GroupError(E.group_id_not_found, f"Share group {request.group_id} not found.")
        if group.member(request.member_id) is None:
            raise GroupError(E.unknown_member_id, f"Member {request.member_id} is not a member of group "
                             f"{request.group_id}.")
        self.fence(group, request.member_id, now_ms)
        return ConsumerHeartbeatResult(E.none, member_id=request.member_id, member_epoch=-1)

    def fence(self, group: ShareGroup, member_id: str, now_ms: int) -> None:
        """Kafka's shareGroupFenceMember: remove the member, bump the epoch; its acquired records are released."""
        remaining = {mid: m for mid, m in group.members.items() if mid != member_id}
        topics: set[str] = set()
        for m in remaining.values():
            topics |= m.subscribed_topic_names
        records = [*member_tombstones(group.group_id, member_id),
                   epoch_record(group.group_id, group.group_epoch + 1, metadata_hash(self._topics, topics))]
        self._write(group, records, now_ms)
        self._timers.cancel(("share-session", group.group_id, member_id))
        if self.member_left is not None:
            self.member_left(group.group_id, member_id)

    def _schedule_session(self, group_id: str, member_id: str, now_ms: int) -> None:
        def expire(now: int) -> None:
            group = self._cache.share(group_id)
            if group is not None and group.member(member_id) is not None:
                log.info("[GroupId %s] Member %s fenced from the share group because its session expired.",
                         group_id, member_id)
                try:
                    self.fence(group, member_id, now)
                except GroupError:
                    self._schedule_session(group_id, member_id, now)
        self._timers.set(("share-session", group_id, member_id), now_ms + self._config.share_session_timeout_ms,
                         expire)

    # --- ShareGroupDescribe -------------------------------------------------------------------------------

    def describe(self, group_ids: Sequence[str], *, now_ms: int,
                 respond: Respond[tuple[DescribedConsumerGroup, ...]]) -> None:
        """ShareGroupDescribe: each share group's epochs and members with their assignments."""
        out = []
        for group_id in group_ids:
            error = self._cache.validate_group_status(group_id)
            group = self._cache.share(group_id)
            if error is not None:
                out.append(DescribedConsumerGroup(group_id, error))
            elif group is None:
                kind = "not found" if self._cache.any_group(group_id) is None else "is not a share group"
                out.append(DescribedConsumerGroup(group_id, E.group_id_not_found, f"Group {group_id} {kind}."))
            else:
                out.append(DescribedConsumerGroup(
                    group_id, E.none, group_state=group.state.value, group_epoch=group.group_epoch,
                    assignment_epoch=group.assignment_epoch, assignor_name=SHARE_ASSIGNOR,
                    members=tuple(self._describe_member(m) for m in group.members.values())))
        respond(tuple(out))

    def _describe_member(self, m: ShareGroupMember) -> DescribedConsumerMember:
        named = []
        for topic_id, parts in sorted(m.assigned.items()):
            name = self._topics.topic_name(topic_id)
            if name is not None:
                named.append((topic_id, name, tuple(sorted(parts))))
        return DescribedConsumerMember(m.member_id, None, m.rack_id, m.member_epoch, m.client_id, m.client_host,
                                       tuple(sorted(m.subscribed_topic_names)), None, tuple(named), (), 1)


def _validate(request: ConsumerHeartbeatRequest) -> None:
    """Kafka's throwIfShareGroupHeartbeatRequestIsInvalid."""
    if not request.member_id or not request.member_id.strip():
        raise GroupError(E.invalid_request, "MemberId can't be empty.")
    if not request.group_id or not request.group_id.strip():
        raise GroupError(E.invalid_request, "GroupId can't be empty.")
    if request.rack_id is not None and not request.rack_id.strip():
        raise GroupError(E.invalid_request, "RackId can't be empty.")
    if request.member_epoch == 0 and request.subscribed_topic_names is None:
        raise GroupError(E.invalid_request, "SubscribedTopicNames must be set in first request.")
    if request.member_epoch < -1:
        raise GroupError(E.invalid_request, "MemberEpoch is invalid.")
