"""The server-side partition assignors of KIP-848 consumer groups: ``uniform`` (the default) and ``range``.

Kafka's group-coordinator ``assignor`` package, sans-IO. An assignor gets every member's subscription (topic
ids of existing topics) and current target assignment, and the partition count of each topic, and returns
the new target assignment. ``range`` is Kafka's RangeAssignor exactly (members sorted by instance id, then
member id; each topic's partitions in contiguous ranges, the first ``partitions % members`` members one
more). ``uniform`` with every member subscribed to the same topics is Kafka's
UniformHomogeneousAssignmentBuilder (members keep what fits their quota; the rest go to members under
quota); with different subscriptions it is a simpler sticky greedy assignment than Kafka's
UniformHeterogeneousAssignmentBuilder: kept partitions stay, free ones go to the least loaded subscriber,
then partitions move one at a time from a subscriber holding two more than another (see
compat_tests/KAFKA_DIFFERENCES.md).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

__all__ = ["ASSIGNORS", "Assignor", "MemberSpec", "RangeAssignor", "UniformAssignor", "share_assign", "unknown_topics"]

Target = dict[str, dict[uuid.UUID, frozenset[int]]]


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """What the assignor knows of a member: its static instance id, subscribed topic ids, current target."""

    instance_id: str | None
    topics: frozenset[uuid.UUID]
    current: Mapping[uuid.UUID, frozenset[int]]


class Assignor(Protocol):
    name: str

    def assign(self, members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]) -> Target:
        """The new target assignment of every member; ``partitions`` has every subscribed topic's count."""
        ...


def unknown_topics(members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]) -> set[uuid.UUID]:
    """Subscribed topics with no partition count (Kafka's assignors fail on them; callers filter them out)."""
    return {t for m in members.values() for t in m.topics if t not in partitions}


def _homogeneous(members: Mapping[str, MemberSpec]) -> bool:
    subscriptions = {m.topics for m in members.values()}
    return len(subscriptions) <= 1


def _freeze(assignment: Mapping[uuid.UUID, set[int]]) -> dict[uuid.UUID, frozenset[int]]:
    return {t: frozenset(parts) for t, parts in assignment.items() if parts}


class RangeAssignor:
    """Kafka's server-side RangeAssignor (co-partitioned topics get the same ranges per member)."""

    name = "range"

    def assign(self, members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]) -> Target:
        order = sorted(members, key=lambda mid: (members[mid].instance_id is None, members[mid].instance_id or mid))
        subscribers: dict[uuid.UUID, int] = {}
        for mid in order:
            for t in members[mid].topics:
                subscribers[t] = subscribers.get(t, 0) + 1
        next_start = dict.fromkeys(subscribers, 0)
        extra = {t: partitions[t] % n for t, n in subscribers.items()}
        out: Target = {}
        for mid in order:
            assignment: dict[uuid.UUID, frozenset[int]] = {}
            for t in sorted(members[mid].topics):
                quota = partitions[t] // subscribers[t]
                if extra[t] > 0:
                    quota += 1
                    extra[t] -= 1
                start = next_start[t]
                end = min(start + quota, partitions[t])
                next_start[t] = end
                if start < end:
                    assignment[t] = frozenset(range(start, end))
            out[mid] = assignment
        return out


class UniformAssignor:
    """Kafka's UniformAssignor for homogeneous groups; a sticky greedy balance for heterogeneous ones."""

    name = "uniform"

    def assign(self, members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]) -> Target:
        if not members:
            return {}
        if _homogeneous(members):
            return _uniform_homogeneous(members, partitions)
        return _uniform_heterogeneous(members, partitions)


def _uniform_homogeneous(members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]) -> Target:
    """UniformHomogeneousAssignmentBuilder: quotas of total // members (+1 for the first total % members that can
    keep that many); members keep their partitions up to quota, the unassigned fill members under quota."""
    order = sorted(members)
    topics = sorted(next(iter(members.values())).topics)
    if not topics:
        return {mid: {} for mid in order}
    taken = {(t, p) for m in members.values() for t, parts in m.current.items() for p in parts}
    unassigned = [(t, p) for t in topics for p in range(partitions[t]) if (t, p) not in taken]
    min_quota, extra = divmod(sum(partitions[t] for t in topics), len(order))
    out: dict[str, dict[uuid.UUID, set[int]]] = {}
    unfilled: list[tuple[str, int]] = []
    for index, mid in enumerate(order):
        has_extra = extra > 0
        kept, quota = _keep_within_quota(members[mid], partitions, min_quota + has_extra, unassigned)
        if quota > 0 and has_extra and len(order) - index > extra:
            quota -= 1  # this member could not fill the extra slot: leave it to a later member
            has_extra = False
        if quota > 0:
            unfilled.append((mid, quota))
        extra -= has_extra
        out[mid] = kept
    position = 0
    for mid, quota in unfilled:
        for t, p in unassigned[position:position + quota]:
            out[mid].setdefault(t, set()).add(p)
        position += quota
    return {mid: _freeze(a) for mid, a in out.items()}


def _keep_within_quota(member: MemberSpec, partitions: Mapping[uuid.UUID, int], quota: int,
                       unassigned: list[tuple[uuid.UUID, int]]) -> tuple[dict[uuid.UUID, set[int]], int]:
    """The member keeps its current partitions of subscribed topics up to ``quota``; the rest are appended to
    ``unassigned``. Returns what it keeps and the quota left."""
    kept: dict[uuid.UUID, set[int]] = {}
    for t, parts in sorted(member.current.items()):
        if t not in member.topics:
            continue  # an unsubscribed topic: dropped
        for p in sorted(parts):
            if p >= partitions[t]:
                continue
            if quota > 0:
                kept.setdefault(t, set()).add(p)
                quota -= 1
            else:
                unassigned.append((t, p))
    return kept, quota


def _uniform_heterogeneous(members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]) -> Target:
    """Keep what members still subscribe to, give each free partition to its least loaded subscriber, then move
    partitions from a subscriber to another holding two fewer until no such pair is left."""
    order = sorted(members)
    out: dict[str, dict[uuid.UUID, set[int]]] = {mid: {} for mid in order}
    owner: dict[tuple[uuid.UUID, int], str] = {}
    for mid in order:
        for t, parts in sorted(members[mid].current.items()):
            if t in members[mid].topics:
                for p in sorted(parts):
                    if p < partitions[t] and (t, p) not in owner:
                        owner[(t, p)] = mid
                        out[mid].setdefault(t, set()).add(p)
    load = {mid: sum(len(parts) for parts in out[mid].values()) for mid in order}
    subscribers = {t: [mid for mid in order if t in members[mid].topics] for t in partitions}
    topics = sorted((t for t in partitions if subscribers[t]), key=lambda t: (len(subscribers[t]), str(t)))
    for t in topics:
        for p in range(partitions[t]):
            if (t, p) not in owner:
                mid = min(subscribers[t], key=lambda m: (load[m], m))
                owner[(t, p)] = mid
                out[mid].setdefault(t, set()).add(p)
                load[mid] += 1
    _rebalance(out, load, topics, subscribers)
    return {mid: _freeze(a) for mid, a in out.items()}


def _rebalance(out: dict[str, dict[uuid.UUID, set[int]]], load: dict[str, int], topics: list[uuid.UUID],
               subscribers: Mapping[uuid.UUID, list[str]]) -> None:
    """Move one partition at a time from a subscriber to one holding at least two fewer (each move lowers the
    spread, so this ends)."""
    moved = True
    while moved:
        moved = False
        for t in topics:
            donors = sorted((m for m in subscribers[t] if out[m].get(t)), key=lambda m: (-load[m], m))
            takers = sorted(subscribers[t], key=lambda m: (load[m], m))
            if donors and takers and load[donors[0]] > load[takers[0]] + 1:
                donor, taker = donors[0], takers[0]
                p = max(out[donor][t])
                out[donor][t].discard(p)
                out[taker].setdefault(t, set()).add(p)
                load[donor] -= 1
                load[taker] += 1
                moved = True


ASSIGNORS: dict[str, Assignor] = {a.name: a for a in (UniformAssignor(), RangeAssignor())}
"""The built-in assignors by name, in Kafka's default order (group.consumer.assignors = uniform,range)."""


def share_assign(members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]) -> Target:
    """KIP-932's ``simple`` share assignor: every partition of a subscribed topic goes to ceil(subscribers /
    partitions) of its subscribers (several members share a partition when there are more members than
    partitions), members as evenly loaded as possible; a member keeps what it had while that stays within
    those bounds (Kafka's SimpleAssignor aims at the same shape with its own order of choices)."""
    order = sorted(members)
    out: dict[str, dict[uuid.UUID, set[int]]] = {mid: {} for mid in order}
    load = dict.fromkeys(order, 0)
    topics = [t for t in sorted(partitions, key=str) if partitions[t] > 0
              and any(t in members[mid].topics for mid in order)]
    sharing = {t: -(-sum(t in members[mid].topics for mid in order) // partitions[t]) for t in topics}
    quota = -(-sum(sharing[t] * partitions[t] for t in topics) // len(order)) if order else 0
    for topic in topics:
        subscribers = [mid for mid in order if topic in members[mid].topics]
        for p in range(partitions[topic]):
            keep = [mid for mid in subscribers
                    if p in members[mid].current.get(topic, ()) and load[mid] < quota][:sharing[topic]]
            others = sorted((mid for mid in subscribers if mid not in keep), key=lambda m: (load[m], m))
            for mid in keep + others[:sharing[topic] - len(keep)]:
                out[mid].setdefault(topic, set()).add(p)
                load[mid] += 1
    return {mid: _freeze(a) for mid, a in out.items()}
