"""Random request storms: the coordinator never raises and answers every request exactly once."""

from __future__ import annotations

import random

import pytest
from coordinator_harness import Cluster, Reply, subscription

from logway.coordinator.results import JoinGroupResult, MemberIdentity

PROTOCOLS = [[("range", subscription("t"))], [("range", subscription("t", "u")), ("rr", subscription("u"))]]


def run_storm(seed: int) -> tuple[list[Reply], set[str]]:
    """300 random requests and clock moves over two groups; returns every reply and the states seen."""
    rng = random.Random(seed)
    cluster = Cluster(initial_rebalance_delay_ms=rng.choice([0, 3000]))
    groups = ["g1", "g2"]
    # What clients learned from successful JoinGroup answers: (member id, instance id, generation).
    known: dict[str, list[tuple[str, str | None, int]]] = {g: [] for g in groups}
    joins: list[tuple[str, str | None, Reply]] = []
    replies: list[Reply] = []
    states: set[str] = set()
    for _ in range(300):
        group = rng.choice(groups)
        member_id, instance, generation = (
            rng.choice(known[group]) if known[group] and rng.random() < 0.8 else ("", None, -1)
        )
        action = rng.randrange(8)
        if action == 0:
            instance = rng.choice([None, None, "i1", "i2"])
            reply = cluster.join(
                group,
                member_id if instance is None else "",
                instance=instance,
                protocols=rng.choice(PROTOCOLS),
                session=rng.choice([6000, 10_000]),
                rebalance=rng.choice([0, 6000, 20_000]),
            )
            joins.append((group, instance, reply))
            replies.append(reply)
        elif action == 1:
            assignments = {m: b"x" for m, _, _ in known[group]}
            replies.append(cluster.sync(group, generation, member_id, assignments, instance=instance))
        elif action == 2:
            cluster.heartbeat(group, generation, member_id, instance)
        elif action == 3:
            replies.append(cluster.leave(group, MemberIdentity(member_id, instance)))
        elif action == 4:
            cluster.commit(
                group, {("t", rng.randrange(3)): rng.randrange(100)}, generation=generation, member_id=member_id
            )
        elif action == 5:
            cluster.advance(rng.choice([100, 1000, 5000, 15_000]))
        elif action == 6:
            cluster.gc.expire_offsets(cluster.now)
        else:
            reply = Reply()
            cluster.gc.delete_groups([group], now_ms=cluster.now, respond=reply)
            replies.append(reply)
        for g, inst, reply in joins:
            result = reply.results[0] if reply.done else None
            if isinstance(result, JoinGroupResult) and result.member_id:
                known[g].append((result.member_id, inst, result.generation_id))
        joins = [(g, inst, r) for g, inst, r in joins if not r.done]
        states |= {cluster.state(g) for g in groups}
    # Once every client goes quiet, sessions and rebalance timeouts answer whatever was still waiting.
    for _ in range(20):
        cluster.advance(60_000)
    return replies, states


@pytest.mark.parametrize("seed", range(20))
def test_every_request_is_answered_exactly_once(seed: int) -> None:
    replies, _ = run_storm(seed)  # Reply itself fails the test on a second answer
    assert all(r.done for r in replies)


def test_storms_reach_every_state() -> None:
    """The storms are worth something only if they drive groups through the whole state machine."""
    seen: set[str] = set()
    for seed in range(20):
        seen |= run_storm(seed)[1]
    assert seen >= {"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}
