"""KIP-848 ConsumerGroupHeartbeat: joining, updating, reconciling and leaving a consumer group, sans-IO.

Kafka's GroupMetadataManager.consumerGroupHeartbeat. One heartbeat (1) creates or updates the member, bumping
the group epoch when its subscription (names or regex) changes or the subscribed topics' metadata does;
(2) recomputes the target assignment when the group epoch is ahead of it; (3) moves the member towards its
target (``reconciliation``). Every change is a ``GroupRecord``: they are appended to ``__consumer_offsets``
first and replayed into the group only once the append succeeded, so a failed write changes nothing (the
member retries). Sessions (``group.consumer.session.timeout.ms``) and revocation deadlines (the member's
rebalance timeout) are timers; when one fires the member is fenced: removed, and the group epoch bumped.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import secrets
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from logway.coordinator.assignors import ASSIGNORS, MemberSpec
from logway.coordinator.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
)
from logway.coordinator.consumer_group_store import (
    GroupRecord,
    assignment_record,
    epoch_record,
    member_metadata_record,
    member_tombstones,
    regex_record,
    replay,
    target_metadata_record,
    target_record,
)
from logway.coordinator.consumer_results import ConsumerHeartbeatRequest, ConsumerHeartbeatResult
from logway.coordinator.group import GroupMetadata, GroupState
from logway.coordinator.group_cache import GroupCache
from logway.coordinator.group_config import GroupConfig
from logway.coordinator.group_store import group_tombstone
from logway.coordinator.reconciliation import FencedMember, OwnedPartitions, reconcile
from logway.coordinator.results import Respond
from logway.coordinator.timers import Timers
from logway.coordinator.topic_regex import InvalidRegex, matching_topics
from logway.coordinator.topics_image import TopicsImage
from logway.wire.errors import ErrorCode

__all__ = ["ConsumerMembership", "GroupError", "MemberChange", "metadata_hash", "new_member_id"]

log = logging.getLogger(__name__)
E = ErrorCode
REGEX_BATCH_REFRESH_MIN_INTERVAL_MS = 10_000  # Kafka refreshes a group's regexes at most every 10 s


class GroupError(Exception):
    """A request answered with an error code and message (Kafka's ApiException)."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code, self.message = code, message


def new_member_id() -> str:
    """Kafka's Uuid.randomUuid().toString(): 16 random bytes in URL-safe base64, never starting with '-'."""
    while True:
        text = base64.urlsafe_b64encode(secrets.token_bytes(16)).decode().rstrip("=")
        if not text.startswith("-"):
            return text


@dataclass(slots=True)
class MemberChange:
    """What one heartbeat (or a classic JoinGroup to a consumer group) changes, on top of the group as it is
    (nothing is replayed before the append)."""

    group: ConsumerGroup
    member: ConsumerGroupMember  # before this heartbeat (a new member: fresh, epoch 0)
    updated: ConsumerGroupMember
    records: list[GroupRecord]
    replaced: str | None = None  # the member id a rejoining static member takes over from
    regexes: dict[str, frozenset[str]] | None = None  # resolved regexes after this heartbeat

    def members_after(self) -> dict[str, ConsumerGroupMember]:
        members = {mid: m for mid, m in self.group.members.items() if mid != self.replaced}
        members[self.updated.member_id] = self.updated
        return members

    def topics_of(self, member: ConsumerGroupMember) -> frozenset[str]:
        regexes = self.regexes if self.regexes is not None else {}
        extra = regexes.get(member.regex or "", frozenset()) if member.regex else frozenset()
        return member.subscribed_topic_names | extra


class ConsumerMembership:
    """The consumer groups of a ``GroupCache``: ConsumerGroupHeartbeat and the timers that fence members."""

    def __init__(self, cache: GroupCache, timers: Timers, config: GroupConfig, topics: TopicsImage) -> None:
        self._cache = cache
        self._timers = timers
        self._config = config
        self._topics = topics
        # KIP-848 migration (group_migration.GroupMigration sets these): turn a classic group with members into a
        # consumer group, and a consumer group left with only classic members back into a classic group.
        self.upgrade: Callable[[GroupMetadata, int], ConsumerGroup] | None = None
        self.downgrade: Callable[[ConsumerGroup, set[str], int], bool] | None = None
        self.extra_timers: tuple[str, ...] = ()

    def start_sessions(self, group: ConsumerGroup, now_ms: int) -> None:
        """Kafka's onLoaded: every member of a loaded group gets a session, and a revocation deadline if revoking."""
        for member in group.members.values():
            self.schedule_session(group.group_id, member, now_ms)
            if member.state is MemberState.UNREVOKED_PARTITIONS and not member.uses_classic_protocol:
                self._schedule_rebalance_timeout(group.group_id, member, now_ms)

    # --- the request --------------------------------------------------------------------------------------

    def heartbeat(self, request: ConsumerHeartbeatRequest, *, now_ms: int,
                  respond: Respond[ConsumerHeartbeatResult]) -> None:
        """ConsumerGroupHeartbeat: answered at once (nothing waits in KIP-848)."""
        try:
            _validate(request, self._config.consumer_assignors)
            status = self._cache.validate_group_status(request.group_id)
            if status is not None:
                raise GroupError(status)
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                result = self._leave(request, now_ms)
            else:
                result = self._heartbeat(request, now_ms)
        except GroupError as exc:
            result = ConsumerHeartbeatResult(exc.code, exc.message)
        respond(result)

    def _heartbeat(self, request: ConsumerHeartbeatRequest, now_ms: int) -> ConsumerHeartbeatResult:
        joining = request.member_epoch == 0
        group, replacing = self._group_for(request.group_id, create=joining, now_ms=now_ms)
        member_id = request.member_id or new_member_id()
        self.check_size(group, member_id)
        change = self._member_change(group, member_id, request, joining)
        reconciled = self.apply(change, owned=request.owned, topic_filter=request.topic_filter, now_ms=now_ms,
                                replacing=replacing)
        full = (request.rebalance_timeout_ms != -1 and request.owned is not None
                and (request.subscribed_topic_names is not None or request.subscribed_topic_regex is not None))
        send_assignment = joining or full or change.member.assigned != reconciled.assigned
        return ConsumerHeartbeatResult(
            E.none, member_id=reconciled.member_id, member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self._config.consumer_heartbeat_interval_ms,
            assignment={t: tuple(sorted(p)) for t, p in reconciled.assigned.items()} if send_assignment else None)

    def check_size(self, group: ConsumerGroup, member_id: str) -> None:
        """group.consumer.max.size: a new member is refused once the group is full."""
        if len(group.members) >= self._config.consumer_max_size and member_id not in group.members:
            raise GroupError(E.group_max_size_reached, "The consumer group has reached its maximum capacity of "
                             f"{self._config.consumer_max_size} members.")

    def apply(self, change: MemberChange, *, owned: OwnedPartitions, topic_filter: Callable[[str], bool] | None,
              now_ms: int, replacing: GroupMetadata | None = None) -> ConsumerGroupMember:
        """Kafka's three steps for a member update: record it (bumping the group epoch when its subscription or
        the subscribed topics changed), recompute the target assignment if the epoch moved, reconcile the member;
        then write and replay the records. Returns the reconciled member."""
        names_changed = self._record_subscription(change)
        regexes_changed = self._update_regexes(change, topic_filter, now_ms)
        changed = names_changed or regexes_changed
        epoch = self._maybe_bump_epoch(change, changed)
        target_epoch, target = self._maybe_update_target(change, epoch, now_ms)
        reconciled = self._reconcile(change, target_epoch, target, changed, owned)
        self._write(change.group, change.records, now_ms, replacing)
        self._after_write(change, reconciled, now_ms)
        return reconciled

    def _group_for(self, group_id: str, *, create: bool, now_ms: int) -> tuple[ConsumerGroup, GroupMetadata | None]:
        """The consumer group (a new one when joining), and the empty classic group of the same id it replaces
        (Kafka's maybeDeleteEmptyClassicGroup: its committed offsets stay with the group id). A classic group
        with members is converted first (the online upgrade)."""
        group = self._cache.consumer(group_id)
        if group is not None:
            return group, None
        if not create:
            raise GroupError(E.group_id_not_found, f"Consumer group {group_id} not found.")
        if self._cache.share(group_id) is not None:
            raise GroupError(E.group_id_not_found, f"Group {group_id} is not a consumer group.")
        classic = self._cache.get(group_id)
        if classic is None or classic.is_state(GroupState.EMPTY):
            return ConsumerGroup(group_id), classic
        if self.upgrade is None:
            raise GroupError(E.group_id_not_found, f"Cannot upgrade classic group {group_id} to consumer group "
                             "because online upgrade is disabled.")
        return self.upgrade(classic, now_ms), None

    def _member_change(self, group: ConsumerGroup, member_id: str, request: ConsumerHeartbeatRequest,
                       joining: bool) -> MemberChange:
        """The member the heartbeat is from (created, or taken over by a returning static member) and its update."""
        records: list[GroupRecord] = []
        replaced = None
        if request.instance_id is None:
            member = group.member(member_id)
            if member is None:
                if not joining:
                    raise GroupError(E.unknown_member_id, f"Member {member_id} is not a member of group "
                                     f"{group.group_id}.")
                member = ConsumerGroupMember(member_id)
            else:
                _check_epoch(member, request.member_epoch, request.owned)
        else:
            member, replaced = self.static_member(group, member_id, request.instance_id, request.member_epoch,
                                                  request.owned, joining=joining, records=records)
        return MemberChange(group, member, _updated(member, request), records, replaced)

    def static_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None, epoch: int,
                      owned: OwnedPartitions, *, joining: bool, records: list[GroupRecord],
                      classic: bool = False) -> tuple[ConsumerGroupMember, str | None]:
        """Kafka's getOrMaybeSubscribeStaticConsumerGroupMember: a static member joins, rejoins under a new member
        id (taking over the old one's assignment once it left with epoch -2; a classic member may always take
        over), or heartbeats. Returns the member and the member id it replaces."""
        existing = group.static_member(instance_id)
        if joining:
            if existing is None:
                return group.member(member_id) or ConsumerGroupMember(member_id), None
            released = existing.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH or existing.uses_classic_protocol
            if not (released or classic):
                raise GroupError(E.unreleased_instance_id, f"Static member {member_id} with instance id "
                                 f"{instance_id} cannot join the group because the instance id is owned by "
                                 f"{existing.member_id} member.")
            new = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
            gid = group.group_id
            records += [*member_tombstones(gid, existing.member_id), member_metadata_record(gid, new),
                        target_record(gid, member_id, group.target_of(existing.member_id)),
                        assignment_record(gid, new)]
            return new, existing.member_id
        if existing is None:
            raise GroupError(E.unknown_member_id, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise GroupError(E.fenced_instance_id, f"Static member {member_id} with instance id "
                             f"{instance_id} was fenced by member {existing.member_id}.")
        if not classic:
            _check_epoch(existing, epoch, owned)
        return existing, None

    def _record_subscription(self, change: MemberChange) -> bool:
        """Record the member's metadata when it changed; True when its subscribed topic names changed."""
        if change.updated == change.member:
            return False
        change.records.append(member_metadata_record(change.group.group_id, change.updated))
        return change.updated.subscribed_topic_names != change.member.subscribed_topic_names

    # --- regular expressions ------------------------------------------------------------------------------

    def _update_regexes(self, change: MemberChange, topic_filter: Callable[[str], bool] | None, now_ms: int) -> bool:
        """Resolve a new regex at once (Kafka does so on a background thread and the member learns the result
        on a later heartbeat), tombstone one nobody uses any more, and refresh the group's regexes against the
        topics at most every 10 s. True when a regex subscription or what a regex matches changed."""
        group, old, new = change.group, change.member.regex, change.updated.regex
        regexes = {r: rr.topics for r, rr in group.resolved_regexes.items()}
        counts = group.subscribed_regexes()
        changed = (change.member.subscribed_topic_regex or None) != (change.updated.subscribed_topic_regex or None)
        if changed and old:
            counts[old] -= 1
            if counts[old] <= 0:
                del counts[old]
                regexes.pop(old, None)
                change.records.append(regex_record(group.group_id, old, None, 0, now_ms))
        if changed and new:
            counts[new] += 1
            if new not in regexes:
                regexes[new] = self._resolve(new, topic_filter, change, now_ms)
        if counts and now_ms >= group.regex_refreshed_at + REGEX_BATCH_REFRESH_MIN_INTERVAL_MS:
            changed = self._refresh_regexes(counts, regexes, topic_filter, change, now_ms) or changed
        change.regexes = regexes
        return changed

    def _resolve(self, regex: str, topic_filter: Callable[[str], bool] | None, change: MemberChange, now_ms: int,
                 *, refreshing: bool = False) -> frozenset[str]:
        """The topics ``regex`` matches that the member may describe, recorded as the regex's resolution."""
        try:
            topics = matching_topics(regex, self._topics.names())
        except InvalidRegex as exc:
            if not refreshing:
                raise GroupError(E.invalid_regular_expression, f"SubscribedTopicRegex `{regex}` is not a valid "
                                 f"regular expression: {exc}.") from None
            log.error("[GroupId %s] Couldn't parse regular expression '%s' due to `%s`. Ignoring it.",
                      change.group.group_id, regex, exc)  # one loaded from a log Kafka wrote
            topics = frozenset()
        if topic_filter is not None:
            topics = frozenset(t for t in topics if topic_filter(t))
        change.records.append(regex_record(change.group.group_id, regex, topics, 0, now_ms))
        return topics

    def _refresh_regexes(self, counts: Counter[str], regexes: dict[str, frozenset[str]],
                         topic_filter: Callable[[str], bool] | None, change: MemberChange, now_ms: int) -> bool:
        """Re-resolve every regex of the group; record those whose topics changed."""
        change.group.regex_refreshed_at = now_ms
        changed = False
        for regex in counts:
            before = regexes.get(regex)
            records_before = len(change.records)
            after = self._resolve(regex, topic_filter, change, now_ms, refreshing=True)
            if after == before:
                del change.records[records_before:]  # unchanged: nothing to write
            else:
                regexes[regex] = after
                changed = True
        return changed

    # --- the group epoch and the target assignment --------------------------------------------------------

    def _maybe_bump_epoch(self, change: MemberChange, subscription_changed: bool) -> int:
        """Bump the group epoch when a subscription or the subscribed topics' metadata changed."""
        group = change.group
        if subscription_changed or change.replaced is not None or change.member.member_id not in group.members:
            topics: set[str] = set()
            for m in change.members_after().values():
                topics |= change.topics_of(m)
        else:
            topics = set(group.subscribed_topics())  # unchanged: the cached set (O(topics), not O(members))
        metadata_hash = self.metadata_hash(topics)
        if not subscription_changed and metadata_hash == group.metadata_hash:
            return group.group_epoch
        epoch = group.group_epoch + 1
        change.records.append(epoch_record(group.group_id, epoch, metadata_hash))
        log.info("[GroupId %s] Bumped group epoch to %d.", group.group_id, epoch)
        return epoch

    def metadata_hash(self, topics: Iterable[str]) -> int:
        """The hash of the subscribed topics' metadata (see ``metadata_hash``)."""
        return metadata_hash(self._topics, topics)

    def _topic_ids(self, names: Iterable[str]) -> frozenset[uuid.UUID]:
        """The ids of the named topics that exist."""
        ids = (self._topics.topic_id(n) for n in names if self._topics.partition_count(n) > 0)
        return frozenset(i for i in ids if i is not None)

    def _maybe_update_target(self, change: MemberChange, epoch: int, now_ms: int) -> tuple[int, Assignment]:
        """Recompute the target assignment when the group epoch is ahead of it and
        group.consumer.assignment.interval.ms has passed since the last one (Kafka 4.3, KIP-1263)."""
        group, updated = change.group, change.updated
        last = group.target_of(change.replaced or updated.member_id)
        if group.assignment_epoch >= epoch:
            return group.assignment_epoch, last
        interval = self._config.consumer_assignment_interval_ms
        if group.assignment_timestamp and interval and now_ms < group.assignment_timestamp + interval:
            return group.assignment_epoch, last
        members = change.members_after()
        specs = {mid: MemberSpec(m.instance_id, self._topic_ids(change.topics_of(m)),
                                 last if mid == updated.member_id else group.target_of(mid))
                 for mid, m in members.items()}
        partitions = {tid: self._topics.partition_count(self._topics.topic_name(tid) or "")
                      for spec in specs.values() for tid in spec.topics}
        assignors = Counter(m.server_assignor for m in members.values() if m.server_assignor)
        name = assignors.most_common(1)[0][0] if assignors else self._config.consumer_assignors[0]
        new = ASSIGNORS[name].assign(specs, partitions)
        for mid in specs:
            assignment = new.get(mid, {})
            if mid not in group.target or group.target[mid] != assignment:
                change.records.append(target_record(group.group_id, mid, assignment))
        change.records.append(target_metadata_record(group.group_id, epoch, now_ms))
        log.info("[GroupId %s] Computed a new target assignment for epoch %d with '%s' assignor.",
                 group.group_id, epoch, name)
        return epoch, new.get(updated.member_id, {})

    def _reconcile(self, change: MemberChange, target_epoch: int, target: Assignment, subscription_changed: bool,
                   owned: OwnedPartitions) -> ConsumerGroupMember:
        updated = change.updated
        if not subscription_changed and updated.is_reconciled_to(target_epoch):
            return updated
        try:
            reconciled = reconcile(
                updated, target_epoch=target_epoch, target=target,
                subscribed_topic_ids=self._topic_ids(change.topics_of(updated)),
                subscription_changed=subscription_changed, owned=owned,
                partition_epoch=change.group.current_partition_epoch)
        except FencedMember as exc:
            raise GroupError(E.fenced_member_epoch, str(exc)) from None
        if reconciled != updated:
            change.records.append(assignment_record(change.group.group_id, reconciled))
        return reconciled

    # --- writing and replaying ----------------------------------------------------------------------------

    def _write(self, group: ConsumerGroup, records: list[GroupRecord], now_ms: int,
               replacing: GroupMetadata | None = None) -> None:
        """Append the records (after the tombstone of the empty classic group they replace), then replay them."""
        if not records:
            return
        encoded = [r.encode() for r in records]
        if replacing is not None and replacing.generation_id > 0:
            encoded.insert(0, group_tombstone(group.group_id))
        error = self._cache.append(self._cache.partition_for(group.group_id), encoded, now_ms,
                                   E.unknown_server_error)
        if error != E.none:
            raise GroupError(error)
        self.install(group, records, replacing)

    def install(self, group: ConsumerGroup, records: list[GroupRecord],
                replacing: GroupMetadata | None = None) -> ConsumerGroup:
        """Replay written records into the cached group (caching it first if new, in place of ``replacing``)."""
        if replacing is not None:
            self._cache.replace_classic(replacing, group)
        groups = self._cache.consumer_groups
        groups.setdefault(group.group_id, group)
        for record in records:
            replay(groups, record)
        return groups[group.group_id]

    def _after_write(self, change: MemberChange, reconciled: ConsumerGroupMember, now_ms: int) -> None:
        """Timers: the member's session restarts; a revoking member gets its rebalance timeout."""
        gid = change.group.group_id
        if change.replaced is not None:
            self.cancel_timers(gid, change.replaced)
        self.schedule_session(gid, reconciled, now_ms)
        if reconciled != change.updated and not reconciled.uses_classic_protocol:  # classic: join and sync timers
            if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
                self._schedule_rebalance_timeout(gid, reconciled, now_ms)
            else:
                self._timers.cancel(("consumer-rebalance", gid, reconciled.member_id))

    # --- leaving and fencing ------------------------------------------------------------------------------

    def _leave(self, request: ConsumerHeartbeatRequest, now_ms: int) -> ConsumerHeartbeatResult:
        """Epoch -1: the member leaves (fenced now); -2: a static member leaves for now, keeping its partitions."""
        group = self._cache.consumer(request.group_id)
        if group is None:
            raise GroupError(E.group_id_not_found, f"Consumer group {request.group_id} not found.")
        if request.instance_id is None:
            member = group.member(request.member_id)
            if member is None:
                raise GroupError(E.unknown_member_id, f"Member {request.member_id} is not a member of group "
                                 f"{request.group_id}.")
        else:
            member = group.static_member(request.instance_id)
            if member is None:
                raise GroupError(E.unknown_member_id, f"Instance id {request.instance_id} is unknown.")
            if member.member_id != request.member_id:
                raise GroupError(E.fenced_instance_id, f"Static member {request.member_id} with instance id "
                                 f"{request.instance_id} was fenced by member {member.member_id}.")
        if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and request.instance_id is not None:
            leaving = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={},
                              assigned={t: dict.fromkeys(p, 0) for t, p in member.assigned.items()})
            self._write(group, [assignment_record(group.group_id, leaving)], now_ms)
            return ConsumerHeartbeatResult(E.none, member_id=member.member_id,
                                           member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH)
        log.info("[GroupId %s] Member %s left the consumer group.", group.group_id, member.member_id)
        self.fence(group, [member], now_ms)
        return ConsumerHeartbeatResult(E.none, member_id=request.member_id, member_epoch=request.member_epoch)

    def fence(self, group: ConsumerGroup, members: list[ConsumerGroupMember], now_ms: int) -> None:
        """Kafka's consumerGroupFenceMembers: remove the members, drop regexes only they used, bump the epoch; or,
        when only classic members would remain, turn the group into a classic group (the online downgrade)."""
        ids = {m.member_id for m in members}
        if self.downgrade is not None and self.downgrade(group, ids, now_ms):
            return
        records: list[GroupRecord] = []
        for m in members:
            records += member_tombstones(group.group_id, m.member_id)
        leaving = Counter(m.regex for m in members if m.regex)
        gone = {r for r, n in leaving.items() if group.num_regex_members(r) <= n}
        records += [regex_record(group.group_id, r, None, 0, now_ms) for r in sorted(gone)]
        remaining = [m for mid, m in group.members.items() if mid not in ids]
        regexes = {r: rr.topics for r, rr in group.resolved_regexes.items() if r not in gone}
        topics = set()
        for m in remaining:
            topics |= m.subscribed_topic_names | (regexes.get(m.regex or "", frozenset()) if m.regex else set())
        records.append(epoch_record(group.group_id, group.group_epoch + 1, self.metadata_hash(topics)))
        self._write(group, records, now_ms)
        for mid in ids:
            self.cancel_timers(group.group_id, mid)

    def fence_on_timer(self, group_id: str, member_id: str, now_ms: int, reason: str,
                        epoch: int | None = None) -> None:
        group = self._cache.consumer(group_id)
        member = None if group is None else group.member(member_id)
        if group is None or member is None or (epoch is not None and member.member_epoch != epoch):
            return
        log.info("[GroupId %s] Member %s fenced from the group because %s.", group_id, member_id, reason)
        try:
            self.fence(group, [member], now_ms)
        except GroupError as exc:  # the write failed: try again after another session
            log.warning("[GroupId %s] fencing member %s failed (%s); retrying later", group_id, member_id, exc.code.name)
            self.schedule_session(group_id, member, now_ms)

    def schedule_session(self, group_id: str, member: ConsumerGroupMember, now_ms: int) -> None:
        """(Re)start the member's session: group.consumer.session.timeout.ms, or a classic member's own."""
        timeout = member.classic.session_timeout_ms if member.classic else self._config.consumer_session_timeout_ms
        member_id = member.member_id
        self._timers.set(("consumer-session", group_id, member_id), now_ms + timeout,
                         lambda now: self.fence_on_timer(group_id, member_id, now, "the member session expired"))

    def _schedule_rebalance_timeout(self, group_id: str, member: ConsumerGroupMember, now_ms: int) -> None:
        epoch, timeout = member.member_epoch, max(member.rebalance_timeout_ms, 0)
        self._timers.set(
            ("consumer-rebalance", group_id, member.member_id), now_ms + timeout,
            lambda now: self.fence_on_timer(group_id, member.member_id, now,
                                             f"it failed to transition from epoch {epoch} within {timeout}ms", epoch))

    def cancel_timers(self, group_id: str, member_id: str) -> None:
        """The member's session, revocation and (classic members) join and sync deadlines."""
        for kind in ("consumer-session", "consumer-rebalance", *self.extra_timers):
            self._timers.cancel((kind, group_id, member_id))

    def forget(self, group: ConsumerGroup) -> None:
        """The group was deleted: its members' timers go too."""
        for member_id in group.members:
            self.cancel_timers(group.group_id, member_id)


def metadata_hash(image: TopicsImage, topics: Iterable[str]) -> int:
    """A stable 64-bit hash of the topics' ids and partition counts (Kafka's KIP-1101 hash plays the same part: a
    change means the assignment must be recomputed); 0 for no topics, as Kafka's."""
    names = sorted(topics)
    if not names:
        return 0
    digest = hashlib.blake2b(digest_size=8)
    for name in names:
        digest.update(f"{name}\0{image.topic_id(name)}\0{image.partition_count(name)}\0".encode())
    return int.from_bytes(digest.digest(), "big", signed=True)


def _updated(member: ConsumerGroupMember, request: ConsumerHeartbeatRequest) -> ConsumerGroupMember:
    """The member with what the heartbeat changed (the same object when it changed nothing: most heartbeats)."""
    fields = {
        "instance_id": _given(request.instance_id, member.instance_id),
        "rack_id": _given(request.rack_id, member.rack_id),
        "rebalance_timeout_ms": member.rebalance_timeout_ms if request.rebalance_timeout_ms == -1
        else request.rebalance_timeout_ms,
        "server_assignor": _given(request.server_assignor, member.server_assignor),
        "subscribed_topic_names": member.subscribed_topic_names if request.subscribed_topic_names is None
        else frozenset(request.subscribed_topic_names),
        "subscribed_topic_regex": _given(request.subscribed_topic_regex, member.subscribed_topic_regex),
        "client_id": request.client_id, "client_host": request.client_host, "classic": None,
    }
    if all(getattr(member, name) == value for name, value in fields.items()):
        return member
    return replace(member, **fields)


def _given(value: str | None, current: str | None) -> str | None:
    """A heartbeat field: None means unchanged."""
    return current if value is None else value


def _check_epoch(member: ConsumerGroupMember, epoch: int, owned: OwnedPartitions) -> None:
    """Kafka's throwIfConsumerGroupMemberEpochIsInvalid: epoch 0 rejoins; the previous epoch is accepted when
    the member owns only partitions it still has (its last answer was lost); anything else is fenced."""
    if epoch == 0 or epoch == member.member_epoch:
        return
    if epoch < member.member_epoch and epoch == member.previous_member_epoch and _is_subset(owned, member):
        return
    relation = "greater" if epoch > member.member_epoch else "smaller"
    raise GroupError(E.fenced_member_epoch, f"The consumer group member has a {relation} member epoch ({epoch}) than "
                     f"the one known by the group coordinator ({member.member_epoch}). The member must abandon all "
                     "its partitions and rejoin.")


def _is_subset(owned: Mapping[uuid.UUID, Iterable[int]] | None, member: ConsumerGroupMember) -> bool:
    if owned is None:
        return False
    return all(t in member.assigned and all(p in member.assigned[t] for p in parts) for t, parts in owned.items())


def _validate(request: ConsumerHeartbeatRequest, assignors: Iterable[str]) -> None:
    """GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid: INVALID_REQUEST, UNSUPPORTED_ASSIGNOR."""
    epoch = request.member_epoch
    if request.api_version >= 1 or epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
        _not_blank(request.member_id, "MemberId can't be empty.")
    _not_blank(request.group_id, "GroupId can't be empty.")
    _not_blank(request.instance_id, "InstanceId can't be empty.")
    _not_blank(request.rack_id, "RackId can't be empty.")
    if epoch == 0:
        if request.rebalance_timeout_ms == -1:
            raise GroupError(E.invalid_request, "RebalanceTimeoutMs must be provided in first request.")
        if request.owned is None or request.owned:
            raise GroupError(E.invalid_request, "TopicPartitions must be empty when (re-)joining.")
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            raise GroupError(E.invalid_request, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null "
                             "when (re-)joining.")
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if request.instance_id is None:
            raise GroupError(E.invalid_request, "InstanceId can't be null.")
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise GroupError(E.invalid_request, "MemberEpoch is invalid.")
    if request.server_assignor is not None and request.server_assignor not in assignors:
        raise GroupError(E.unsupported_assignor, f"ServerAssignor {request.server_assignor} is not supported. "
                         f"Supported assignors: {', '.join(assignors)}.")


def _not_blank(value: str | None, message: str) -> None:
    if value is not None and not value.strip():
        raise GroupError(E.invalid_request, message)
