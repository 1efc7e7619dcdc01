"""The classic group coordinator: Kafka's GroupCoordinator + GroupMetadataManager, sans-IO.

Every request method takes the request's fields, ``now_ms`` and a ``respond`` callback that is called
exactly once: at once, or later from another call or from ``tick``. ``respond`` must not call back into
the coordinator. Groups live in memory and are persisted to ``__consumer_offsets`` through an
``OffsetsLog`` before anything that depends on the write is answered. Behaviour follows Kafka's
classic protocol (kafka.coordinator.group.GroupCoordinator in 3.x); comments name the exceptions.

Groups that Kafka would mark Dead are removed from the cache in the same call here (there is no other
thread to observe the Dead state), so the Dead checks Kafka makes on every request are not needed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace

from logway.coordinator.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from logway.coordinator.group import GroupMetadata, GroupState
from logway.coordinator.group_store import group_record, group_tombstone, offset_record, offset_tombstone, replay
from logway.coordinator.member import MemberMetadata
from logway.coordinator.offsets_log import OffsetsLog
from logway.coordinator.offsets_schema import (
    OffsetCommitKey,
    OffsetCommitValue,
    SchemaError,
    decode_key,
    decode_offset_commit_value,
)
from logway.coordinator.partitioning import partition_for_group
from logway.coordinator.results import (
    CommitOffset,
    DeleteGroupsResult,
    DescribedGroup,
    DescribedMember,
    DescribeGroupsResult,
    FetchedOffset,
    HeartbeatResult,
    JoinGroupResult,
    LeaveGroupResult,
    LeaveMemberResult,
    ListedGroup,
    ListGroupsResult,
    MemberIdentity,
    OffsetCommitResult,
    OffsetDeleteResult,
    OffsetFetchResult,
    Respond,
    SyncGroupResult,
    TopicPartition,
)
from logway.coordinator.timers import Timers
from logway.wire.errors import ErrorCode, KafkaError

__all__ = ["GroupCoordinator"]

log = logging.getLogger(__name__)

E = ErrorCode
# Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a member that joined but never completed a rebalance
# cannot heartbeat, so its JoinGroup is timed out after this long instead.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
# offsets.retention.minutes default (7 days).
DEFAULT_OFFSETS_RETENTION_MS = 10080 * 60 * 1000
# OffsetCommit's retention_time_ms default: use the broker's retention.
DEFAULT_RETENTION_TIME = -1
CLASSIC_GROUP_TYPE = "classic"

OffsetRemover = Callable[[GroupMetadata], list[TopicPartition]]
"""Removes some of a group's offsets from the cache and returns which (for ``_cleanup_groups``)."""


class GroupCoordinator:
    """Consumer groups and committed offsets for every ``__consumer_offsets`` partition of this broker."""

    def __init__(
        self,
        offsets_log: OffsetsLog,
        *,
        num_partitions: int = 50,
        initial_rebalance_delay_ms: int = 3000,
        offsets_retention_ms: int = DEFAULT_OFFSETS_RETENTION_MS,
        max_session_timeout_ms: int = 1_800_000,
        min_session_timeout_ms: int = 6000,
        group_max_size: int = 2**31 - 1,
        offset_metadata_max_bytes: int = 4096,
    ) -> None:
        self._log = offsets_log
        self.num_partitions = num_partitions
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.offsets_retention_ms = offsets_retention_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.group_max_size = group_max_size
        self.offset_metadata_max_bytes = offset_metadata_max_bytes
        self._groups: dict[str, GroupMetadata] = {}
        self._loaded: set[int] = set()
        self._timers = Timers()
        # Groups whose pending join is Kafka's InitialDelayedJoin (never completes early).
        self._initial_delay: set[str] = set()
        # TxnOffsetCommit offsets waiting for their transaction's marker: producer id -> group -> offsets.
        self._pending_txn: dict[int, dict[str, dict[TopicPartition, OffsetCommitValue]]] = {}

    # --- loading and timers ------------------------------------------------------------------

    @property
    def loading(self) -> frozenset[int]:
        """Partitions not loaded yet; their groups answer COORDINATOR_LOAD_IN_PROGRESS."""
        return frozenset(range(self.num_partitions)) - self._loaded

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition that stores ``group_id``."""
        return partition_for_group(group_id, self.num_partitions)

    def load(
        self, partition: int, now_ms: int, records: Iterable[tuple[bytes, bytes | None]] | None = None,
        pending_txn: Mapping[int, list[tuple[bytes, bytes | None]]] | None = None,
    ) -> None:
        """Rebuild a partition's groups and offsets from its records (read from the log unless given) and serve it.

        The gateway may read the records off the event loop and pass them in. ``pending_txn`` holds the
        offset records of transactions with no marker yet, by producer id: they wait for it.
        """
        if partition in self._loaded:
            raise ValueError(f"__consumer_offsets partition {partition} is already loaded")
        if not 0 <= partition < self.num_partitions:
            raise ValueError(f"no __consumer_offsets partition {partition}")
        groups = replay(self._log.read(partition) if records is None else records, now_ms)
        for group_id, group in groups.items():
            self._groups[group_id] = group
            # Kafka's onGroupLoaded: members get a fresh session from the load time.
            for member in group.members.values():
                self._schedule_heartbeat(group, member, now_ms)
        for producer_id, pending in (pending_txn or {}).items():
            for key, value in pending:
                try:
                    k = decode_key(key)
                    if isinstance(k, OffsetCommitKey) and value is not None:
                        self._pending_txn.setdefault(producer_id, {}).setdefault(k.group, {})[(k.topic, k.partition)] = (
                            decode_offset_commit_value(value))
                except SchemaError as exc:
                    log.error("skipping an unreadable transactional offset record: %s", exc)
        self._loaded.add(partition)

    def load_all(self, now_ms: int) -> None:
        """Load every partition not loaded yet."""
        for partition in sorted(self.loading):
            self.load(partition, now_ms)

    def group(self, group_id: str) -> GroupMetadata | None:
        """The in-memory group, for inspection."""
        return self._groups.get(group_id)

    def groups(self) -> list[GroupMetadata]:
        """Every group of the loaded partitions, for metrics."""
        return list(self._groups.values())

    def tick(self, now_ms: int) -> int | None:
        """Run due timers (session expiry, rebalance timeout, initial delay, pending sync); return the next deadline."""
        self._timers.run_due(now_ms)
        return self._timers.next_deadline()

    def next_deadline(self) -> int | None:
        """When ``tick`` next has work (requests can add deadlines), or None."""
        return self._timers.next_deadline()

    # --- JoinGroup ---------------------------------------------------------------------------

    def join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
        *,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        require_known_member_id: bool,
        support_skip_assignment: bool = False,
        now_ms: int,
        respond: Respond[JoinGroupResult],
    ) -> None:
        """JoinGroup. ``require_known_member_id`` is v4+ (KIP-394), ``support_skip_assignment`` v9+.

        For v0 pass the session timeout as the rebalance timeout, as Kafka's JoinGroupRequest does.
        """
        error = self._validate_group_status(group_id)
        if error is not None:
            respond(JoinGroupResult(error, member_id=member_id))
            return
        if not self.min_session_timeout_ms <= session_timeout_ms <= self.max_session_timeout_ms:
            respond(JoinGroupResult(E.invalid_session_timeout, member_id=member_id))
            return
        is_unknown_member = member_id == ""
        group = self._groups.get(group_id)
        if group is None:
            if not is_unknown_member:
                respond(JoinGroupResult(E.unknown_member_id, member_id=member_id))
                return
            group = self._groups[group_id] = GroupMetadata(group_id, now_ms)
        protocols = [(name, bytes(metadata)) for name, metadata in protocols]
        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            self._timers.cancel(("heartbeat", group_id, member_id))
            respond(JoinGroupResult(E.group_max_size_reached))
        elif not group.supports_protocols(protocol_type, (name for name, _ in protocols)):
            respond(JoinGroupResult(E.inconsistent_group_protocol, member_id=member_id))
        elif is_unknown_member:
            new_member_id = group.generate_member_id(client_id, group_instance_id)
            args = (client_id, client_host, session_timeout_ms, rebalance_timeout_ms, protocol_type, protocols)
            if group_instance_id is not None:
                old_member_id = group.static_member_id(group_instance_id)
                if old_member_id is not None:
                    self._update_static_member_and_rebalance(
                        group,
                        old_member_id,
                        new_member_id,
                        group_instance_id,
                        protocols,
                        rebalance_timeout_ms,
                        session_timeout_ms,
                        support_skip_assignment,
                        respond,
                        now_ms,
                    )
                else:
                    self._add_member_and_rebalance(group, new_member_id, group_instance_id, *args, respond, now_ms)
            elif require_known_member_id:
                # KIP-394: hand out the member id first, so a client that times out and retries is not
                # counted twice; the member is pending until it rejoins with that id.
                group.pending_members.add(new_member_id)
                self._schedule_expiry(group, new_member_id, now_ms + session_timeout_ms, pending=True)
                respond(JoinGroupResult(E.member_id_required, member_id=new_member_id))
            else:
                self._add_member_and_rebalance(group, new_member_id, None, *args, respond, now_ms)
        else:
            self._join_current_member(
                group,
                member_id,
                group_instance_id,
                client_id,
                client_host,
                session_timeout_ms,
                rebalance_timeout_ms,
                protocol_type,
                protocols,
                respond,
                now_ms,
            )
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group, now_ms)

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        """group.max.size: Kafka's acceptJoiningMember."""
        if group.is_state(GroupState.EMPTY):
            return True
        if group.is_state(GroupState.PREPARING_REBALANCE):
            # Counting members awaiting join (not the group size) lets the last rejoiners be kicked out
            # when the limit was lowered.
            return (
                group.has(member_id) and group.get(member_id).awaiting_join
            ) or group.num_members_awaiting_join < self.group_max_size
        return group.has(member_id) or len(group.members) < self.group_max_size

    def _join_current_member(
        self,
        group: GroupMetadata,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        respond: Respond[JoinGroupResult],
        now_ms: int,
    ) -> None:
        """Kafka's doCurrentMemberJoinGroup."""
        if member_id in group.pending_members:
            # The MEMBER_ID_REQUIRED round trip is done: the member is accepted now (pending members are never static).
            self._add_member_and_rebalance(
                group,
                member_id,
                None,
                client_id,
                client_host,
                session_timeout_ms,
                rebalance_timeout_ms,
                protocol_type,
                protocols,
                respond,
                now_ms,
            )
            return
        if group.is_static_member_fenced(group_instance_id, member_id):
            respond(JoinGroupResult(E.fenced_instance_id, member_id=member_id))
            return
        instance_unknown = group_instance_id is not None and group.static_member_id(group_instance_id) is None
        if not group.has(member_id) or instance_unknown:
            respond(JoinGroupResult(E.unknown_member_id, member_id=member_id))
            return
        member = group.get(member_id)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(
                group, member, protocols, rebalance_timeout_ms, session_timeout_ms, respond, now_ms
            )
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # Same metadata: the member probably missed its JoinGroup response; resend this generation's.
                respond(self._join_result(group, member_id))
            else:
                self._update_member_and_rebalance(
                    group, member, protocols, rebalance_timeout_ms, session_timeout_ms, respond, now_ms
                )
        else:  # Stable (an Empty group has no members, so the membership checks above answered already)
            if group.is_leader(member_id) or not member.matches(protocols):
                # A JoinGroup from the leader forces a rebalance: that is how a consumer leader reacts to
                # metadata changes that do not change any member's subscription.
                self._update_member_and_rebalance(
                    group, member, protocols, rebalance_timeout_ms, session_timeout_ms, respond, now_ms
                )
            else:
                respond(self._join_result(group, member_id, with_members=False))

    def _join_result(self, group: GroupMetadata, member_id: str, *, with_members: bool = True) -> JoinGroupResult:
        """This generation's JoinGroup answer for a member; the leader also gets every member's metadata."""
        return JoinGroupResult(
            E.none,
            member_id=member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            members=group.current_member_metadata() if with_members and group.is_leader(member_id) else (),
        )

    def _add_member_and_rebalance(
        self,
        group: GroupMetadata,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        respond: Respond[JoinGroupResult],
        now_ms: int,
    ) -> None:
        """Kafka's addMemberAndRebalance."""
        member = MemberMetadata(
            member_id=member_id,
            group_instance_id=group_instance_id,
            client_id=client_id,
            client_host=client_host,
            rebalance_timeout_ms=rebalance_timeout_ms,
            session_timeout_ms=session_timeout_ms,
            protocol_type=protocol_type,
            protocols=protocols,
            is_new=True,
        )
        # A new member during the first rebalance extends the initial delay (InitialDelayedJoin).
        if group.is_state(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, respond)
        self._schedule_heartbeat(group, member, now_ms, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, now_ms)

    def _update_member_and_rebalance(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        respond: Respond[JoinGroupResult],
        now_ms: int,
    ) -> None:
        """A known member rejoins: new metadata and timeouts (as the Java GroupMetadataManager takes them), rebalance."""
        self._supersede_join(group, member)
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, respond)
        self._maybe_prepare_rebalance(group, now_ms)

    def _supersede_join(self, group: GroupMetadata, member: MemberMetadata) -> None:
        """A member re-sent JoinGroup while one was pending: answer the old request so every request gets one answer.

        Kafka drops the old callback (the client stopped waiting for it); REBALANCE_IN_PROGRESS makes a
        client that still waits simply rejoin.
        """
        group.maybe_invoke_join(member, JoinGroupResult(E.rebalance_in_progress, member_id=member.member_id))

    def _update_static_member_and_rebalance(
        self,
        group: GroupMetadata,
        old_member_id: str,
        new_member_id: str,
        group_instance_id: str,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        support_skip_assignment: bool,
        respond: Respond[JoinGroupResult],
        now_ms: int,
    ) -> None:
        """KIP-345: a known static member restarted (new member id); replace it, fence the old id.

        In a Stable group whose chosen protocol would not change, this needs no rebalance: the new member
        id is persisted and the member gets the current generation back.
        """
        current_leader = group.leader_id
        member = group.replace_static_member(group_instance_id, old_member_id, new_member_id)
        self._timers.cancel(("heartbeat", group.group_id, old_member_id))
        self._schedule_heartbeat(group, member, now_ms)
        old_protocols = list(member.protocols)
        old_rebalance_timeout_ms = member.rebalance_timeout_ms
        old_session_timeout_ms = member.session_timeout_ms
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, respond)
        if group.is_state(GroupState.STABLE):
            if group.select_protocol() != group.protocol_name:
                self._maybe_prepare_rebalance(group, now_ms)
                return
            assignment = {m.member_id: m.assignment for m in group.members.values()}
            error = self._store_group(group, assignment, now_ms)
            if error != E.none:
                # Persisting the new member id failed: put the old member back and fail this join.
                group.update_member(member, old_protocols, old_rebalance_timeout_ms, old_session_timeout_ms, None)
                old = group.replace_static_member(group_instance_id, new_member_id, old_member_id)
                self._timers.cancel(("heartbeat", group.group_id, new_member_id))
                self._schedule_heartbeat(group, old, now_ms)
                respond(
                    JoinGroupResult(
                        error,
                        generation_id=group.generation_id,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader=current_leader or "",
                    )
                )
            elif support_skip_assignment:
                # v9+: a static leader learns it leads but skips the assignor; the group stays Stable.
                is_leader = group.is_leader(new_member_id)
                result = self._join_result(group, new_member_id, with_members=is_leader)
                group.maybe_invoke_join(member, replace(result, skip_assignment=is_leader))
            else:
                # Before v9 the old leader id is returned, so a restarted static leader does not run a
                # trivial assignment that a Stable group would never hand out.
                group.maybe_invoke_join(
                    member,
                    JoinGroupResult(
                        E.none,
                        member_id=new_member_id,
                        generation_id=group.generation_id,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader=current_leader or "",
                    ),
                )
        elif group.is_state(GroupState.COMPLETING_REBALANCE):
            # The leader may already have been given the old member id to assign to: start over.
            self._prepare_rebalance(group, now_ms)
        # PreparingRebalance: the member simply waits for the rebalance like everyone else.

    # --- rebalance machinery -----------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: GroupMetadata, now_ms: int) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, now_ms)

    def _prepare_rebalance(self, group: GroupMetadata, now_ms: int) -> None:
        """Kafka's prepareRebalance: cancel pending syncs, start waiting for members to (re)join."""
        # Kafka logs this at INFO ("Preparing to rebalance group ..."); DEBUG here, as the issue asks for rebalances.
        log.debug("preparing to rebalance group %s in state %s with old generation %d (%d members)",
                  group.group_id, group.state.value, group.generation_id, len(group.members))
        if group.is_state(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, E.rebalance_in_progress, now_ms)
        self._timers.cancel(("sync", group.group_id))
        if group.is_state(GroupState.EMPTY):
            # group.initial.rebalance.delay.ms: let more of a starting group's members arrive first.
            delay = self.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms - delay, 0)
            group.transition_to(GroupState.PREPARING_REBALANCE, now_ms)
            self._schedule_initial_join(group, delay, remaining, now_ms)
        else:
            group.transition_to(GroupState.PREPARING_REBALANCE, now_ms)
            self._schedule_join(group, now_ms)
            self._try_complete_join(group, now_ms)

    def _schedule_join(self, group: GroupMetadata, now_ms: int, wait_ms: int | None = None) -> None:
        """Kafka's DelayedJoin: complete when all members rejoined or after the rebalance timeout."""
        self._initial_delay.discard(group.group_id)
        self._timers.set(
            ("join", group.group_id),
            now_ms + (group.rebalance_timeout_ms if wait_ms is None else wait_ms),
            lambda now: self._complete_join(group, now),
        )

    def _schedule_initial_join(self, group: GroupMetadata, delay_ms: int, remaining_ms: int, now_ms: int) -> None:
        """Kafka's InitialDelayedJoin: wait ``delay_ms``; extend (up to the rebalance timeout) while members keep arriving."""
        self._initial_delay.add(group.group_id)

        def fire(now: int) -> None:
            if self._groups.get(group.group_id) is not group:
                return
            if group.new_member_added and remaining_ms != 0:
                group.new_member_added = False
                next_delay = min(self.initial_rebalance_delay_ms, remaining_ms)
                self._schedule_initial_join(group, next_delay, max(remaining_ms - delay_ms, 0), now)
            else:
                self._complete_join(group, now)

        self._timers.set(("join", group.group_id), now_ms + delay_ms, fire)

    def _try_complete_join(self, group: GroupMetadata, now_ms: int) -> None:
        """Complete a (non-initial) rebalance as soon as every member has rejoined."""
        key = ("join", group.group_id)
        if key in self._timers and group.group_id not in self._initial_delay and group.has_all_members_joined():
            self._complete_join(group, now_ms)

    def _complete_join(self, group: GroupMetadata, now_ms: int) -> None:
        """Kafka's onCompleteJoin: drop dynamic members that did not rejoin, start the next generation."""
        self._timers.cancel(("join", group.group_id))
        self._initial_delay.discard(group.group_id)
        if self._groups.get(group.group_id) is not group:
            return
        for member in group.not_yet_rejoined():
            if not member.is_static:  # static members keep their place until their session expires
                self._drop_member(group, member)
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined (only absent static members remain): keep waiting until sessions expire them.
            log.error("group %s could not complete rebalance because no members rejoined", group.group_id)
            # With rebalance_timeout_ms=0 an immediate retry would spin; wait for a session to end instead.
            wait_ms = group.rebalance_timeout_ms or min(m.session_timeout_ms for m in group.members.values())
            self._schedule_join(group, now_ms, wait_ms)
            return
        group.init_next_generation(now_ms)
        log.debug("group %s: generation %d with %d members (protocol %s)", group.group_id, group.generation_id,
                  len(group.members), group.protocol_name)
        if group.is_state(GroupState.EMPTY):
            error = self._store_group(group, {}, now_ms)
            if error != E.none:
                log.warning("failed to write empty group %s: %s", group.group_id, error.name)
            return
        for member in list(group.members.values()):
            group.maybe_invoke_join(member, self._join_result(group, member.member_id))
            self._schedule_heartbeat(group, member, now_ms)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self._schedule_pending_sync(group, now_ms)

    def _schedule_pending_sync(self, group: GroupMetadata, now_ms: int) -> None:
        """Members that got a JoinGroup answer must SyncGroup within the rebalance timeout or be removed."""
        generation = group.generation_id

        def expire(now: int) -> None:
            if self._groups.get(group.group_id) is not group or group.generation_id != generation:
                return
            if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE) and group.pending_sync_members:
                for member_id in list(group.pending_sync_members):
                    if group.has(member_id):
                        self._drop_member(group, group.get(member_id))
                    group.pending_sync_members.discard(member_id)
                self._prepare_rebalance(group, now)

        self._timers.set(("sync", group.group_id), now_ms + group.rebalance_timeout_ms, expire)

    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            self._timers.cancel(("sync", group.group_id))

    def _set_and_propagate_assignment(self, group: GroupMetadata, assignment: Mapping[str, bytes], now_ms: int) -> None:
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate_assignment(group, E.none, now_ms)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode, now_ms: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error, now_ms)

    def _propagate_assignment(self, group: GroupMetadata, error: ErrorCode, now_ms: int) -> None:
        """Answer every waiting SyncGroup; answered members start a fresh session."""
        ok = error == E.none
        for member in list(group.members.values()):
            result = SyncGroupResult(
                error,
                protocol_type=group.protocol_type if ok else None,
                protocol_name=group.protocol_name if ok else None,
                assignment=member.assignment,
            )
            if group.maybe_invoke_sync(member, result):
                self._schedule_heartbeat(group, member, now_ms)

    # --- sessions ----------------------------------------------------------------------------

    def _schedule_heartbeat(
        self, group: GroupMetadata, member: MemberMetadata, now_ms: int, timeout_ms: int | None = None
    ) -> None:
        """(Re)start the member's session: it is expired unless it heartbeats (or is mid-rebalance) in time."""
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self._schedule_expiry(group, member.member_id, now_ms + timeout, pending=False)

    def _schedule_expiry(self, group: GroupMetadata, member_id: str, deadline_ms: int, *, pending: bool) -> None:
        def expire(now: int) -> None:
            if self._groups.get(group.group_id) is not group:
                return
            if pending:
                if member_id in group.pending_members:
                    self._remove_pending_member(group, member_id, now)
            elif group.has(member_id):
                member = group.get(member_id)
                # Kafka's hasSatisfiedHeartbeat: members waiting in a rebalance are not expired, except
                # new members, whose JoinGroup times out instead.
                if member.is_new or not (member.awaiting_join or member.awaiting_sync):
                    log.info("member %s in group %s has failed, removing it", member_id, group.group_id)
                    self._remove_member_and_update_group(group, member, now)

        self._timers.set(("heartbeat", group.group_id, member_id), deadline_ms, expire)

    def _drop_member(self, group: GroupMetadata, member: MemberMetadata) -> None:
        """Remove a member and its session; a SyncGroup it still waits on is answered (Kafka lets it time out)."""
        group.maybe_invoke_sync(member, SyncGroupResult(E.unknown_member_id))
        group.remove(member.member_id)
        self._timers.cancel(("heartbeat", group.group_id, member.member_id))

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, now_ms: int) -> None:
        """Kafka's removeMemberAndUpdateGroup: a member left or expired; rebalance the rest."""
        # A new member may expire with its JoinGroup pending: UNKNOWN_MEMBER_ID makes a live client rejoin.
        group.maybe_invoke_join(member, JoinGroupResult(E.unknown_member_id))
        self._drop_member(group, member)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, now_ms)
        elif group.is_state(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group, now_ms)

    def _remove_pending_member(self, group: GroupMetadata, member_id: str, now_ms: int) -> None:
        group.remove(member_id)
        self._timers.cancel(("heartbeat", group.group_id, member_id))
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group, now_ms)

    # --- SyncGroup, Heartbeat, LeaveGroup ----------------------------------------------------

    def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        assignments: Mapping[str, bytes],
        *,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        now_ms: int,
        respond: Respond[SyncGroupResult],
    ) -> None:
        """SyncGroup: the leader sends every member's assignment; followers wait for it. Protocol checks are v5+."""
        error = self._validate_group_status(group_id)
        if error == E.coordinator_load_in_progress:
            # The rebalance state was lost with the load: REBALANCE_IN_PROGRESS makes the member rejoin
            # (older clients do not expect COORDINATOR_LOAD_IN_PROGRESS here), as Kafka does.
            respond(SyncGroupResult(E.rebalance_in_progress))
            return
        if error is not None:
            respond(SyncGroupResult(error))
            return
        group = self._groups.get(group_id)
        if group is None:
            respond(SyncGroupResult(E.unknown_member_id))
            return
        error = self._validate_current_member(group, member_id, group_instance_id)
        if error is None and generation_id != group.generation_id:
            error = E.illegal_generation
        if error is None and protocol_type is not None and protocol_type != group.protocol_type:
            error = E.inconsistent_group_protocol
        if error is None and protocol_name is not None and protocol_name != group.protocol_name:
            error = E.inconsistent_group_protocol
        if error is not None:
            respond(SyncGroupResult(error))
            return
        if group.is_state(GroupState.EMPTY):
            respond(SyncGroupResult(E.unknown_member_id))
        elif group.is_state(GroupState.PREPARING_REBALANCE):
            respond(SyncGroupResult(E.rebalance_in_progress))
        elif group.is_state(GroupState.COMPLETING_REBALANCE):
            member = group.get(member_id)
            old = member.sync_respond
            member.sync_respond = respond
            if old is not None:  # a re-sent SyncGroup supersedes the old one; answer it too
                old(SyncGroupResult(E.rebalance_in_progress))
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                # Members the leader left out get an empty assignment.
                assignment = {mid: bytes(assignments.get(mid, b"")) for mid in group.members}
                error = self._store_group(group, assignment, now_ms)
                if error != E.none:
                    self._reset_and_propagate_assignment_error(group, error, now_ms)
                    self._maybe_prepare_rebalance(group, now_ms)
                else:
                    self._set_and_propagate_assignment(group, assignment, now_ms)
                    group.transition_to(GroupState.STABLE, now_ms)
        else:  # Stable: hand out the current assignment again
            self._remove_pending_sync_member(group, member_id)
            member = group.get(member_id)
            respond(SyncGroupResult(E.none, group.protocol_type, group.protocol_name, member.assignment))
            self._schedule_heartbeat(group, member, now_ms)

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        *,
        now_ms: int,
        respond: Respond[HeartbeatResult],
    ) -> None:
        """Heartbeat: keeps the session alive; REBALANCE_IN_PROGRESS tells the member to rejoin."""
        error = self._validate_group_status(group_id)
        if error == E.coordinator_load_in_progress:
            respond(HeartbeatResult(E.none))  # the group is still loading: answer blindly, as Kafka does
            return
        if error is not None:
            respond(HeartbeatResult(error))
            return
        group = self._groups.get(group_id)
        if group is None:
            respond(HeartbeatResult(E.unknown_member_id))
            return
        error = self._validate_current_member(group, member_id, group_instance_id)
        if error is None and generation_id != group.generation_id:
            error = E.illegal_generation
        if error is not None:
            respond(HeartbeatResult(error))
            return
        if group.is_state(GroupState.EMPTY):
            respond(HeartbeatResult(E.unknown_member_id))
            return
        self._schedule_heartbeat(group, group.get(member_id), now_ms)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            respond(HeartbeatResult(E.rebalance_in_progress))
        else:
            # CompletingRebalance counts as normal: consumers may heartbeat between JoinGroup and SyncGroup.
            respond(HeartbeatResult(E.none))

    def leave_group(
        self,
        group_id: str,
        members: Sequence[MemberIdentity],
        *,
        now_ms: int,
        respond: Respond[LeaveGroupResult],
    ) -> None:
        """LeaveGroup: v0-v2 name one member, v3+ a batch (KIP-345), by member id or by group.instance.id."""
        error = self._validate_group_status(group_id)
        if error is not None:
            respond(LeaveGroupResult(error))
            return
        group = self._groups.get(group_id)
        if group is None:
            respond(
                LeaveGroupResult(
                    E.none,
                    tuple(LeaveMemberResult(m.member_id, m.group_instance_id, E.unknown_member_id) for m in members),
                )
            )
            return
        results = []
        for leaving in members:
            member_id = leaving.member_id
            if member_id == "":
                # Administrative removal by group.instance.id alone.
                current = group.static_member_id(leaving.group_instance_id)
                if current is not None:
                    self._remove_member_and_update_group(group, group.get(current), now_ms)
                    member_error = E.none
                else:
                    member_error = E.unknown_member_id
            elif member_id in group.pending_members:
                self._remove_pending_member(group, member_id, now_ms)
                member_error = E.none
            else:
                member_error = self._validate_current_member(group, member_id, leaving.group_instance_id) or E.none
                if member_error == E.none:
                    self._remove_member_and_update_group(group, group.get(member_id), now_ms)
            results.append(LeaveMemberResult(member_id, leaving.group_instance_id, member_error))
        respond(LeaveGroupResult(E.none, tuple(results)))

    # --- offsets -----------------------------------------------------------------------------

    def offset_commit(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: Sequence[CommitOffset],
        *,
        retention_time_ms: int = DEFAULT_RETENTION_TIME,
        now_ms: int,
        respond: Respond[OffsetCommitResult],
    ) -> None:
        """OffsetCommit (v2+ checks). Generation -1 with an empty member id is a simple consumer's commit.

        ``retention_time_ms`` is v2-v4's field; anything but -1 stores an explicit expire timestamp.
        The gateway answers UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist before calling this.
        """

        def fail(error: ErrorCode) -> None:
            respond(OffsetCommitResult({(o.topic, o.partition): error for o in offsets}))

        error = self._validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            fail(error)
            return
        group = self._groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # A commit from a generation of a group this coordinator does not know.
                fail(E.illegal_generation)
                return
            # A group that uses Kafka only to store offsets.
            group = self._groups[group_id] = GroupMetadata(group_id, now_ms)
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if error is not None:
            fail(error)
        elif group.is_state(GroupState.COMPLETING_REBALANCE):
            # The member has this generation from its JoinGroup but no assignment yet.
            fail(E.rebalance_in_progress)
        else:
            if group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
                # Commits are allowed while preparing; the heartbeat tells the member to rejoin.
                self._schedule_heartbeat(group, group.get(member_id), now_ms)
            self._store_offsets(group, offsets, retention_time_ms, now_ms, respond)

    def _validate_offset_commit(
        self, group: GroupMetadata, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode | None:
        if generation_id >= 0 or member_id != "" or group_instance_id is not None:
            error = self._validate_current_member(group, member_id, group_instance_id)
            if error is None and generation_id != group.generation_id:
                error = E.illegal_generation
            return error
        if not group.is_state(GroupState.EMPTY):
            return E.unknown_member_id  # only members may commit for a group that has members
        return None

    def _metadata_fits(self, metadata: str | None) -> bool:
        """offset.metadata.max.bytes, measured like Java's String.length (UTF-16 code units)."""
        return (
            metadata is None
            or len(metadata.encode("utf-16-le", "surrogatepass")) // 2 <= self.offset_metadata_max_bytes
        )

    def _store_offsets(
        self,
        group: GroupMetadata,
        offsets: Sequence[CommitOffset],
        retention_time_ms: int,
        now_ms: int,
        respond: Respond[OffsetCommitResult],
    ) -> None:
        """Append the commits, then cache them (Kafka's storeOffsets); oversized metadata fails per partition."""
        expire = None if retention_time_ms == DEFAULT_RETENTION_TIME else now_ms + retention_time_ms
        values: dict[TopicPartition, OffsetCommitValue] = {}
        for o in offsets:
            if self._metadata_fits(o.metadata):
                values[(o.topic, o.partition)] = OffsetCommitValue(
                    offset=o.offset,
                    leader_epoch=o.leader_epoch,
                    metadata=o.metadata or "",
                    commit_timestamp=now_ms if o.commit_timestamp in (None, -1) else o.commit_timestamp,
                    expire_timestamp=expire,
                )
        error = E.none
        if values:
            records = [offset_record(group.group_id, tp, v) for tp, v in values.items()]
            error = self._append(self.partition_for(group.group_id), records, now_ms, E.invalid_commit_offset_size)
            if error == E.none and self._groups.get(group.group_id) is group:
                group.offsets.update(values)
        respond(
            OffsetCommitResult(
                {
                    (o.topic, o.partition): error if self._metadata_fits(o.metadata) else E.offset_metadata_too_large
                    for o in offsets
                }
            )
        )

    # --- transactional offsets (KIP-98, KIP-447) -------------------------------------------------

    def txn_offset_commit(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: Sequence[CommitOffset],
        *,
        now_ms: int,
        respond: Respond[OffsetCommitResult],
    ) -> None:
        """TxnOffsetCommit: the offsets are written in the producer's transaction and become the group's on COMMIT.

        KIP-447: a member id / generation given by the producer (the consumer's group metadata) must be the
        group's current ones (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID), as Kafka's
        GroupCoordinator.handleTxnCommitOffsets checks them.
        """

        def fail(error: ErrorCode) -> None:
            respond(OffsetCommitResult({(o.topic, o.partition): error for o in offsets}))

        error = self._validate_txn_commit(group_id, generation_id, member_id, group_instance_id, now_ms)
        if error is not None:
            fail(error)
            return
        values = {
            (o.topic, o.partition): OffsetCommitValue(o.offset, o.leader_epoch, o.metadata or "", now_ms, None)
            for o in offsets if self._metadata_fits(o.metadata)
        }
        error = E.none
        if values:
            records = [offset_record(group_id, tp, v) for tp, v in values.items()]
            error = self._append(self.partition_for(group_id), records, now_ms, E.invalid_commit_offset_size,
                                 producer=(producer_id, producer_epoch))
            if error == E.none:
                self._pending_txn.setdefault(producer_id, {}).setdefault(group_id, {}).update(values)
        respond(OffsetCommitResult({
            (o.topic, o.partition): error if self._metadata_fits(o.metadata) else E.offset_metadata_too_large
            for o in offsets
        }))

    def _validate_txn_commit(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None, now_ms: int
    ) -> ErrorCode | None:
        """The group checks of a TxnOffsetCommit; a group unknown here is created for a commit without a member."""
        error = self._validate_group_status(group_id)
        if error is not None:
            return error
        group = self._groups.get(group_id)
        if group is None:
            if generation_id >= 0 or member_id:
                return E.illegal_generation if generation_id >= 0 else E.unknown_member_id
            group = self._groups[group_id] = GroupMetadata(group_id, now_ms)
        if member_id and not group.has(member_id):
            return E.unknown_member_id
        if group_instance_id is not None and member_id and self._validate_current_member(group, member_id, group_instance_id):
            return E.fenced_instance_id
        if generation_id >= 0 and generation_id != group.generation_id:
            return E.illegal_generation
        return None

    def complete_txn(
        self, producer_id: int, producer_epoch: int, commit: bool, partitions: Iterable[int], now_ms: int
    ) -> set[int]:
        """Write the transaction's marker to these offsets partitions; on COMMIT its offsets become the groups'.

        Returns the partitions whose marker could not be written (the transaction coordinator retries them).
        """
        failed = set()
        pending = self._pending_txn.get(producer_id, {})
        for partition in partitions:
            try:
                self._log.append_marker(partition, producer_id, producer_epoch, commit, now_ms)
            except (KafkaError, OSError) as exc:
                log.warning("transaction marker on __consumer_offsets-%d failed: %s", partition, exc)
                failed.add(partition)
                continue
            for group_id in [g for g in pending if self.partition_for(g) == partition]:
                offsets = pending.pop(group_id)
                if commit:
                    # A group that only stores offsets may exist only through this commit (e.g. after a restart).
                    group = self._groups.get(group_id) or self._groups.setdefault(group_id, GroupMetadata(group_id, now_ms))
                    group.offsets.update(offsets)
        if not pending:
            self._pending_txn.pop(producer_id, None)
        return failed

    def offset_fetch(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition] | None,
        *,
        require_stable: bool = False,
        now_ms: int,
        respond: Respond[OffsetFetchResult],
    ) -> None:
        """OffsetFetch for one group: the given partitions, or every committed one when ``partitions`` is None.

        Offsets are returned whatever the group state (the group may not use Kafka's group management).
        With ``require_stable`` (v7+, KIP-447) a partition with a transactional commit awaiting its marker gets
        UNSTABLE_OFFSET_COMMIT and offset -1, so a read_committed consumer retries instead of starting from a
        stale offset.
        """
        error = self._validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            respond(OffsetFetchResult(error))
            return
        group = self._groups.get(group_id)
        committed = group.offsets if group is not None else {}
        wanted = sorted(committed) if partitions is None else partitions
        result = []
        pending = {tp for groups in self._pending_txn.values() for tp in groups.get(group_id, ())} if require_stable else ()
        for topic, partition in wanted:
            value = committed.get((topic, partition))
            if (topic, partition) in pending:
                result.append(FetchedOffset(topic, partition, -1, -1, "", E.unstable_offset_commit))
            elif value is None:
                result.append(FetchedOffset(topic, partition, -1, -1, ""))
            else:
                result.append(FetchedOffset(topic, partition, value.offset, value.leader_epoch, value.metadata))
        respond(OffsetFetchResult(E.none, tuple(result)))

    def offset_delete(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition],
        *,
        now_ms: int,
        respond: Respond[OffsetDeleteResult],
    ) -> None:
        """OffsetDelete: only for an Empty group, or for topics no member of a consumer group subscribes to."""
        error = self._validate_group_status(group_id)
        if error is not None:
            respond(OffsetDeleteResult(error))
            return
        group = self._groups.get(group_id)
        if group is None:
            respond(OffsetDeleteResult(E.group_id_not_found))
            return
        errors: dict[TopicPartition, ErrorCode] = {}
        if group.is_state(GroupState.EMPTY):
            eligible = list(partitions)
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            eligible = []
            for tp in partitions:
                if group.is_subscribed_to_topic(tp[0]):
                    errors[tp] = E.group_subscribed_to_topic
                else:
                    eligible.append(tp)
        else:
            respond(OffsetDeleteResult(E.non_empty_group))
            return
        if eligible:
            self._cleanup_groups([group], lambda g: _remove_offsets(g, eligible), now_ms)
            errors.update((tp, E.none) for tp in eligible)
        respond(OffsetDeleteResult(E.none, {tp: errors[tp] for tp in partitions}))

    def expire_offsets(self, now_ms: int) -> int:
        """offsets.retention.minutes: drop expired offsets (writing tombstones) and empty groups left with none.

        Kafka's rules: an Empty group's offsets expire retention after it became empty (or after the commit,
        for groups loaded from old records); a Stable consumer group only loses offsets of topics no member
        subscribes to; a simple consumer's offsets expire retention after their commit. Returns the number
        of offsets removed.
        """
        return self._cleanup_groups(
            list(self._groups.values()),
            lambda g: g.remove_expired_offsets(now_ms, self.offsets_retention_ms),
            now_ms,
        )

    def _cleanup_groups(
        self,
        groups: Iterable[GroupMetadata],
        remove: OffsetRemover,
        now_ms: int,
    ) -> int:
        """Kafka's cleanupGroupMetadata: remove offsets, drop groups left Empty without offsets, write tombstones."""
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = {}
        removed = 0
        for group in groups:
            removed_offsets = remove(group)
            removed += len(removed_offsets)
            records = by_partition.setdefault(self.partition_for(group.group_id), [])
            records.extend(offset_tombstone(group.group_id, tp) for tp in removed_offsets)
            if group.is_state(GroupState.EMPTY) and not group.offsets:
                group.transition_to(GroupState.DEAD, now_ms)
                del self._groups[group.group_id]
                self._initial_delay.discard(group.group_id)
                # Generation 0 groups only ever stored offsets and have no metadata record to delete.
                if group.generation_id > 0:
                    records.append(group_tombstone(group.group_id))
        for partition, records in by_partition.items():
            if records:
                # Like Kafka, the cache is updated even if the tombstones fail to land; the next expiry
                # run or a compaction of stale data cannot resurrect a group that has members.
                error = self._append(partition, records, now_ms, E.unknown_server_error)
                if error != E.none:
                    log.warning(
                        "failed to write %d tombstones to partition %d: %s", len(records), partition, error.name
                    )
        return removed

    # --- group administration ----------------------------------------------------------------

    def describe_groups(self, group_ids: Sequence[str], *, now_ms: int, respond: Respond[DescribeGroupsResult]) -> None:
        """DescribeGroups: an unknown group is reported as Dead without error, as Kafka does."""
        described = []
        for group_id in group_ids:
            error = self._validate_group_status(group_id, allow_empty_id=True)
            group = self._groups.get(group_id)
            if error is not None:
                described.append(DescribedGroup(group_id, error))
            elif group is None:
                described.append(DescribedGroup(group_id, E.none, GroupState.DEAD.value))
            else:
                described.append(_describe(group))
        respond(DescribeGroupsResult(tuple(described)))

    def list_groups(
        self,
        states_filter: Collection[str] = (),
        types_filter: Collection[str] = (),
        *,
        now_ms: int,
        respond: Respond[ListGroupsResult],
    ) -> None:
        """ListGroups (v4 states filter, v5 types filter; both case-insensitive, empty means all).

        Every group here is a "classic" group. While partitions load, the groups known so far come back
        with COORDINATOR_LOAD_IN_PROGRESS, as Kafka does.
        """
        states = {s.lower() for s in states_filter}
        types = {t.lower() for t in types_filter}
        error = E.coordinator_load_in_progress if self.loading else E.none
        if types and CLASSIC_GROUP_TYPE not in types:
            respond(ListGroupsResult(error))
            return
        groups = tuple(
            ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
            for g in self._groups.values()
            if not states or g.state.value.lower() in states
        )
        respond(ListGroupsResult(error, groups))

    def delete_groups(self, group_ids: Sequence[str], *, now_ms: int, respond: Respond[DeleteGroupsResult]) -> None:
        """DeleteGroups: only Empty groups (NON_EMPTY_GROUP otherwise); their offsets and metadata are tombstoned."""
        errors: dict[str, ErrorCode] = {}
        eligible: list[GroupMetadata] = []
        for group_id in group_ids:
            error = self._validate_group_status(group_id, allow_empty_id=True)
            group = self._groups.get(group_id)
            if error is not None:
                errors[group_id] = error
            elif group is None:
                errors[group_id] = E.group_id_not_found
            elif group.is_state(GroupState.EMPTY):
                if group not in eligible:
                    eligible.append(group)
                errors[group_id] = E.none
            else:
                errors[group_id] = E.non_empty_group
        if eligible:
            self._cleanup_groups(eligible, _remove_all_offsets, now_ms)
        respond(DeleteGroupsResult({gid: errors[gid] for gid in group_ids}))

    # --- shared checks and persistence -------------------------------------------------------

    def _validate_group_status(self, group_id: str | None, *, allow_empty_id: bool = False) -> ErrorCode | None:
        """Kafka's validateGroupStatus; the empty group id is allowed only for offset and admin APIs."""
        if group_id is None or (group_id == "" and not allow_empty_id):
            return E.invalid_group_id
        if self.partition_for(group_id) not in self._loaded:
            return E.coordinator_load_in_progress
        return None

    @staticmethod
    def _validate_current_member(
        group: GroupMetadata, member_id: str, group_instance_id: str | None
    ) -> ErrorCode | None:
        """The instance id (if given) maps to this member id, and the member exists (Kafka's validateCurrentMember)."""
        if group_instance_id is not None:
            if group.static_member_id(group_instance_id) is None:
                return E.unknown_member_id
            if group.is_static_member_fenced(group_instance_id, member_id):
                return E.fenced_instance_id
            return None
        if not group.has(member_id):
            return E.unknown_member_id
        return None

    def _store_group(self, group: GroupMetadata, assignment: Mapping[str, bytes], now_ms: int) -> ErrorCode:
        """Persist the group's metadata record; returns the error to answer with (Kafka's storeGroup)."""
        return self._append(
            self.partition_for(group.group_id), [group_record(group, assignment)], now_ms, E.unknown_server_error
        )

    def _append(
        self, partition: int, records: list[tuple[bytes, bytes | None]], now_ms: int, too_large: ErrorCode,
        producer: tuple[int, int] | None = None,
    ) -> ErrorCode:
        """Append and map a storage failure to the coordinator error Kafka's GroupMetadataManager answers."""
        try:
            if producer is None:
                self._log.append(partition, records, now_ms)
            else:
                self._log.append(partition, records, now_ms, producer=producer)
        except KafkaError as e:
            log.warning("append to __consumer_offsets-%d failed: %s", partition, e)
            return _map_append_error(e.error_code, too_large)
        except OSError as e:
            log.warning("append to __consumer_offsets-%d failed: %s", partition, e)
            return E.not_coordinator  # Kafka maps KAFKA_STORAGE_ERROR to NOT_COORDINATOR
        return E.none


def _remove_offsets(group: GroupMetadata, partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
    removed = [tp for tp in partitions if tp in group.offsets]
    for tp in removed:
        del group.offsets[tp]
    return removed


def _remove_all_offsets(group: GroupMetadata) -> list[TopicPartition]:
    removed = list(group.offsets)
    group.offsets.clear()
    return removed


def _describe(group: GroupMetadata) -> DescribedGroup:
    """Kafka's GroupMetadata.summary: member metadata and assignments only when Stable."""
    stable = group.is_state(GroupState.STABLE)
    protocol = (group.protocol_name or "") if stable else ""
    members = tuple(
        DescribedMember(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            metadata=m.metadata(protocol) if stable else b"",
            assignment=m.assignment if stable else b"",
        )
        for m in group.members.values()
    )
    return DescribedGroup(group.group_id, E.none, group.state.value, group.protocol_type or "", protocol, members)


def _map_append_error(error: ErrorCode, too_large: ErrorCode) -> ErrorCode:
    """Kafka's mapping of produce errors on __consumer_offsets to coordinator errors."""
    if error in (
        E.unknown_topic_or_partition,
        E.not_enough_replicas,
        E.not_enough_replicas_after_append,
        E.request_timed_out,
    ):
        return E.coordinator_not_available
    if error in (E.not_leader_or_follower, E.kafka_storage_error):
        return E.not_coordinator
    if error in (E.message_too_large, E.record_list_too_large, E.invalid_fetch_size):
        return too_large
    return error
