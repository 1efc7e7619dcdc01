"""KIP-848 migration on a fake log and clock: classic members inside a consumer group, the online upgrade of a
classic group when a ConsumerGroupHeartbeat arrives, and the downgrade when the last such member leaves."""

from __future__ import annotations

import pytest
from coordinator_harness import Cluster, subscription

from logway.coordinator.consumer_protocol import encode_assignment, parse_assignment
from logway.coordinator.results import MemberIdentity
from logway.coordinator.topics_image import TopicsSnapshot
from logway.wire.errors import ErrorCode as E


@pytest.fixture
def mixed() -> Cluster:
    topics = TopicsSnapshot()
    topics.add("t", 4)
    return Cluster(topics=topics, consumer_assignment_interval_ms=0, initial_rebalance_delay_ms=0)


def classic_partitions(assignment: bytes) -> set[int]:
    parsed = parse_assignment(assignment)
    assert parsed is not None
    return set(parsed[0].get("t", ()))


def test_a_classic_member_joins_a_consumer_group_and_gets_its_share(mixed: Cluster) -> None:
    a = mixed.consumer_join("g", "a")
    joined = mixed.join_new("g")
    assert joined.error == E.none
    member, generation = joined.value.member_id, joined.value.generation_id
    assert (generation, joined.value.leader, joined.value.members) == (3, "", ())  # no leader: the coordinator assigns
    assert classic_partitions(mixed.sync("g", generation, member).value.assignment) == set()  # a still owns them
    kept = mixed.consumer_heartbeat("g", "a", 2, owned={t: tuple(p) for t, p in a.assignment.items()})
    mixed.consumer_heartbeat("g", "a", 2, owned={t: tuple(p) for t, p in kept.assignment.items()})
    # a released its half: the classic member is told to rejoin, and then gets it.
    assert mixed.heartbeat("g", generation, member) == E.rebalance_in_progress
    rejoined = mixed.join("g", member)
    synced = mixed.sync("g", rejoined.value.generation_id, member)
    assert len(classic_partitions(synced.value.assignment)) == 2
    assert mixed.heartbeat("g", rejoined.value.generation_id, member) == E.none
    types = sorted(m.member_type for m in mixed.consumer_describe("g").members)
    assert types == [0, 1]  # one classic, one consumer-protocol member


def test_a_consumer_heartbeat_upgrades_a_classic_group(mixed: Cluster) -> None:
    members, generation = mixed.stable_group("g", 2)
    # Give the classic members real assignments (the harness's are placeholders), as a leader would.
    first = mixed.join("g", members[0], protocols=[("range", subscription("t"))])
    second = mixed.join("g", members[1], protocols=[("range", subscription("t"))])
    generation = first.value.generation_id
    tid = mixed.topics.topic_id("t")
    assert tid is not None
    assignments = {members[0]: encode_assignment({"t": [0, 1]}, 1), members[1]: encode_assignment({"t": [2, 3]}, 1)}
    mixed.sync("g", generation, second.value.member_id)
    mixed.sync("g", generation, first.value.member_id, assignments)
    joined = mixed.consumer_join("g", "new")
    assert joined.error_code == E.none and joined.member_epoch == generation + 1
    described = mixed.consumer_describe("g")
    assert sorted(m.member_type for m in described.members) == [0, 0, 1]
    assert mixed.describe("g").state == "Dead"  # no longer a classic group
    assert mixed.heartbeat("g", generation, members[0]) == E.rebalance_in_progress
    assert Cluster(log=mixed.log, topics=mixed.topics).consumer_describe("g") == described  # it reloads as such


def test_the_last_consumer_protocol_member_leaving_downgrades_the_group(mixed: Cluster) -> None:
    mixed.consumer_join("g", "a")
    joined = mixed.join_new("g")
    member = joined.value.member_id
    mixed.sync("g", joined.value.generation_id, member)
    assert mixed.consumer_heartbeat("g", "a", -1).error_code == E.none
    assert mixed.consumer_describe("g").error_code == E.group_id_not_found
    assert mixed.state("g") == "PreparingRebalance"  # a classic group again, rebalancing
    assert mixed.heartbeat("g", joined.value.generation_id, member) == E.rebalance_in_progress
    rejoined = mixed.join("g", member)
    mixed.advance(1)
    assert rejoined.error == E.none and rejoined.value.leader == member  # the classic protocol, with a leader


def test_classic_requests_to_a_consumer_group_check_the_member(mixed: Cluster) -> None:
    mixed.consumer_join("g", "a")
    assert mixed.heartbeat("g", 2, "a") == E.unknown_member_id  # a uses ConsumerGroupHeartbeat
    assert mixed.sync("g", 2, "nobody").error == E.unknown_member_id
    joined = mixed.join_new("g")
    assert mixed.heartbeat("g", joined.value.generation_id + 1, joined.value.member_id) == E.illegal_generation
    left = mixed.leave("g", MemberIdentity(joined.value.member_id), MemberIdentity("nobody"))
    assert [m.error_code for m in left.value.members] == [E.none, E.unknown_member_id]
    assert [m.member_id for m in mixed.consumer_describe("g").members] == ["a"]


def test_a_classic_member_that_does_not_sync_is_fenced(mixed: Cluster) -> None:
    mixed.consumer_join("g", "a")
    joined = mixed.join_new("g", rebalance=5_000, session=60_000)
    assert len(mixed.consumer_describe("g").members) == 2
    mixed.advance(5_001)
    assert [m.member_id for m in mixed.consumer_describe("g").members] == ["a"]
    assert mixed.heartbeat("g", joined.value.generation_id, joined.value.member_id) == E.unknown_member_id


def test_migration_disabled(mixed: Cluster) -> None:
    strict = Cluster(topics=mixed.topics, consumer_migration_policy="disabled", initial_rebalance_delay_ms=0)
    strict.consumer_join("g", "a")
    assert strict.join("g").error == E.inconsistent_group_protocol
    strict.stable_group("c", 1)
    assert strict.consumer_join("c", "x").error_code == E.group_id_not_found
