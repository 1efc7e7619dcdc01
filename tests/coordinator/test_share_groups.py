"""KIP-932 share group membership on a fake log and clock (coordinator/share_membership.py): joining, sharing
partitions between more members than partitions, leaving and session timeouts (each releasing the member's
records through ``member_left``), epochs checked, reloading from the records, the offsets-admin checks; and
share sessions (gateway/share_sessions.py): epochs, limits, and the session a connection opened."""

from __future__ import annotations

import pytest
from coordinator_harness import Cluster

from logway.coordinator.topics_image import TopicsSnapshot
from logway.gateway.share_sessions import SessionError, ShareSessionCache
from logway.wire.errors import ErrorCode as E


@pytest.fixture
def shares() -> Cluster:
    """A coordinator with a 2-partition topic "t", assigning at every epoch bump, whose released members are
    recorded in ``left``."""
    topics = TopicsSnapshot()
    topics.add("t", 2)
    cluster = Cluster(topics=topics, share_assignment_interval_ms=0, share_session_timeout_ms=45_000,
                      share_max_size=3)
    cluster.left = []
    cluster.gc.shares.member_left = lambda group, member: cluster.left.append((group, member))
    return cluster


def heartbeat(cluster: Cluster, group: str, member: str, epoch: int, topics: tuple[str, ...] | None = None):
    from logway.coordinator.consumer_results import ConsumerHeartbeatRequest
    replies = []
    cluster.gc.share_group_heartbeat(ConsumerHeartbeatRequest(group, member, epoch, subscribed_topic_names=topics),
                                     now_ms=cluster.now, respond=replies.append)
    return replies[0]


def describe(cluster: Cluster, group: str):
    replies = []
    cluster.gc.share_group_describe([group], now_ms=cluster.now, respond=replies.append)
    return replies[0][0]


def partitions(result) -> list[int]:
    return sorted(p for parts in (result.assignment or {}).values() for p in parts)


def test_a_member_gets_every_partition_and_a_heartbeat_without_changes_sends_none(shares: Cluster) -> None:
    joined = heartbeat(shares, "g", "a", 0, ("t",))
    assert (joined.error_code, joined.member_epoch, partitions(joined)) == (E.none, 2, [0, 1])  # Kafka's epoch too
    assert joined.heartbeat_interval_ms == 5000
    again = heartbeat(shares, "g", "a", 2)
    assert (again.member_epoch, again.assignment) == (2, None)
    described = describe(shares, "g")
    assert (described.group_state, described.group_epoch, described.assignment_epoch, described.assignor_name) == (
        "Stable", 2, 2, "simple")


def test_more_members_than_partitions_share_them(shares: Cluster) -> None:
    a = heartbeat(shares, "g", "a", 0, ("t",))
    b = heartbeat(shares, "g", "b", 0, ("t",))
    c = heartbeat(shares, "g", "c", 0, ("t",))
    a, b = heartbeat(shares, "g", "a", a.member_epoch, ("t",)), heartbeat(shares, "g", "b", b.member_epoch, ("t",))
    held = [partitions(a), partitions(b), partitions(c)]
    assert (a.member_epoch, b.member_epoch, c.member_epoch) == (4, 4, 4)
    # ceil(3 members / 2 partitions) = 2 holders per partition, loads as even as they can be.
    assert sorted(len(h) for h in held) == [1, 1, 2]
    counts = {p: sum(p in h for h in held) for p in (0, 1)}
    assert counts == {0: 2, 1: 2}
    assert heartbeat(shares, "g", "d", 0, ("t",)).error_code == E.group_max_size_reached


def test_leaving_and_silence_release_the_members_records(shares: Cluster) -> None:
    heartbeat(shares, "g", "a", 0, ("t",))
    b = heartbeat(shares, "g", "b", 0, ("t",))
    left = heartbeat(shares, "g", "a", -1)
    assert (left.error_code, left.member_epoch, shares.left) == (E.none, -1, [("g", "a")])
    for _ in range(2):  # b keeps heartbeating; a second joiner c goes silent
        shares.advance(20_000)
        b = heartbeat(shares, "g", "b", b.member_epoch)
    heartbeat(shares, "g", "c", 0, ("t",))
    for _ in range(3):
        shares.advance(20_000)
        b = heartbeat(shares, "g", "b", b.member_epoch)
    assert ("g", "c") in shares.left and [m.member_id for m in describe(shares, "g").members] == ["b"]
    assert heartbeat(shares, "g", "c", 1).error_code == E.unknown_member_id


def test_epochs_are_checked(shares: Cluster) -> None:
    a = heartbeat(shares, "g", "a", 0, ("t",))
    assert heartbeat(shares, "g", "a", a.member_epoch + 1).error_code == E.fenced_member_epoch
    assert heartbeat(shares, "g", "x", 4).error_code == E.unknown_member_id
    assert heartbeat(shares, "nope", "a", 1).error_code == E.group_id_not_found
    assert heartbeat(shares, "g", "a", a.member_epoch).error_code == E.none


def test_a_consumer_groups_id_is_no_share_groups(shares: Cluster) -> None:
    shares.consumer_join("cg", "m", ("t",))
    assert heartbeat(shares, "cg", "s", 0, ("t",)).error_code == E.group_id_not_found
    assert describe(shares, "cg").error_code == E.group_id_not_found


def test_the_group_comes_back_from_its_records(shares: Cluster) -> None:
    heartbeat(shares, "g", "a", 0, ("t",))
    heartbeat(shares, "g", "b", 0, ("t",))
    before = describe(shares, "g")
    reloaded = Cluster(log=shares.log, topics=shares.topics)
    after = describe(reloaded, "g")
    assert (after.group_epoch, after.assignment_epoch, after.group_state) == (
        before.group_epoch, before.assignment_epoch, before.group_state)
    assert {m.member_id: m.assignment for m in after.members} == {m.member_id: m.assignment for m in before.members}


def test_offsets_admin_needs_an_empty_share_group(shares: Cluster) -> None:
    gc = shares.gc
    assert gc.share_group_alterable("fresh") == E.group_id_not_found  # DeleteShareGroupOffsets
    assert gc.share_group_alterable("fresh", create_at_ms=shares.now) is None  # Alter creates it
    assert describe(shares, "fresh").group_state == "Empty"
    heartbeat(shares, "fresh", "a", 0, ("t",))
    assert gc.share_group_alterable("fresh") == E.non_empty_group
    shares.consumer_join("cg", "m", ("t",))
    assert gc.share_group_alterable("cg", create_at_ms=shares.now) == E.group_id_not_found


# --- share sessions -----------------------------------------------------------------------------------------

TP = ("topic-id", 0)


def test_session_epochs_move_on_and_are_checked() -> None:
    cache = ShareSessionCache(max_sessions=1)
    session = cache.context("g", "a", 0, [TP], [], False)
    assert (session.epoch, list(session.partitions)) == (1, [TP])
    assert cache.context("g", "a", 1, [], [TP], True).epoch == 2 and not session.partitions
    for epoch, code in ((5, E.invalid_share_session_epoch), (0, E.share_session_limit_reached)):
        with pytest.raises(SessionError) as raised:
            cache.context("g", "b" if epoch == 0 else "a", epoch, [], [], False)
        assert raised.value.code == code
    with pytest.raises(SessionError) as raised:
        cache.context("g", "a", 0, [], [], True)  # acknowledgements when opening
    assert raised.value.code == E.invalid_request
    with pytest.raises(SessionError) as raised:
        cache.context("g", "z", 3, [], [], False)
    assert raised.value.code == E.share_session_not_found


def test_a_session_ends_with_the_connection_that_opened_it() -> None:
    cache = ShareSessionCache()
    first, second = object(), object()
    cache.context("g", "a", 0, [TP], [], False, first)
    assert cache.disconnected(object()) is None  # a connection that opened nothing
    cache.context("g", "a", 0, [TP], [], False, second)  # reopened elsewhere: no longer the first connection's
    assert cache.disconnected(first) is None and cache.get("g", "a") is not None
    cache.context("g", "b", 0, [TP], [], False, first)
    cache.close("g", "b")  # closed by its last request (epoch -1) before its connection went
    assert cache.disconnected(first) is None
    ended = cache.disconnected(second)
    assert (ended.group_id, ended.member_id) == ("g", "a")
