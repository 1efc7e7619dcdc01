"""A parked JoinGroup or SyncGroup is answered within the rebalance timeout on every path (the issue's defect 11).

Each test parks a request, then takes one path that changes the group under it (another member leaves, expires,
rejoins, is replaced, the group is deleted or its offsets expire) and checks the parked request gets its answer
no later than the rebalance timeout. The storm at the end checks the same bound over random request sequences.
"""

from __future__ import annotations

import random

import pytest
from coordinator_harness import Cluster, Reply, subscription

from logway.coordinator.results import JoinGroupRequest, MemberIdentity
from logway.wire.errors import ErrorCode as E

REBALANCE = 20_000


def rebalance_started_by_leader(cluster: Cluster, n: int = 3) -> tuple[list[str], int, Reply]:
    """A Stable group of ``n`` whose leader rejoined: its JoinGroup is parked until the others rejoin."""
    members, generation = cluster.stable_group("g", n, session=10_000, rebalance=REBALANCE)
    parked = cluster.join("g", members[0], session=10_000, rebalance=REBALANCE)
    assert not parked.done and cluster.state("g") == "PreparingRebalance"
    return members, generation, parked


def test_parked_join_is_answered_when_the_missing_member_leaves(cluster: Cluster) -> None:
    members, generation, parked = rebalance_started_by_leader(cluster, 2)
    cluster.leave("g", MemberIdentity(members[1]))
    assert parked.error == E.none and parked.value.generation_id == generation + 1


def test_parked_join_is_answered_when_the_missing_member_expires(cluster: Cluster) -> None:
    members, generation, parked = rebalance_started_by_leader(cluster, 2)
    cluster.advance(10_000)  # members[1] never heartbeats again: its session ends before the rebalance timeout
    assert parked.error == E.none and parked.value.generation_id == generation + 1
    assert [m.member_id for m in cluster.describe("g").members] == [members[0]]


def test_parked_join_is_answered_at_the_rebalance_timeout_when_the_missing_member_heartbeats(cluster: Cluster) -> None:
    members, generation, parked = rebalance_started_by_leader(cluster, 2)
    for _ in range(3):
        cluster.advance(REBALANCE // 4)
        assert cluster.heartbeat("g", generation, members[1]) == E.rebalance_in_progress
    assert not parked.done
    cluster.advance(REBALANCE // 4)
    assert parked.error == E.none and parked.value.generation_id == generation + 1


def test_parked_join_resent_on_a_new_connection_answers_both(cluster: Cluster) -> None:
    members, generation, parked = rebalance_started_by_leader(cluster, 2)
    again = cluster.join("g", members[0], session=10_000, rebalance=REBALANCE)  # the client gave up and retried
    assert parked.error == E.rebalance_in_progress
    cluster.join("g", members[1], session=10_000, rebalance=REBALANCE)
    assert again.error == E.none and again.value.generation_id == generation + 1


def test_parked_join_of_a_member_removed_by_leave_is_answered(cluster: Cluster) -> None:
    members, _, parked = rebalance_started_by_leader(cluster, 2)
    cluster.leave("g", MemberIdentity(members[0]))  # LeaveGroup on another connection of the same client
    assert parked.error == E.unknown_member_id


def test_parked_join_survives_delete_groups_and_offset_expiry(cluster: Cluster) -> None:
    members, generation, parked = rebalance_started_by_leader(cluster, 2)
    reply = Reply()
    cluster.gc.delete_groups(["g"], now_ms=cluster.now, respond=reply)
    assert reply.value.groups["g"] == E.non_empty_group
    cluster.gc.expire_offsets(cluster.now + 10**10)
    cluster.join("g", members[1], session=10_000, rebalance=REBALANCE)
    assert parked.error == E.none and parked.value.generation_id == generation + 1


def completing_rebalance(cluster: Cluster) -> tuple[str, str, Reply]:
    """Two members got their JoinGroup answers; the follower's SyncGroup is parked waiting for the leader's."""
    a = cluster.join_new("g", session=10_000, rebalance=REBALANCE)
    b = cluster.join_new("g", session=10_000, rebalance=REBALANCE)
    cluster.advance(cluster.gc.config.initial_rebalance_delay_ms * 2)
    leader = a.value.leader
    follower = ({a.value.member_id, b.value.member_id} - {leader}).pop()
    parked = cluster.sync("g", 1, follower)
    assert not parked.done
    return leader, follower, parked


def test_parked_sync_is_answered_when_the_leader_session_expires(cluster: Cluster) -> None:
    _, follower, parked = completing_rebalance(cluster)
    cluster.advance(10_000)  # the leader neither syncs nor heartbeats: its session (10 s) ends first
    assert parked.error == E.rebalance_in_progress
    assert cluster.join("g", follower).value.generation_id == 2


def test_parked_sync_is_answered_when_the_leader_rejoins_with_new_metadata(cluster: Cluster) -> None:
    leader, _, parked = completing_rebalance(cluster)
    cluster.join("g", leader, protocols=[("range", subscription("t", "other"))], rebalance=REBALANCE)
    assert parked.error == E.rebalance_in_progress


def test_parked_sync_is_answered_when_the_leader_heartbeats_but_never_syncs(cluster: Cluster) -> None:
    leader, _, parked = completing_rebalance(cluster)
    for _ in range(3):
        cluster.advance(REBALANCE // 4)
        assert cluster.heartbeat("g", 1, leader) == E.none
    assert not parked.done
    cluster.advance(REBALANCE // 4)
    assert parked.error == E.rebalance_in_progress


def test_parked_sync_resent_answers_the_older_one(cluster: Cluster) -> None:
    leader, follower, parked = completing_rebalance(cluster)
    again = cluster.sync("g", 1, follower)
    assert parked.error == E.rebalance_in_progress
    cluster.sync("g", 1, leader, {leader: b"l", follower: b"f"})
    assert again.error == E.none and again.value.assignment == b"f"


def test_parked_sync_of_a_replaced_static_member_is_fenced(cluster: Cluster) -> None:
    a = cluster.join("g", instance="i-a", session=10_000, rebalance=REBALANCE)
    b = cluster.join("g", instance="i-b", session=10_000, rebalance=REBALANCE)
    cluster.advance(cluster.gc.config.initial_rebalance_delay_ms * 2)
    static = {a.value.member_id: "i-a", b.value.member_id: "i-b"}
    follower = ({a.value.member_id, b.value.member_id} - {a.value.leader}).pop()
    parked = cluster.sync("g", 1, follower, instance=static[follower])
    cluster.join("g", instance=static[follower], session=10_000, rebalance=REBALANCE)  # the instance restarted
    assert parked.error == E.fenced_instance_id


# --- random request sequences: the bound holds on every path they take ------------------------------------

PROTOCOLS = [[("range", subscription("t"))], [("range", subscription("t", "u")), ("rr", subscription("u"))]]
STEP = 500


class TimedReply(Reply):
    """Remembers when the request was parked and when it was answered (on the cluster's clock)."""

    def __init__(self, cluster: Cluster) -> None:
        super().__init__()
        self.cluster = cluster
        self.asked = cluster.now
        self.answered: int | None = None

    def __call__(self, result) -> None:
        super().__call__(result)
        self.answered = self.cluster.now


def timed_storm(seed: int) -> list[tuple[str, TimedReply]]:
    """400 random group requests with the clock moving in 0.5 s steps; every JoinGroup/SyncGroup reply."""
    rng = random.Random(seed)
    cluster = Cluster(initial_rebalance_delay_ms=rng.choice([0, 3000]))
    known: list[tuple[str, str | None, int]] = []
    parked: list[tuple[str, TimedReply]] = []
    for _ in range(400):
        member_id, instance, generation = rng.choice(known) if known and rng.random() < 0.8 else ("", None, -1)
        action = rng.randrange(6)
        if action == 0:
            instance = rng.choice([None, None, "i1", "i2"])
            reply = TimedReply(cluster)
            cluster.gc.join_group(JoinGroupRequest(
                "g", member_id if instance is None else "", instance, "consumer", rng.choice(PROTOCOLS),
                client_id="c", client_host="/h", session_timeout_ms=rng.choice([6000, 10_000]),
                rebalance_timeout_ms=rng.choice([0, 6000, REBALANCE]), require_known_member_id=True,
            ), now_ms=cluster.now, respond=reply)
            parked.append(("join", reply))
        elif action == 1:
            reply = TimedReply(cluster)
            cluster.gc.sync_group("g", generation, member_id, instance, {m: b"x" for m, _, _ in known},
                                  now_ms=cluster.now, respond=reply)
            parked.append(("sync", reply))
        elif action == 2:
            cluster.heartbeat("g", generation, member_id, instance)
        elif action == 3:
            cluster.leave("g", MemberIdentity(member_id, instance))
        else:
            for _ in range(rng.choice([1, 4, 20])):
                cluster.advance(STEP)
                for m, inst, gen in known[-4:]:  # live clients keep heartbeating while they wait
                    if rng.random() < 0.3:
                        cluster.heartbeat("g", gen, m, inst)
        for kind, reply in parked:
            value = reply.results[0] if reply.done else None
            if kind == "join" and value is not None and value.member_id and value.error_code == E.none:
                known.append((value.member_id, None, value.generation_id))
    for _ in range(200):
        cluster.advance(STEP)
    return parked


@pytest.mark.parametrize("seed", range(40))
def test_every_parked_request_is_answered_within_the_rebalance_timeout(seed: int) -> None:
    # The longest wait a client can be owed: the initial delay, then the largest rebalance timeout of a member.
    bound = 3000 + REBALANCE + STEP
    for kind, reply in timed_storm(seed):
        assert reply.answered is not None, f"{kind} asked at {reply.asked} never answered"
        assert reply.answered - reply.asked <= bound, f"{kind} waited {reply.answered - reply.asked} ms"
