"""Classic group membership: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and the rebalance state machine, sans-IO.

Every request method takes the request's fields, ``now_ms`` and a ``respond`` callback that is called
exactly once: at once, or later from another call or from a timer (the coordinator's ``tick`` runs them).
``respond`` must not call back into the coordinator. Behaviour follows Kafka's classic protocol
(kafka.coordinator.group.GroupCoordinator in 3.x); comments name the exceptions.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace

from logway.coordinator.group import GroupMetadata, GroupState
from logway.coordinator.group_cache import GroupCache
from logway.coordinator.group_config import GroupConfig
from logway.coordinator.member import MemberMetadata
from logway.coordinator.results import (
    HeartbeatResult,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResult,
    LeaveGroupResult,
    LeaveMemberResult,
    MemberIdentity,
    Respond,
    SyncGroupResult,
)
from logway.coordinator.timers import Timers
from logway.wire.errors import ErrorCode

__all__ = ["Membership", "validate_current_member", "validate_member_generation"]

log = logging.getLogger(__name__)

E = ErrorCode
# Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a member that joined but never completed a rebalance
# cannot heartbeat, so its JoinGroup is timed out after this long instead.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


class Membership:
    """Members, rebalances and sessions of the classic groups in a ``GroupCache``; its timers go in ``timers``."""

    def __init__(self, cache: GroupCache, timers: Timers, config: GroupConfig) -> None:
        self._cache = cache
        self._timers = timers
        self._config = config
        # Groups whose pending join is Kafka's InitialDelayedJoin (never completes early).
        self._initial_delay: set[str] = set()

    def start_sessions(self, group: GroupMetadata, now_ms: int) -> None:
        """Kafka's onGroupLoaded: the members of a loaded group get a fresh session from the load time."""
        for member in group.members.values():
            self.schedule_heartbeat(group, member, now_ms)

    def forget(self, group_id: str) -> None:
        """The group left the cache: drop what the rebalance machinery keeps about it."""
        self._initial_delay.discard(group_id)

    def hand_over(self, group: GroupMetadata) -> None:
        """The group becomes a KIP-848 consumer group (Kafka's convertToConsumerGroup): waiting JoinGroup and
        SyncGroup requests get REBALANCE_IN_PROGRESS, so their members rejoin the consumer group; timers go."""
        for member in list(group.members.values()):
            group.maybe_invoke_join(member, JoinGroupResult(E.rebalance_in_progress, member_id=member.member_id))
            group.maybe_invoke_sync(member, SyncGroupResult(E.rebalance_in_progress))
            self._timers.cancel(("heartbeat", group.group_id, member.member_id))
        for member_id in group.pending_members:
            self._timers.cancel(("heartbeat", group.group_id, member_id))
        self._timers.cancel(("join", group.group_id))
        self._timers.cancel(("sync", group.group_id))
        self.forget(group.group_id)

    def take_over(self, group: GroupMetadata, now_ms: int) -> None:
        """A consumer group became this classic group (Kafka's convertToClassicGroup): sessions start, and a
        rebalance makes the members rejoin under the classic protocol."""
        for member in group.members.values():
            self.schedule_heartbeat(group, member, now_ms)
        self._maybe_prepare_rebalance(group, now_ms)

    # --- JoinGroup ---------------------------------------------------------------------------

    def join_group(self, request: JoinGroupRequest, *, now_ms: int, respond: Respond[JoinGroupResult]) -> None:
        """JoinGroup: answered when the rebalance completes, or at once with an error or MEMBER_ID_REQUIRED."""
        group, error = self._group_to_join(request, now_ms)
        if group is None:
            respond(JoinGroupResult(error, member_id=request.member_id))
            return
        request = replace(request, protocols=[(name, bytes(metadata)) for name, metadata in request.protocols])
        if not self._accept_joining_member(group, request.member_id):
            group.remove(request.member_id)
            self._timers.cancel(("heartbeat", group.group_id, request.member_id))
            respond(JoinGroupResult(E.group_max_size_reached))
        elif not group.supports_protocols(request.protocol_type, (name for name, _ in request.protocols)):
            respond(JoinGroupResult(E.inconsistent_group_protocol, member_id=request.member_id))
        elif request.member_id == "":
            self._join_unknown_member(group, request, respond, now_ms)
        else:
            self._join_current_member(group, request, respond, now_ms)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group, now_ms)

    def _group_to_join(self, request: JoinGroupRequest, now_ms: int) -> tuple[GroupMetadata | None, ErrorCode]:
        """The group to join (created for a first join without a member id), or None and the error to answer."""
        error = self._cache.validate_group_status(request.group_id)
        if error is not None:
            return None, error
        if not self._config.min_session_timeout_ms <= request.session_timeout_ms <= self._config.max_session_timeout_ms:
            return None, E.invalid_session_timeout
        if self._cache.share(request.group_id) is not None:
            return None, E.inconsistent_group_protocol  # Kafka: the group exists but is not a consumer group
        consumer = self._cache.consumer(request.group_id)
        if consumer is not None:
            # KIP-848: an empty consumer group becomes a classic group on a JoinGroup (Kafka deletes it first);
            # a consumer group with members would take the member in with the classic protocol, which Logway does
            # not do yet: Kafka's answer when group.consumer.migration.policy=disabled.
            if not consumer.is_empty():
                return None, E.inconsistent_group_protocol
            error = self._cache.replace_consumer(consumer, now_ms)
            if error != E.none:
                return None, error
        if self._cache.get(request.group_id) is None and request.member_id != "":
            return None, E.unknown_member_id
        return self._cache.get_or_create(request.group_id, now_ms), E.none

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        """group.max.size: Kafka's acceptJoiningMember."""
        if group.is_state(GroupState.EMPTY):
            return True
        if group.is_state(GroupState.PREPARING_REBALANCE):
            # Counting members awaiting join (not the group size) lets the last rejoiners be kicked out
            # when the limit was lowered.
            return (
                group.has(member_id) and group.get(member_id).awaiting_join
            ) or group.num_members_awaiting_join < self._config.group_max_size
        return group.has(member_id) or len(group.members) < self._config.group_max_size

    def _join_unknown_member(
        self, group: GroupMetadata, request: JoinGroupRequest, respond: Respond[JoinGroupResult], now_ms: int
    ) -> None:
        """A join without a member id: a new member id, or a restarted static member's place (KIP-345)."""
        member_id = group.generate_member_id(request.client_id, request.group_instance_id)
        instance_id = request.group_instance_id
        if instance_id is not None:
            old_member_id = group.static_member_id(instance_id)
            if old_member_id is not None:
                self._update_static_member_and_rebalance(group, old_member_id, member_id, request, respond, now_ms)
            else:
                self._add_member_and_rebalance(group, _new_member(request, member_id, instance_id), respond, now_ms)
        elif request.require_known_member_id:
            # KIP-394: hand out the member id first, so a client that times out and retries is not
            # counted twice; the member is pending until it rejoins with that id.
            group.pending_members.add(member_id)
            self._schedule_expiry(group, member_id, now_ms + request.session_timeout_ms, pending=True)
            respond(JoinGroupResult(E.member_id_required, member_id=member_id))
        else:
            self._add_member_and_rebalance(group, _new_member(request, member_id, None), respond, now_ms)

    def _join_current_member(
        self, group: GroupMetadata, request: JoinGroupRequest, respond: Respond[JoinGroupResult], now_ms: int
    ) -> None:
        """Kafka's doCurrentMemberJoinGroup."""
        member_id = request.member_id
        if member_id in group.pending_members:
            # The MEMBER_ID_REQUIRED round trip is done: the member is accepted now (pending members are never static).
            self._add_member_and_rebalance(group, _new_member(request, member_id, None), respond, now_ms)
            return
        if group.is_static_member_fenced(request.group_instance_id, member_id):
            respond(JoinGroupResult(E.fenced_instance_id, member_id=member_id))
            return
        instance_id = request.group_instance_id
        instance_unknown = instance_id is not None and group.static_member_id(instance_id) is None
        if not group.has(member_id) or instance_unknown:
            respond(JoinGroupResult(E.unknown_member_id, member_id=member_id))
            return
        member = group.get(member_id)
        answer = _current_answer(group, member, request.protocols)
        if answer is not None:
            respond(answer)
        else:
            self._update_member_and_rebalance(group, member, request, respond, now_ms)

    def _add_member_and_rebalance(
        self, group: GroupMetadata, member: MemberMetadata, respond: Respond[JoinGroupResult], now_ms: int
    ) -> None:
        """Kafka's addMemberAndRebalance."""
        # A new member during the first rebalance extends the initial delay (InitialDelayedJoin).
        if group.is_state(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, respond)
        self.schedule_heartbeat(group, member, now_ms, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, now_ms)

    def _update_member_and_rebalance(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        request: JoinGroupRequest,
        respond: Respond[JoinGroupResult],
        now_ms: int,
    ) -> None:
        """A known member rejoins: new metadata and timeouts (as the Java GroupMetadataManager takes them), rebalance."""
        self._supersede_join(group, member)
        group.update_member(member, request.protocols, request.rebalance_timeout_ms, request.session_timeout_ms, respond)
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
        request: JoinGroupRequest,
        respond: Respond[JoinGroupResult],
        now_ms: int,
    ) -> None:
        """KIP-345: a known static member restarted (new member id); replace it, fence the old id.

        In a Stable group whose chosen protocol would not change, this needs no rebalance: the new member
        id is persisted and the member gets the current generation back.
        """
        current_leader = group.leader_id
        instance_id = request.group_instance_id
        assert instance_id is not None
        member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        self._move_session(group, old_member_id, member, now_ms)
        previous = (list(member.protocols), member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(member, request.protocols, request.rebalance_timeout_ms, request.session_timeout_ms, respond)
        if group.is_state(GroupState.STABLE):
            if group.select_protocol() != group.protocol_name:
                self._maybe_prepare_rebalance(group, now_ms)
                return
            assignment = {m.member_id: m.assignment for m in group.members.values()}
            error = self._cache.store_group(group, assignment, now_ms)
            if error != E.none:
                # Persisting the new member id failed: put the old member back and fail this join.
                group.update_member(member, *previous, None)
                old = group.replace_static_member(instance_id, new_member_id, old_member_id)
                self._move_session(group, new_member_id, old, now_ms)
                respond(_generation_result(group, error, "", current_leader))
            else:
                result = _static_rejoin_result(group, new_member_id, current_leader, request.support_skip_assignment)
                group.maybe_invoke_join(member, result)
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
            delay = self._config.initial_rebalance_delay_ms
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
            if not self._cache.is_cached(group):
                return
            if group.new_member_added and remaining_ms != 0:
                group.new_member_added = False
                next_delay = min(self._config.initial_rebalance_delay_ms, remaining_ms)
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
        if not self._cache.is_cached(group):
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
            error = self._cache.store_group(group, {}, now_ms)
            if error != E.none:
                log.warning("failed to write empty group %s: %s", group.group_id, error.name)
            return
        for member in list(group.members.values()):
            group.maybe_invoke_join(member, _join_result(group, member.member_id))
            self.schedule_heartbeat(group, member, now_ms)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self._schedule_pending_sync(group, now_ms)

    def _schedule_pending_sync(self, group: GroupMetadata, now_ms: int) -> None:
        """Members that got a JoinGroup answer must SyncGroup within the rebalance timeout or be removed."""
        generation = group.generation_id

        def expire(now: int) -> None:
            if not self._cache.is_cached(group) or group.generation_id != generation:
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
                self.schedule_heartbeat(group, member, now_ms)

    # --- sessions ----------------------------------------------------------------------------

    def schedule_heartbeat(
        self, group: GroupMetadata, member: MemberMetadata, now_ms: int, timeout_ms: int | None = None
    ) -> None:
        """(Re)start the member's session: it is expired unless it heartbeats (or is mid-rebalance) in time."""
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self._schedule_expiry(group, member.member_id, now_ms + timeout, pending=False)

    def _move_session(self, group: GroupMetadata, old_member_id: str, member: MemberMetadata, now_ms: int) -> None:
        """A static member's id changed: its session restarts under the new id."""
        self._timers.cancel(("heartbeat", group.group_id, old_member_id))
        self.schedule_heartbeat(group, member, now_ms)

    def _schedule_expiry(self, group: GroupMetadata, member_id: str, deadline_ms: int, *, pending: bool) -> None:
        def expire(now: int) -> None:
            if not self._cache.is_cached(group):
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
        group, error = self._group_of_member(group_id, member_id, group_instance_id, generation_id)
        if error == E.coordinator_load_in_progress:
            # The rebalance state was lost with the load: REBALANCE_IN_PROGRESS makes the member rejoin
            # (older clients do not expect COORDINATOR_LOAD_IN_PROGRESS here), as Kafka does.
            error = E.rebalance_in_progress
        elif error is None:
            error = _protocol_mismatch(group, protocol_type, protocol_name)
        if error is not None:
            respond(SyncGroupResult(error))
        elif group.is_state(GroupState.EMPTY):
            respond(SyncGroupResult(E.unknown_member_id))
        elif group.is_state(GroupState.PREPARING_REBALANCE):
            respond(SyncGroupResult(E.rebalance_in_progress))
        elif group.is_state(GroupState.COMPLETING_REBALANCE):
            self._await_assignment(group, group.get(member_id), assignments, respond, now_ms)
        else:  # Stable: hand out the current assignment again
            self._remove_pending_sync_member(group, member_id)
            member = group.get(member_id)
            respond(SyncGroupResult(E.none, group.protocol_type, group.protocol_name, member.assignment))
            self.schedule_heartbeat(group, member, now_ms)

    def _await_assignment(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        assignments: Mapping[str, bytes],
        respond: Respond[SyncGroupResult],
        now_ms: int,
    ) -> None:
        """CompletingRebalance: the member waits for the leader's assignment; the leader's SyncGroup brings it."""
        old = member.sync_respond
        member.sync_respond = respond
        if old is not None:  # a re-sent SyncGroup supersedes the old one; answer it too
            old(SyncGroupResult(E.rebalance_in_progress))
        self._remove_pending_sync_member(group, member.member_id)
        if group.is_leader(member.member_id):
            self._assign(group, assignments, now_ms)

    def _assign(self, group: GroupMetadata, assignments: Mapping[str, bytes], now_ms: int) -> None:
        """Persist the leader's assignment with the group, answer every waiting member, and the group is Stable."""
        # Members the leader left out get an empty assignment.
        assignment = {mid: bytes(assignments.get(mid, b"")) for mid in group.members}
        error = self._cache.store_group(group, assignment, now_ms)
        if error != E.none:
            self._reset_and_propagate_assignment_error(group, error, now_ms)
            self._maybe_prepare_rebalance(group, now_ms)
        else:
            self._set_and_propagate_assignment(group, assignment, now_ms)
            group.transition_to(GroupState.STABLE, now_ms)

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
        group, error = self._group_of_member(group_id, member_id, group_instance_id, generation_id)
        if error == E.coordinator_load_in_progress:
            error = E.none  # the group is still loading: answer blindly, as Kafka does
        elif error is None and group.is_state(GroupState.EMPTY):
            error = E.unknown_member_id
        if error is not None:
            respond(HeartbeatResult(error))
            return
        self.schedule_heartbeat(group, group.get(member_id), now_ms)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            respond(HeartbeatResult(E.rebalance_in_progress))
        else:
            # CompletingRebalance counts as normal: consumers may heartbeat between JoinGroup and SyncGroup.
            respond(HeartbeatResult(E.none))

    def _group_of_member(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> tuple[GroupMetadata, None] | tuple[GroupMetadata | None, ErrorCode]:
        """(group, None) when the sender is the group's current member in this generation, else the error to answer."""
        error = self._cache.validate_group_status(group_id)
        if error is not None:
            return None, error
        group = self._cache.get(group_id)
        if group is None:
            return None, E.unknown_member_id
        return group, validate_member_generation(group, member_id, group_instance_id, generation_id)

    def leave_group(
        self,
        group_id: str,
        members: Sequence[MemberIdentity],
        *,
        now_ms: int,
        respond: Respond[LeaveGroupResult],
    ) -> None:
        """LeaveGroup: v0-v2 name one member, v3+ a batch (KIP-345), by member id or by group.instance.id."""
        error = self._cache.validate_group_status(group_id)
        if error is not None:
            respond(LeaveGroupResult(error))
            return
        group = self._cache.get(group_id)
        results = []
        for leaving in members:
            member_error = E.unknown_member_id if group is None else self._leave(group, leaving, now_ms)
            results.append(LeaveMemberResult(leaving.member_id, leaving.group_instance_id, member_error))
        respond(LeaveGroupResult(E.none, tuple(results)))

    def _leave(self, group: GroupMetadata, leaving: MemberIdentity, now_ms: int) -> ErrorCode:
        """Remove one leaving member; the error for its entry in the LeaveGroup answer."""
        member_id = leaving.member_id
        if member_id == "":
            # Administrative removal by group.instance.id alone.
            current = group.static_member_id(leaving.group_instance_id)
            if current is None:
                return E.unknown_member_id
            self._remove_member_and_update_group(group, group.get(current), now_ms)
            return E.none
        if member_id in group.pending_members:
            self._remove_pending_member(group, member_id, now_ms)
            return E.none
        error = validate_current_member(group, member_id, leaving.group_instance_id)
        if error is not None:
            return error
        self._remove_member_and_update_group(group, group.get(member_id), now_ms)
        return E.none


def validate_current_member(group: GroupMetadata, member_id: str, group_instance_id: str | None) -> ErrorCode | None:
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


def validate_member_generation(
    group: GroupMetadata, member_id: str, group_instance_id: str | None, generation_id: int
) -> ErrorCode | None:
    """``validate_current_member``, then ILLEGAL_GENERATION unless ``generation_id`` is the group's."""
    error = validate_current_member(group, member_id, group_instance_id)
    if error is None and generation_id != group.generation_id:
        error = E.illegal_generation
    return error


def _current_answer(
    group: GroupMetadata, member: MemberMetadata, protocols: Sequence[tuple[str, bytes]]
) -> JoinGroupResult | None:
    """This generation's answer again for a current member that needs no rebalance; None when it needs one."""
    state = group.state
    if state is GroupState.PREPARING_REBALANCE:
        return None
    if state is GroupState.COMPLETING_REBALANCE:
        # Same metadata: the member probably missed its JoinGroup response; resend this generation's.
        return _join_result(group, member.member_id) if member.matches(protocols) else None
    # Stable (an Empty group has no members, so the membership checks answered already).
    if group.is_leader(member.member_id) or not member.matches(protocols):
        # A JoinGroup from the leader forces a rebalance: that is how a consumer leader reacts to
        # metadata changes that do not change any member's subscription.
        return None
    return _join_result(group, member.member_id, with_members=False)


def _protocol_mismatch(group: GroupMetadata, protocol_type: str | None, protocol_name: str | None) -> ErrorCode | None:
    """SyncGroup v5+: INCONSISTENT_GROUP_PROTOCOL when the protocol type or name given is not the group's."""
    if protocol_type is not None and protocol_type != group.protocol_type:
        return E.inconsistent_group_protocol
    if protocol_name is not None and protocol_name != group.protocol_name:
        return E.inconsistent_group_protocol
    return None


def _new_member(request: JoinGroupRequest, member_id: str, group_instance_id: str | None) -> MemberMetadata:
    """The member a JoinGroup describes; new until it completes a rebalance."""
    return MemberMetadata(
        member_id=member_id,
        group_instance_id=group_instance_id,
        client_id=request.client_id,
        client_host=request.client_host,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        session_timeout_ms=request.session_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=list(request.protocols),
        is_new=True,
    )


def _generation_result(
    group: GroupMetadata,
    error: ErrorCode,
    member_id: str,
    leader: str | None,
    members: tuple[JoinGroupMember, ...] = (),
) -> JoinGroupResult:
    """A JoinGroup answer carrying the group's current generation and protocol."""
    return JoinGroupResult(
        error,
        member_id=member_id,
        generation_id=group.generation_id,
        protocol_type=group.protocol_type,
        protocol_name=group.protocol_name,
        leader=leader or "",
        members=members,
    )


def _join_result(group: GroupMetadata, member_id: str, *, with_members: bool = True) -> JoinGroupResult:
    """This generation's JoinGroup answer for a member; the leader also gets every member's metadata."""
    members = group.current_member_metadata() if with_members and group.is_leader(member_id) else ()
    return _generation_result(group, E.none, member_id, group.leader_id, members)


def _static_rejoin_result(
    group: GroupMetadata, member_id: str, previous_leader: str | None, support_skip_assignment: bool
) -> JoinGroupResult:
    """The answer to a restarted static member of a Stable group that keeps its generation (KIP-345)."""
    if support_skip_assignment:
        # v9+: a static leader learns it leads but skips the assignor; the group stays Stable.
        is_leader = group.is_leader(member_id)
        return replace(_join_result(group, member_id, with_members=is_leader), skip_assignment=is_leader)
    # Before v9 the old leader id is returned, so a restarted static leader does not run a
    # trivial assignment that a Stable group would never hand out.
    return _generation_result(group, E.none, member_id, previous_leader)
