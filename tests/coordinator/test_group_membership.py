"""JoinGroup / SyncGroup / Heartbeat / LeaveGroup behaviour of the classic protocol, driven by a fake clock."""

from __future__ import annotations

import logging
import uuid

from coordinator_harness import Cluster, subscription

from logway.coordinator.offsets_schema import decode_group_metadata_value, decode_key, encode_group_metadata_key
from logway.coordinator.results import MemberIdentity
from logway.wire.errors import ErrorCode as E


def test_first_v4_join_gets_a_member_id_to_rejoin_with(cluster: Cluster) -> None:
    reply = cluster.join("g", client_id="consumer-1")
    assert reply.error == E.member_id_required
    member_id = reply.value.member_id
    prefix, _, suffix = member_id.partition("consumer-1-")
    assert prefix == "" and uuid.UUID(suffix)
    # Until it rejoins the member is not in the group.
    assert cluster.describe("g").members == ()


def test_pre_v4_join_is_accepted_without_a_round_trip(cluster: Cluster) -> None:
    reply = cluster.join("g", require_known_member_id=False)
    cluster.advance(3000)
    assert reply.error == E.none and reply.value.generation_id == 1
    assert reply.value.leader == reply.value.member_id


def test_join_storm_of_a_starting_group_is_one_rebalance(cluster: Cluster) -> None:
    # Three consumers start within the initial delay; the delay is extended while members keep arriving.
    a = cluster.join_new("g")
    cluster.advance(1000)
    b = cluster.join_new("g")
    cluster.advance(1500)
    c = cluster.join_new("g")
    cluster.advance(500)  # t=3000: first delay ends, but members arrived: wait another 3000
    assert not (a.done or b.done or c.done)
    cluster.advance(2999)
    assert not a.done
    cluster.advance(1)
    results = [r.value for r in (a, b, c)]
    assert {r.error_code for r in results} == {E.none}
    assert {r.generation_id for r in results} == {1}
    leader = results[0].leader
    assert {r.leader for r in results} == {leader}
    leader_result = next(r for r in results if r.member_id == leader)
    assert {m.member_id for m in leader_result.members} == {r.member_id for r in results}
    assert all(r.members == () for r in results if r.member_id != leader)
    assert all(m.metadata == subscription("t") for m in leader_result.members)


def test_many_members_joining_at_once_get_one_generation(cluster: Cluster) -> None:
    replies = [cluster.join_new("g", client_id=f"c{i}") for i in range(50)]
    cluster.advance(6000)
    assert {r.value.generation_id for r in replies} == {1}
    assert len({r.value.member_id for r in replies}) == 50
    assert cluster.state("g") == "CompletingRebalance"


def test_initial_rebalance_delay_is_configurable(make_cluster) -> None:
    cluster = make_cluster(initial_rebalance_delay_ms=0)
    reply = cluster.join_new("g")
    assert cluster.gc.next_deadline() == cluster.now
    cluster.advance(0)
    assert reply.value.generation_id == 1


def test_followers_wait_for_the_leaders_assignment(cluster: Cluster) -> None:
    a, b = cluster.join_new("g"), cluster.join_new("g")
    cluster.advance(6000)
    leader = a.value.leader
    follower = b.value.member_id if b.value.member_id != leader else a.value.member_id
    follower_sync = cluster.sync("g", 1, follower)
    assert not follower_sync.done
    appends_before = cluster.log.appends
    leader_sync = cluster.sync("g", 1, leader, {leader: b"L", follower: b"F"}, protocol_type="consumer")
    assert leader_sync.value.assignment == b"L" and leader_sync.value.protocol_name == "range"
    assert follower_sync.value.assignment == b"F" and follower_sync.value.protocol_type == "consumer"
    assert cluster.state("g") == "Stable"
    # The new generation was written to __consumer_offsets before anyone was answered.
    assert cluster.log.appends == appends_before + 1
    partition = cluster.gc.partition_for("g")
    key, value = cluster.log.partitions[partition][-1]
    assert key == encode_group_metadata_key("g")
    stored = decode_group_metadata_value(value)
    assert stored.generation == 1 and stored.leader == leader and stored.protocol == "range"
    assert {m.member_id: m.assignment for m in stored.members} == {leader: b"L", follower: b"F"}


def test_member_left_out_of_the_assignment_gets_an_empty_one(cluster: Cluster) -> None:
    a, b = cluster.join_new("g"), cluster.join_new("g")
    cluster.advance(6000)
    leader = a.value.leader
    follower = ({a.value.member_id, b.value.member_id} - {leader}).pop()
    follower_sync = cluster.sync("g", 1, follower)
    cluster.sync("g", 1, leader, {leader: b"L"})
    assert follower_sync.error == E.none and follower_sync.value.assignment == b""


def test_sync_errors(cluster: Cluster) -> None:
    members, generation = cluster.stable_group("g", 2)
    assert cluster.sync("nope", 1, "m").error == E.unknown_member_id
    assert cluster.sync("g", generation, "stranger").error == E.unknown_member_id
    assert cluster.sync("g", generation + 1, members[1]).error == E.illegal_generation
    assert cluster.sync("g", generation, members[1], protocol_name="roundrobin").error == E.inconsistent_group_protocol
    assert cluster.sync("g", generation, members[1], protocol_type="connect").error == E.inconsistent_group_protocol
    # In Stable a late SyncGroup gets the current assignment again.
    again = cluster.sync("g", generation, members[1])
    assert again.value.assignment == f"assignment-{members[1]}".encode()
    cluster.join("g", members[0])  # leader rejoins: rebalance
    assert cluster.sync("g", generation, members[1]).error == E.rebalance_in_progress


def test_follower_rejoining_stable_group_with_same_metadata_does_not_rebalance(cluster: Cluster) -> None:
    members, generation = cluster.stable_group("g", 2)
    reply = cluster.join("g", members[1])
    assert reply.value.generation_id == generation and reply.value.members == ()
    assert cluster.state("g") == "Stable"
    assert cluster.heartbeat("g", generation, members[0]) == E.none


def test_leader_rejoin_forces_a_rebalance_that_completes_when_all_rejoined(cluster: Cluster) -> None:
    members, generation = cluster.stable_group("g", 2)
    leader_join = cluster.join("g", members[0])
    assert not leader_join.done and cluster.state("g") == "PreparingRebalance"
    assert cluster.heartbeat("g", generation, members[1]) == E.rebalance_in_progress
    follower_join = cluster.join("g", members[1])
    # No initial delay for a group that is not Empty: done as soon as everyone rejoined.
    assert leader_join.value.generation_id == follower_join.value.generation_id == generation + 1


def test_member_that_does_not_rejoin_is_removed_at_the_rebalance_timeout(cluster: Cluster) -> None:
    members, generation = cluster.stable_group("g", 3, session=10_000, rebalance=20_000)
    rejoins = [cluster.join("g", m, rebalance=20_000) for m in members[:2]]
    for _ in range(3):  # the third member is alive (heartbeats) but does not rejoin
        cluster.advance(5000)
        assert cluster.heartbeat("g", generation, members[2]) == E.rebalance_in_progress
        assert not rejoins[0].done
    cluster.advance(5000)  # 20 s after the rebalance started
    assert [r.value.generation_id for r in rejoins] == [generation + 1] * 2
    assert {m.member_id for m in cluster.describe("g").members} == set(members[:2])


def test_session_timeout_removes_a_silent_member_and_rebalances(cluster: Cluster) -> None:
    members, generation = cluster.stable_group("g", 2, session=10_000)
    for _ in range(2):
        cluster.advance(4000)
        assert cluster.heartbeat("g", generation, members[0]) == E.none
    assert cluster.state("g") == "Stable"
    cluster.advance(2000)
    # members[1] never heartbeated: gone 10 s after its SyncGroup, the survivor is told to rejoin.
    assert cluster.state("g") == "PreparingRebalance"
    assert cluster.heartbeat("g", generation, members[1]) == E.unknown_member_id
    assert cluster.heartbeat("g", generation, members[0]) == E.rebalance_in_progress
    rejoin = cluster.join("g", members[0])
    assert rejoin.value.generation_id == generation + 1 and rejoin.value.leader == members[0]


def test_members_waiting_in_a_rebalance_do_not_expire(cluster: Cluster) -> None:
    members, generation = cluster.stable_group("g", 2, session=10_000, rebalance=60_000)
    waiting = cluster.join("g", members[0], rebalance=60_000)
    for _ in range(6):  # well past members[0]'s session timeout, but it is waiting on its JoinGroup
        cluster.advance(5000)
        assert cluster.heartbeat("g", generation, members[1]) == E.rebalance_in_progress
    assert not waiting.done
    assert members[0] in {m.member_id for m in cluster.describe("g").members}
    cluster.advance(30_000)  # the rebalance timeout drops members[1], which never rejoined
    assert waiting.value.generation_id == generation + 1 and waiting.value.leader == members[0]


def test_new_member_of_a_stuck_rebalance_times_out_after_five_minutes(cluster: Cluster) -> None:
    members, generation = cluster.stable_group("g", 1, session=10_000, rebalance=600_000)
    newcomer = cluster.join_new("g", rebalance=600_000)
    # The old member keeps heartbeating (REBALANCE_IN_PROGRESS) but never rejoins.
    for _ in range(30):
        cluster.advance(9_999)
        assert cluster.heartbeat("g", generation, members[0]) == E.rebalance_in_progress
    cluster.advance(5 * 60_000 - 30 * 9_999)
    assert newcomer.error == E.unknown_member_id


def test_member_that_never_syncs_is_removed_and_the_rest_rejoin(cluster: Cluster) -> None:
    a = cluster.join_new("g", session=30_000, rebalance=20_000)
    b = cluster.join_new("g", session=30_000, rebalance=20_000)
    cluster.advance(6000)
    leader = a.value.leader
    follower = ({a.value.member_id, b.value.member_id} - {leader}).pop()
    follower_sync = cluster.sync("g", 1, follower)
    cluster.advance(10_000)
    assert cluster.heartbeat("g", 1, leader) == E.none  # heartbeats are fine between join and sync
    assert not follower_sync.done
    cluster.advance(10_000)  # the leader never sent SyncGroup within the rebalance timeout
    assert follower_sync.error == E.rebalance_in_progress
    assert cluster.heartbeat("g", 1, leader) == E.unknown_member_id
    rejoin = cluster.join("g", follower)
    assert rejoin.value.generation_id == 2 and rejoin.value.leader == follower


def test_leader_leaving_during_sync_sends_followers_back_to_join(cluster: Cluster) -> None:
    replies = [cluster.join_new("g") for _ in range(3)]
    cluster.advance(6000)
    leader = replies[0].value.leader
    followers = [r.value.member_id for r in replies if r.value.member_id != leader]
    syncs = [cluster.sync("g", 1, f) for f in followers]
    leave = cluster.leave("g", MemberIdentity(leader))
    assert leave.value.members[0].error_code == E.none
    assert [s.error for s in syncs] == [E.rebalance_in_progress] * 2
    rejoins = [cluster.join("g", f) for f in followers]
    assert {r.value.generation_id for r in rejoins} == {2}
    assert rejoins[0].value.leader in followers


def test_last_member_leaving_empties_the_group_and_persists_it(cluster: Cluster) -> None:
    members, generation = cluster.stable_group("g", 1)
    cluster.leave("g", MemberIdentity(members[0]))
    # Preparing -> (everyone rejoined: nobody) -> Empty, with a new generation written.
    assert cluster.state("g") == "Empty"
    key, value = cluster.log.partitions[cluster.gc.partition_for("g")][-1]
    assert decode_key(key).group == "g"
    stored = decode_group_metadata_value(value)
    assert stored.generation == generation + 1 and stored.members == () and stored.protocol is None
    assert stored.current_state_timestamp == cluster.now


def test_heartbeat_checks(cluster: Cluster) -> None:
    members, generation = cluster.stable_group("g", 2)
    assert cluster.heartbeat("nope", 1, "m") == E.unknown_member_id
    assert cluster.heartbeat("g", generation, "stranger") == E.unknown_member_id
    assert cluster.heartbeat("g", generation - 1, members[1]) == E.illegal_generation
    assert cluster.heartbeat("", generation, members[1]) == E.invalid_group_id


def test_protocol_type_and_protocols_must_fit_the_group(cluster: Cluster) -> None:
    cluster.stable_group("g", 1)
    assert cluster.join("g", protocol_type="connect").error == E.inconsistent_group_protocol
    other = [("sticky", subscription("t"))]
    assert cluster.join("g", protocols=other).error == E.inconsistent_group_protocol
    assert cluster.join("h", protocols=[]).error == E.inconsistent_group_protocol
    assert cluster.join("h", protocol_type="").error == E.inconsistent_group_protocol


def test_protocol_is_chosen_by_vote_among_protocols_all_members_support(cluster: Cluster) -> None:
    sub = subscription("t")
    votes = [
        [("range", sub), ("roundrobin", sub), ("sticky", sub)],
        [("roundrobin", sub), ("range", sub)],
        [("roundrobin", sub), ("range", sub), ("sticky", sub)],
    ]
    replies = [cluster.join_new("g", protocols=p) for p in votes]
    cluster.advance(6000)
    assert {r.value.protocol_name for r in replies} == {"roundrobin"}
    # "sticky" has most first choices among two members, but not everyone supports it.
    sticky_first = [("sticky", sub), ("range", sub)]
    replies2 = [cluster.join_new("h", protocols=p) for p in (sticky_first, sticky_first, [("range", sub)])]
    cluster.advance(6000)
    assert {r.value.protocol_name for r in replies2} == {"range"}


def test_session_timeout_must_be_within_broker_limits(make_cluster) -> None:
    cluster = make_cluster(min_session_timeout_ms=6000, max_session_timeout_ms=300_000)
    assert cluster.join("g", session=5999).error == E.invalid_session_timeout
    assert cluster.join("g", session=300_001).error == E.invalid_session_timeout
    assert cluster.join("g", session=6000).error == E.member_id_required


def test_join_with_unknown_member_id_is_rejected(cluster: Cluster) -> None:
    assert cluster.join("g", "made-up").error == E.unknown_member_id
    cluster.stable_group("h", 1)
    assert cluster.join("h", "made-up").error == E.unknown_member_id


def test_group_max_size(make_cluster) -> None:
    cluster = make_cluster(group_max_size=2)
    replies = [cluster.join_new("g") for _ in range(2)]
    assert cluster.join("g").error == E.group_max_size_reached
    cluster.advance(6000)
    assert [r.error for r in replies] == [E.none, E.none]


def test_leave_group_batch_by_member_and_instance_id(cluster: Cluster) -> None:
    members, _ = cluster.stable_group("g", 2)
    static = cluster.join("g", instance="instance-1")
    cluster.join("g", members[0])
    cluster.join("g", members[1])
    assert static.error == E.none
    reply = cluster.leave(
        "g",
        MemberIdentity(members[1]),
        MemberIdentity("", "instance-1"),
        MemberIdentity("", "no-such-instance"),
        MemberIdentity("ghost"),
    )
    assert reply.error == E.none
    assert [m.error_code for m in reply.value.members] == [E.none, E.none, E.unknown_member_id, E.unknown_member_id]
    assert reply.value.legacy_error_code == E.unknown_member_id
    assert {m.member_id for m in cluster.describe("g").members} == {members[0]}
    unknown = cluster.leave("nope", MemberIdentity("m"))
    assert unknown.error == E.none and unknown.value.members[0].error_code == E.unknown_member_id


def test_pending_member_may_leave_and_expires_if_it_never_rejoins(cluster: Cluster) -> None:
    first = cluster.join("g")
    assert cluster.leave("g", MemberIdentity(first.value.member_id)).value.members[0].error_code == E.none
    second = cluster.join("g", session=10_000)
    cluster.advance(10_000)
    assert cluster.join("g", second.value.member_id).error == E.unknown_member_id


def test_describe_and_list_groups(cluster: Cluster) -> None:
    members, _ = cluster.stable_group("g", 2)
    cluster.commit("simple", {("t", 0): 1})
    described = cluster.describe("g")
    assert (described.state, described.protocol_type, described.protocol) == ("Stable", "consumer", "range")
    assert {m.member_id: m.assignment for m in described.members} == {m: f"assignment-{m}".encode() for m in members}
    assert all(m.metadata == subscription("t") and m.client_host == "/127.0.0.1" for m in described.members)
    unknown = cluster.describe("nope")
    assert (unknown.error_code, unknown.state, unknown.members) == (E.none, "Dead", ())
    cluster.join("g", members[0])
    preparing = cluster.describe("g")
    assert preparing.state == "PreparingRebalance" and preparing.protocol == ""
    assert all(m.metadata == b"" and m.assignment == b"" for m in preparing.members)

    from coordinator_harness import Reply

    every, only_empty, typed = Reply(), Reply(), Reply()
    cluster.gc.list_groups(now_ms=cluster.now, respond=every)
    cluster.gc.list_groups(["empty"], now_ms=cluster.now, respond=only_empty)
    cluster.gc.list_groups(types_filter=["consumer"], now_ms=cluster.now, respond=typed)
    assert {(g.group_id, g.protocol_type, g.state) for g in every.value.groups} == {
        ("g", "consumer", "PreparingRebalance"),
        ("simple", "", "Empty"),
    }
    assert [g.group_id for g in only_empty.value.groups] == ["simple"]
    assert typed.value.groups == ()


def test_member_that_missed_its_join_answer_gets_it_again(cluster: Cluster) -> None:
    a, b = cluster.join_new("g"), cluster.join_new("g")
    cluster.advance(6000)
    leader = a.value.leader
    again = cluster.join("g", leader)  # same metadata, group still CompletingRebalance
    assert again.value.generation_id == 1 and {m.member_id for m in again.value.members} == {
        a.value.member_id,
        b.value.member_id,
    }
    assert cluster.state("g") == "CompletingRebalance"


def test_a_repeated_join_while_waiting_answers_the_older_request(cluster: Cluster) -> None:
    members, generation = cluster.stable_group("g", 2)
    first = cluster.join("g", members[0])
    second = cluster.join("g", members[0])
    assert first.error == E.rebalance_in_progress and not second.done
    cluster.join("g", members[1])
    assert second.value.generation_id == generation + 1


def test_pending_member_leaving_lets_the_rebalance_complete(cluster: Cluster) -> None:
    members, generation = cluster.stable_group("g", 1)
    pending = cluster.join("g")  # MEMBER_ID_REQUIRED: a rebalance now waits for this member too
    rejoin = cluster.join("g", members[0])  # leader rejoin: rebalance
    assert pending.error == E.member_id_required and not rejoin.done
    cluster.leave("g", MemberIdentity(pending.value.member_id))
    assert rejoin.value.generation_id == generation + 1


def test_rebalances_are_logged_at_debug(cluster: Cluster, caplog) -> None:
    caplog.set_level(logging.DEBUG, logger="logway.coordinator")
    cluster.join_new("g")
    cluster.advance(3000)
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert "preparing to rebalance group g in state Empty with old generation 0 (1 members)" in messages
    assert "group g: generation 1 with 1 members (protocol range)" in messages


def test_join_naming_a_protocol_twice_completes_the_rebalance(cluster: Cluster) -> None:
    """A hostile JoinGroup listing the same protocol twice (found by the request fuzzer) must not break the
    rebalance: the protocol counts once, as in Kafka's MemberMetadata.protocols set."""
    reply = cluster.join_new("g", protocols=[("range", subscription("t")), ("range", subscription("t"))])
    cluster.advance(3000)
    assert reply.error == E.none and reply.value.protocol_name == "range"
    assert cluster.state("g") == "CompletingRebalance"
