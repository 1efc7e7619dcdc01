"""KIP-848 reconciliation: moving one member from its current assignment towards its target, sans-IO.

Kafka's CurrentAssignmentBuilder. A member first revokes the partitions its target no longer holds (it stays
at its epoch in UNREVOKED_PARTITIONS until its heartbeat no longer reports them), then gets the partitions
of its target that no other member still owns and moves to the target epoch (UNRELEASED_PARTITIONS while
some are still owned by others, else STABLE). A partition is never owned by two members at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from logway.coordinator.consumer_group import Assignment, ConsumerGroupMember, EpochAssignment, MemberState

__all__ = ["FencedMember", "OwnedPartitions", "reconcile"]

OwnedPartitions = Mapping[uuid.UUID, Iterable[int]] | None
"""The partitions a heartbeat says the member owns (None: the heartbeat did not say)."""


class FencedMember(Exception):
    """The member is in a state this coordinator cannot reconcile from: it must rejoin (FENCED_MEMBER_EPOCH)."""


def reconcile(
    member: ConsumerGroupMember,
    *,
    target_epoch: int,
    target: Assignment,
    subscribed_topic_ids: frozenset[uuid.UUID],
    subscription_changed: bool,
    owned: OwnedPartitions,
    partition_epoch: Callable[[uuid.UUID, int], int],
) -> ConsumerGroupMember:
    """The member's next state (the same object when nothing changes), as CurrentAssignmentBuilder.build."""
    step = _Step(member, target_epoch, target, subscribed_topic_ids, owned, partition_epoch)
    if member.state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return step.next_assignment(member.member_epoch)
        return step.drop_unsubscribed() if subscription_changed else member
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if step.owns_any(member.pending_revocation):
            return step.drop_unsubscribed() if subscription_changed else member
        return step.next_assignment(member.member_epoch)
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return step.next_assignment(member.member_epoch)
    # UNKNOWN: a state a newer coordinator wrote; the member starts over with nothing.
    if owned is None or any(owned.values()):
        raise FencedMember("the member is in an unknown state and must rejoin")
    return step.next_assignment(target_epoch)


class _Step:
    def __init__(self, member: ConsumerGroupMember, target_epoch: int, target: Assignment,
                 subscribed: frozenset[uuid.UUID], owned: OwnedPartitions,
                 partition_epoch: Callable[[uuid.UUID, int], int]) -> None:
        self.member, self.target_epoch, self.target = member, target_epoch, target
        self.subscribed, self.owned, self.partition_epoch = subscribed, owned, partition_epoch

    def owns_any(self, partitions: EpochAssignment) -> bool:
        """The heartbeat still reports one of ``partitions`` (an unreported ownership counts as owning all)."""
        if self.owned is None:
            return True
        return any(p in partitions.get(t, {}) for t, parts in self.owned.items() for p in parts)

    def drop_unsubscribed(self) -> ConsumerGroupMember:
        """Kafka's updateCurrentAssignment: partitions of topics no longer subscribed go to pending revocation."""
        m = self.member
        if not self.subscribed and not m.pending_revocation:
            assigned: dict[uuid.UUID, Mapping[int, int]] = {}
            pending: dict[uuid.UUID, Mapping[int, int]] = dict(m.assigned)
        else:
            assigned = {t: parts for t, parts in m.assigned.items() if t in self.subscribed}
            pending = {t: dict(parts) for t, parts in m.pending_revocation.items()}
            for t, parts in m.assigned.items():
                if t not in self.subscribed:
                    pending[t] = {**pending.get(t, {}), **parts}
        if assigned == m.assigned:
            return m
        if pending and self.owns_any(pending):
            return replace(m.with_epoch(m.member_epoch), state=MemberState.UNREVOKED_PARTITIONS, assigned=assigned,
                           pending_revocation=pending)
        return replace(m.with_epoch(m.member_epoch), assigned=assigned)

    def next_assignment(self, epoch: int) -> ConsumerGroupMember:
        """Kafka's computeNextAssignment."""
        m = self.member
        assigned: dict[uuid.UUID, dict[int, int]] = {}
        revoking: dict[uuid.UUID, dict[int, int]] = {}
        incoming: dict[uuid.UUID, set[int]] = {}
        unreleased = False
        for t in set(self.target) | set(m.assigned):
            target = self.target.get(t, frozenset()) if t in self.subscribed else frozenset()
            current = m.assigned.get(t, {})
            keep = {p: e for p, e in current.items() if p in target}
            gone = {p: e for p, e in current.items() if p not in target}
            wanted = {p for p in target if p not in keep}
            free = {p for p in wanted if self.partition_epoch(t, p) == -1 or p in m.pending_revocation.get(t, {})}
            unreleased = unreleased or free != wanted
            for bucket, value in ((assigned, keep), (revoking, gone), (incoming, free)):
                if value:
                    bucket[t] = value  # type: ignore[assignment]
        if revoking and self.owns_any(revoking):
            return replace(m.with_epoch(epoch), state=MemberState.UNREVOKED_PARTITIONS, assigned=assigned,
                           pending_revocation=revoking)
        for t, parts in incoming.items():
            assigned.setdefault(t, {}).update(dict.fromkeys(parts, self.target_epoch))
        state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        return replace(m.with_epoch(self.target_epoch), state=state, assigned=assigned, pending_revocation={})
