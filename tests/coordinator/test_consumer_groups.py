"""KIP-848 consumer groups on a fake log and clock: joining, rebalancing by revocation, leaving, sessions and
rebalance timeouts, static members, regexes, commits with member epochs, and reloading from the records."""

from __future__ import annotations

import uuid

import pytest
from coordinator_harness import Cluster, FakeOffsetsLog, Reply

from logway.coordinator.consumer_group import MemberState
from logway.coordinator.record_codec import record_type
from logway.coordinator.topics_image import TopicsSnapshot
from logway.wire.errors import ErrorCode as E


@pytest.fixture
def kip848() -> Cluster:
    """A coordinator with a 4-partition topic "t", no assignment interval (every epoch bump assigns at once)."""
    topics = TopicsSnapshot()
    topics.add("t", 4)
    return Cluster(topics=topics, consumer_assignment_interval_ms=0, consumer_session_timeout_ms=45_000)


def owned(result) -> dict:
    return {t: tuple(p) for t, p in (result.assignment or {}).items()}


def count(result) -> int:
    return sum(len(p) for p in (result.assignment or {}).values())


def test_first_member_gets_every_partition_at_epoch_2(kip848: Cluster) -> None:
    joined = kip848.consumer_join("g", "a")
    assert (joined.error_code, joined.member_epoch, count(joined)) == (E.none, 2, 4)
    assert joined.heartbeat_interval_ms == 5000
    again = kip848.consumer_heartbeat("g", "a", 2)
    assert (again.error_code, again.member_epoch, again.assignment) == (E.none, 2, None)  # nothing new: no assignment
    described = kip848.consumer_describe("g")
    assert (described.group_state, described.group_epoch, described.assignment_epoch) == ("Stable", 2, 2)
    assert described.assignor_name == "uniform"


def test_a_second_member_gets_partitions_only_once_the_first_revoked_them(kip848: Cluster) -> None:
    a = kip848.consumer_join("g", "a")
    b = kip848.consumer_join("g", "b")
    assert (b.member_epoch, count(b)) == (3, 0)  # its target's partitions are still owned by a
    a_revoking = kip848.consumer_heartbeat("g", "a", 2, owned=owned(a))
    assert (a_revoking.member_epoch, count(a_revoking)) == (2, 2)  # stays at 2 until it revoked
    assert kip848.consumer_describe("g").group_state == "Reconciling"
    assert count(kip848.consumer_heartbeat("g", "b", 3, owned={})) == 0  # still owned by a
    a_done = kip848.consumer_heartbeat("g", "a", 2, owned=owned(a_revoking))
    assert (a_done.member_epoch, a_done.assignment) == (3, None)
    b_gets = kip848.consumer_heartbeat("g", "b", 3, owned={})
    assert count(b_gets) == 2 and not set(owned(b_gets)[next(iter(owned(b_gets)))]) & set(
        owned(a_revoking)[next(iter(owned(a_revoking)))])
    kip848.consumer_heartbeat("g", "b", 3, owned=owned(b_gets))
    assert kip848.consumer_describe("g").group_state == "Stable"


def test_a_leaving_member_gives_its_partitions_back(kip848: Cluster) -> None:
    a = kip848.consumer_join("g", "a")
    kip848.consumer_join("g", "b")
    kip848.consumer_heartbeat("g", "a", 2, owned=owned(a))
    left = kip848.consumer_heartbeat("g", "b", -1)
    assert (left.error_code, left.member_epoch) == (E.none, -1)
    assert count(kip848.consumer_heartbeat("g", "a", 2, owned={})) == 4
    assert kip848.consumer_heartbeat("g", "b", 3).error_code == E.unknown_member_id


def test_a_silent_member_is_fenced_after_its_session(kip848: Cluster) -> None:
    a = kip848.consumer_join("g", "a")
    kip848.consumer_join("g", "b")
    for _ in range(3):  # a keeps heartbeating, b does not
        kip848.advance(20_000)
        a = kip848.consumer_heartbeat("g", "a", a.member_epoch, owned={})
    assert [m.member_id for m in kip848.consumer_describe("g").members] == ["a"]
    assert kip848.consumer_heartbeat("g", "b", 3).error_code == E.unknown_member_id


def test_a_member_that_does_not_revoke_in_its_rebalance_timeout_is_fenced(kip848: Cluster) -> None:
    a = kip848.consumer_join("g", "a", rebalance_timeout_ms=10_000)
    b = kip848.consumer_join("g", "b")
    kip848.consumer_heartbeat("g", "a", 2, owned=owned(a))  # told to revoke, and never does
    kip848.advance(10_001)
    assert kip848.consumer_heartbeat("g", "a", 2, owned=owned(a)).error_code == E.unknown_member_id
    assert count(kip848.consumer_heartbeat("g", "b", b.member_epoch, owned={})) == 4


def test_epochs_the_coordinator_does_not_know_are_fenced(kip848: Cluster) -> None:
    a = kip848.consumer_join("g", "a")
    assert kip848.consumer_heartbeat("g", "a", 7).error_code == E.fenced_member_epoch
    assert kip848.consumer_heartbeat("g", "a", 1).error_code == E.fenced_member_epoch
    kip848.consumer_join("g", "b")
    kept = owned(kip848.consumer_heartbeat("g", "a", 2, owned=owned(a)))
    assert kip848.consumer_heartbeat("g", "a", 2, owned=kept).member_epoch == 3
    # The previous epoch is accepted while the member owns only partitions it still has (its answer was lost)...
    assert kip848.consumer_heartbeat("g", "a", 2, owned=kept).error_code == E.none
    # ...not when it owns more, or does not say.
    assert kip848.consumer_heartbeat("g", "a", 2, owned=owned(a)).error_code == E.fenced_member_epoch
    assert kip848.consumer_heartbeat("g", "a", 2).error_code == E.fenced_member_epoch


def test_a_static_member_comes_back_under_a_new_member_id_with_its_partitions(kip848: Cluster) -> None:
    first = kip848.consumer_join("g", "a", instance_id="i-1")
    assert kip848.consumer_join("g", "a2", instance_id="i-1").error_code == E.unreleased_instance_id
    assert kip848.consumer_heartbeat("g", "x", 2, instance_id="i-1").error_code == E.fenced_instance_id
    left = kip848.consumer_heartbeat("g", "a", -2, instance_id="i-1")
    assert (left.error_code, left.member_epoch) == (E.none, -2)
    back = kip848.consumer_join("g", "a2", instance_id="i-1")
    assert (back.error_code, owned(back)) == (E.none, owned(first))
    assert [m.member_id for m in kip848.consumer_describe("g").members] == ["a2"]


def test_regex_subscription_follows_topics_created_later(kip848: Cluster) -> None:
    joined = kip848.consumer_heartbeat("g", "a", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=(),
                                       subscribed_topic_regex="orders-.*", owned={})
    assert (joined.error_code, count(joined)) == (E.none, 0)
    kip848.topics.add("orders-eu", 3)
    kip848.advance(10_000)  # regexes are refreshed at most every 10 s
    assert count(kip848.consumer_heartbeat("g", "a", joined.member_epoch, owned={})) == 3
    assert kip848.consumer_describe("g").members[0].subscribed_topic_regex == "orders-.*"


def test_regex_python_reads_differently_is_refused(kip848: Cluster) -> None:
    for pattern in ("(?=x)y", "[[:alpha:]]+", r"\pL+", r"a\z"):
        result = kip848.consumer_heartbeat("g", "a", 0, rebalance_timeout_ms=30_000, subscribed_topic_regex=pattern,
                                           owned={})
        assert result.error_code == E.invalid_regular_expression, pattern


def test_range_assignor_when_members_ask_for_it(kip848: Cluster) -> None:
    kip848.consumer_join("g", "a", server_assignor="range")
    assert kip848.consumer_describe("g").assignor_name == "range"
    assert kip848.consumer_join("g", "b", server_assignor="sticky").error_code == E.unsupported_assignor


def test_commits_carry_the_member_epoch(kip848: Cluster) -> None:
    a = kip848.consumer_join("g", "a")
    assert kip848.commit("g", {("t", 0): 5}, generation=a.member_epoch, member_id="a") == {("t", 0): E.none}
    assert kip848.commit("g", {("t", 0): 6}, generation=a.member_epoch + 1, member_id="a") == {
        ("t", 0): E.stale_member_epoch}
    assert kip848.commit("g", {("t", 0): 6}, generation=a.member_epoch, member_id="a", api_version=8) == {
        ("t", 0): E.unsupported_version}
    assert kip848.commit("g", {("t", 0): 6}, generation=-1) == {("t", 0): E.unknown_member_id}
    assert kip848.committed("g") == {("t", 0): 5}


def test_a_member_commits_with_an_older_epoch_only_partitions_it_had_then(kip848: Cluster) -> None:
    a = kip848.consumer_join("g", "a")
    kip848.consumer_join("g", "b")
    revoking = kip848.consumer_heartbeat("g", "a", 2, owned=owned(a))
    kept = owned(revoking)
    done = kip848.consumer_heartbeat("g", "a", 2, owned=kept)
    assert done.member_epoch == 3
    topic_partitions = [p for parts in kept.values() for p in parts]
    # Epoch 2 is older than a's epoch 3, but a has held these partitions since epoch 2.
    assert kip848.commit("g", {("t", topic_partitions[0]): 1}, generation=2, member_id="a") == {
        ("t", topic_partitions[0]): E.none}
    given_up = next(p for p in range(4) if p not in topic_partitions)
    assert kip848.commit("g", {("t", given_up): 1}, generation=2, member_id="a") == {("t", given_up): E.stale_member_epoch}


def test_the_group_and_its_members_survive_a_reload(kip848: Cluster) -> None:
    a = kip848.consumer_join("g", "a", instance_id="i-a")
    kip848.consumer_join("g", "b")
    kip848.consumer_heartbeat("g", "a", 2, owned=owned(a))
    kip848.commit("g", {("t", 1): 9}, generation=2, member_id="a")
    before = kip848.consumer_describe("g")
    reloaded = Cluster(log=kip848.log, topics=kip848.topics)
    after = reloaded.consumer_describe("g")
    assert after == before
    assert reloaded.committed("g") == {("t", 1): 9}
    member = reloaded.gc.group("g").member("a")
    assert member.state is MemberState.UNREVOKED_PARTITIONS and member.instance_id == "i-a"


def test_a_failed_append_changes_nothing(kip848: Cluster) -> None:
    kip848.log.fail_with = OSError("disk full")
    assert kip848.consumer_join("g", "a").error_code == E.not_coordinator
    kip848.log.fail_with = None
    assert kip848.consumer_describe("g").error_code == E.group_id_not_found
    assert kip848.consumer_join("g", "a").member_epoch == 2


def test_records_are_kafkas_record_types(kip848: Cluster) -> None:
    kip848.consumer_join("g", "a")
    types = [record_type(k) for records in kip848.log.partitions.values() for k, _ in records]
    # member subscription, group epoch, target member, target metadata, current assignment (Kafka's order)
    assert types == [5, 3, 7, 6, 8]


def test_group_admin_sees_consumer_groups(kip848: Cluster) -> None:
    kip848.consumer_join("g", "a")
    kip848.join("classic")
    reply = Reply()
    kip848.gc.list_groups(types_filter=("consumer",), now_ms=kip848.now, respond=reply)
    assert [(g.group_id, g.group_type, g.state) for g in reply.value.groups] == [("g", "consumer", "Stable")]
    assert kip848.describe("g").state == "Dead"  # DescribeGroups is for classic groups
    deleted = Reply()
    kip848.gc.delete_groups(["g"], now_ms=kip848.now, respond=deleted)
    assert deleted.value.groups == {"g": E.non_empty_group}
    kip848.consumer_heartbeat("g", "a", -1)
    deleted = Reply()
    kip848.gc.delete_groups(["g"], now_ms=kip848.now, respond=deleted)
    assert deleted.value.groups == {"g": E.none}
    assert kip848.consumer_describe("g").error_code == E.group_id_not_found
    assert Cluster(log=kip848.log, topics=kip848.topics).gc.group("g") is None  # the tombstones reload as nothing


def test_an_empty_classic_group_becomes_a_consumer_group_with_its_offsets(kip848: Cluster) -> None:
    kip848.commit("g", {("t", 0): 3})  # a simple consumer's offsets
    joined = kip848.consumer_join("g", "a")
    assert joined.error_code == E.none
    assert kip848.committed("g") == {("t", 0): 3}
    kip848.consumer_heartbeat("g", "a", -1)
    # ...and back: an empty consumer group becomes a classic group on JoinGroup.
    assert kip848.join("g").error == E.member_id_required
    assert kip848.committed("g") == {("t", 0): 3}


def test_topic_ids_in_assignments_are_the_topics(kip848: Cluster) -> None:
    joined = kip848.consumer_join("g", "a")
    assert set(joined.assignment) == {kip848.topics.topic_id("t")}
    assert isinstance(next(iter(joined.assignment)), uuid.UUID)


def test_max_size(kip848: Cluster) -> None:
    small = Cluster(topics=kip848.topics, consumer_max_size=1, log=FakeOffsetsLog())
    assert small.consumer_join("g", "a").error_code == E.none
    assert small.consumer_join("g", "b").error_code == E.group_max_size_reached
