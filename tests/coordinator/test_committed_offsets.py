"""OffsetCommit / OffsetFetch / OffsetDelete / DeleteGroups and offset expiry, persisted on a fake __consumer_offsets."""

from __future__ import annotations

from coordinator_harness import Cluster, FakeOffsetsLog, Reply, subscription

from logway.coordinator.offsets_schema import (
    GroupMetadataKey,
    OffsetCommitKey,
    decode_key,
    decode_offset_commit_value,
)
from logway.coordinator.results import CommitOffset, MemberIdentity
from logway.wire.errors import ErrorCode as E
from logway.wire.errors import KafkaError

DAY = 24 * 3600 * 1000


def records_of(cluster: Cluster, group: str) -> list[tuple[object, bytes | None]]:
    """Decoded keys (with raw values) written for a group, in log order."""
    partition = cluster.gc.partition_for(group)
    return [(decode_key(k), v) for k, v in cluster.log.partitions[partition] if decode_key(k).group == group]


def test_simple_consumer_commits_without_a_group(cluster: Cluster) -> None:
    assert cluster.commit("simple", {("t", 0): 10, ("t", 1): 20}, metadata="m", leader_epoch=3) == {
        ("t", 0): E.none,
        ("t", 1): E.none,
    }
    fetched = cluster.fetch("simple", [("t", 0), ("t", 9)]).value.partitions
    assert [(p.offset, p.leader_epoch, p.metadata, p.error_code) for p in fetched] == [
        (10, 3, "m", E.none),
        (-1, -1, "", E.none),
    ]
    assert cluster.state("simple") == "Empty"
    # The commit is on __consumer_offsets with Kafka's key/value layout.
    key, value = records_of(cluster, "simple")[0]
    assert key == OffsetCommitKey("simple", "t", 0)
    stored = decode_offset_commit_value(value)
    assert (stored.offset, stored.leader_epoch, stored.metadata, stored.commit_timestamp) == (10, 3, "m", cluster.now)


def test_commit_with_a_generation_for_an_unknown_group_is_rejected(cluster: Cluster) -> None:
    # Kafka 4: OffsetCommit v9+ names the problem (GROUP_ID_NOT_FOUND); older versions keep ILLEGAL_GENERATION.
    assert cluster.commit("nope", {("t", 0): 1}, generation=3, member_id="m", api_version=8) == {
        ("t", 0): E.illegal_generation}
    assert cluster.commit("nope", {("t", 0): 1}, generation=3, member_id="m") == {("t", 0): E.group_id_not_found}
    assert cluster.fetch("nope").value.partitions == ()


def test_commits_of_a_group_with_members_are_checked_against_member_and_generation(cluster: Cluster) -> None:
    members, generation = cluster.stable_group("g", 2)
    tp = ("t", 0)
    assert cluster.commit("g", {tp: 1}, generation=generation, member_id=members[1]) == {tp: E.none}
    assert cluster.commit("g", {tp: 2}, generation=generation - 1, member_id=members[1]) == {tp: E.illegal_generation}
    assert cluster.commit("g", {tp: 2}, generation=generation, member_id="stranger") == {tp: E.unknown_member_id}
    # A simple-consumer commit is not allowed once the group has members.
    assert cluster.commit("g", {tp: 2}) == {tp: E.unknown_member_id}
    # While preparing a rebalance, commits from the current generation are still accepted.
    cluster.join("g", members[0])
    assert cluster.commit("g", {tp: 3}, generation=generation, member_id=members[1]) == {tp: E.none}
    cluster.join("g", members[1])
    # Between JoinGroup and SyncGroup the member has a generation but no assignment.
    assert cluster.commit("g", {tp: 4}, generation=generation + 1, member_id=members[1]) == {
        tp: E.rebalance_in_progress
    }
    assert cluster.committed("g") == {tp: 3}


def test_commit_keeps_a_member_alive(cluster: Cluster) -> None:
    members, generation = cluster.stable_group("g", 1, session=10_000)
    for _ in range(5):
        cluster.advance(6000)
        assert cluster.commit("g", {("t", 0): 1}, generation=generation, member_id=members[0]) == {("t", 0): E.none}
    assert cluster.state("g") == "Stable"


def test_oversized_metadata_fails_only_its_partition(make_cluster) -> None:
    cluster = make_cluster(offset_metadata_max_bytes=10)
    reply = Reply()
    cluster.gc.offset_commit(
        "g",
        -1,
        "",
        None,
        [
            CommitOffset("t", 0, 5, metadata="x" * 10),
            CommitOffset("t", 1, 5, metadata="x" * 11),
            CommitOffset("t", 2, 5, metadata="😀" * 5),  # 10 UTF-16 code units, as Java's length() counts
            CommitOffset("t", 3, 5, metadata="😀" * 5 + "x"),
            CommitOffset("t", 4, 5, metadata=None),
        ],
        now_ms=cluster.now,
        respond=reply,
    )
    assert list(reply.value.partitions.values()) == [
        E.none,
        E.offset_metadata_too_large,
        E.none,
        E.offset_metadata_too_large,
        E.none,
    ]
    assert cluster.committed("g") == {("t", 0): 5, ("t", 2): 5, ("t", 4): 5}


def test_offset_fetch_of_all_partitions(cluster: Cluster) -> None:
    cluster.commit("g", {("b", 1): 7, ("a", 0): 3, ("b", 0): 5})
    assert [(p.topic, p.partition, p.offset) for p in cluster.fetch("g").value.partitions] == [
        ("a", 0, 3),
        ("b", 0, 5),
        ("b", 1, 7),
    ]
    assert cluster.fetch("unknown").value.partitions == ()


def test_failed_append_is_answered_with_a_coordinator_error_and_not_cached(cluster: Cluster) -> None:
    cluster.commit("g", {("t", 0): 1})
    cluster.log.fail_with = KafkaError("storage", E.not_leader_or_follower)
    assert cluster.commit("g", {("t", 0): 2}) == {("t", 0): E.not_coordinator}
    cluster.log.fail_with = KafkaError("too big", E.record_list_too_large)
    assert cluster.commit("g", {("t", 0): 2}) == {("t", 0): E.invalid_commit_offset_size}
    cluster.log.fail_with = OSError("disk gone")
    assert cluster.commit("g", {("t", 0): 2}) == {("t", 0): E.not_coordinator}
    assert cluster.committed("g") == {("t", 0): 1}


def test_failed_group_write_fails_the_sync_and_restarts_the_rebalance(cluster: Cluster) -> None:
    a, b = cluster.join_new("g"), cluster.join_new("g")
    cluster.advance(6000)
    leader = a.value.leader
    follower = ({a.value.member_id, b.value.member_id} - {leader}).pop()
    follower_sync = cluster.sync("g", 1, follower)
    cluster.log.fail_with = KafkaError("no leader", E.not_enough_replicas)
    leader_sync = cluster.sync("g", 1, leader, {leader: b"L", follower: b"F"})
    assert leader_sync.error == follower_sync.error == E.coordinator_not_available
    assert cluster.state("g") == "PreparingRebalance"


def test_reload_from_the_log_reproduces_the_cache(cluster: Cluster) -> None:
    members, generation = cluster.stable_group("g", 2)
    cluster.commit("g", {("t", 0): 10, ("t", 1): 11}, generation=generation, member_id=members[0], metadata="meta")
    cluster.commit("g", {("t", 0): 12}, generation=generation, member_id=members[0], leader_epoch=4)
    cluster.commit("simple", {("u", 0): 1, ("u", 1): 2})
    cluster.commit("gone", {("u", 0): 1})
    cluster.commit("left", {("u", 0): 5})
    cluster.stable_group("left", 1)
    cluster.leave("left", MemberIdentity(cluster.describe("left").members[0].member_id))
    assert cluster.state("left") == "Empty"
    reply = Reply()
    cluster.gc.delete_groups(["gone"], now_ms=cluster.now, respond=reply)
    reply = Reply()
    cluster.gc.offset_delete("simple", [("u", 1)], now_ms=cluster.now, respond=reply)
    assert reply.value.partitions == {("u", 1): E.none}

    reloaded = Cluster(log=cluster.log, load=False)
    reloaded.now = cluster.now + 5
    reloaded.gc.load_all(reloaded.now)
    for group in ("g", "simple", "left", "gone"):
        assert reloaded.describe(group) == cluster.describe(group), group
        assert reloaded.fetch(group).value == cluster.fetch(group).value, group
    assert reloaded.committed("simple") == {("u", 0): 1}
    fetched = {
        (p.topic, p.partition): (p.offset, p.leader_epoch, p.metadata) for p in reloaded.fetch("g").value.partitions
    }
    assert fetched == {("t", 0): (12, 4, ""), ("t", 1): (11, -1, "meta")}
    before, after = cluster.gc.group("g"), reloaded.gc.group("g")
    assert (after.generation_id, after.leader_id, after.protocol_name, after.subscribed_topics) == (
        before.generation_id,
        before.leader_id,
        before.protocol_name,
        before.subscribed_topics,
    )
    left_before, left_after = cluster.gc.group("left"), reloaded.gc.group("left")
    assert left_after.current_state_timestamp == left_before.current_state_timestamp
    assert left_after.generation_id == left_before.generation_id
    # Reloaded members are live: they keep their session by heartbeating with the stored generation.
    assert reloaded.heartbeat("g", generation, members[1]) == E.none


def test_reloaded_members_that_never_come_back_expire(cluster: Cluster) -> None:
    members, generation = cluster.stable_group("g", 1, session=10_000)
    reloaded = Cluster(log=cluster.log, load=False)
    reloaded.now = cluster.now
    reloaded.gc.load_all(reloaded.now)
    reloaded.advance(10_000)
    assert reloaded.state("g") == "Empty"


def test_requests_for_a_loading_partition_get_load_in_progress() -> None:
    log = FakeOffsetsLog()
    first = Cluster(log=log)
    members, generation = first.stable_group("g", 1)
    first.commit("g", {("t", 0): 3}, generation=generation, member_id=members[0])

    cluster = Cluster(log=log, load=False)
    assert cluster.gc.loading == frozenset(range(50))
    assert cluster.join("g").error == E.coordinator_load_in_progress
    assert cluster.commit("g", {("t", 0): 4}) == {("t", 0): E.coordinator_load_in_progress}
    assert cluster.fetch("g").error == E.coordinator_load_in_progress
    loading = cluster.describe("g")
    assert (loading.error_code, loading.state, loading.members) == (E.coordinator_load_in_progress, "", ())
    # Heartbeats are answered blindly, SyncGroup sends the member back to JoinGroup (as Kafka does).
    assert cluster.heartbeat("g", generation, members[0]) == E.none
    assert cluster.sync("g", generation, members[0]).error == E.rebalance_in_progress

    partition = cluster.gc.partition_for("g")
    cluster.gc.load(partition, cluster.now)
    assert partition not in cluster.gc.loading and len(cluster.gc.loading) == 49
    assert cluster.committed("g") == {("t", 0): 3}
    other = next(g for g in (f"x{i}" for i in range(100)) if cluster.gc.partition_for(g) != partition)
    assert cluster.fetch(other).error == E.coordinator_load_in_progress
    listed = Reply()
    cluster.gc.list_groups(now_ms=cluster.now, respond=listed)
    assert listed.error == E.coordinator_load_in_progress and [g.group_id for g in listed.value.groups] == ["g"]


def test_delete_groups(cluster: Cluster) -> None:
    cluster.stable_group("busy", 1)
    cluster.commit("idle", {("t", 0): 1, ("t", 1): 2})
    members, _ = cluster.stable_group("was-busy", 1)
    cluster.leave("was-busy", MemberIdentity(members[0]))
    reply = Reply()
    cluster.gc.delete_groups(["busy", "idle", "nope", "was-busy"], now_ms=cluster.now, respond=reply)
    assert reply.value.groups == {
        "busy": E.non_empty_group,
        "idle": E.none,
        "nope": E.group_id_not_found,
        "was-busy": E.none,
    }
    assert cluster.describe("idle").state == "Dead" and cluster.fetch("idle").value.partitions == ()
    # Offset tombstones for "idle"; the never-rebalanced group has no metadata record to delete.
    assert [(k, v) for k, v in records_of(cluster, "idle")[-2:]] == [
        (OffsetCommitKey("idle", "t", 0), None),
        (OffsetCommitKey("idle", "t", 1), None),
    ]
    assert records_of(cluster, "was-busy")[-1] == (GroupMetadataKey("was-busy"), None)
    again = Reply()
    cluster.gc.delete_groups(["idle"], now_ms=cluster.now, respond=again)
    assert again.value.groups == {"idle": E.group_id_not_found}


def test_offset_delete_rules(cluster: Cluster) -> None:
    members, generation = cluster.stable_group("g", 2)  # everyone subscribes to "t"
    cluster.commit("g", {("t", 0): 1, ("other", 0): 2}, generation=generation, member_id=members[0])
    reply = Reply()
    cluster.gc.offset_delete("g", [("t", 0), ("other", 0)], now_ms=cluster.now, respond=reply)
    assert reply.value.error_code == E.none
    assert reply.value.partitions == {("t", 0): E.group_subscribed_to_topic, ("other", 0): E.none}
    assert cluster.committed("g") == {("t", 0): 1}
    assert records_of(cluster, "g")[-1] == (OffsetCommitKey("g", "other", 0), None)

    unknown = Reply()
    cluster.gc.offset_delete("nope", [("t", 0)], now_ms=cluster.now, respond=unknown)
    assert unknown.value.error_code == E.group_id_not_found

    cluster.join_new("connect-group", protocol_type="connect", protocols=[("default", b"x")])
    cluster.advance(6000)
    busy = Reply()
    cluster.gc.offset_delete("connect-group", [("t", 0)], now_ms=cluster.now, respond=busy)
    assert busy.value.error_code == E.non_empty_group


def test_deleting_the_last_offsets_of_an_empty_group_removes_it(cluster: Cluster) -> None:
    cluster.commit("simple", {("t", 0): 1})
    reply = Reply()
    cluster.gc.offset_delete("simple", [("t", 0), ("t", 1)], now_ms=cluster.now, respond=reply)
    assert reply.value.partitions == {("t", 0): E.none, ("t", 1): E.none}
    assert cluster.describe("simple").state == "Dead"


def test_simple_consumer_offsets_expire_retention_after_their_commit(make_cluster) -> None:
    cluster = make_cluster(offsets_retention_ms=7 * DAY)
    cluster.commit("simple", {("t", 0): 1})
    cluster.now += 3 * DAY
    cluster.commit("simple", {("t", 1): 1})
    cluster.now += 4 * DAY - 1
    assert cluster.gc.expire_offsets(cluster.now) == 0
    cluster.now += 1
    assert cluster.gc.expire_offsets(cluster.now) == 1
    assert cluster.committed("simple") == {("t", 1): 1}
    assert records_of(cluster, "simple")[-1] == (OffsetCommitKey("simple", "t", 0), None)
    cluster.now += 3 * DAY
    assert cluster.gc.expire_offsets(cluster.now) == 1
    assert cluster.describe("simple").state == "Dead"


def test_offsets_with_an_explicit_retention_time_expire_at_it(cluster: Cluster) -> None:
    cluster.commit("g", {("t", 0): 1}, retention_time_ms=1000)
    cluster.now += 999
    assert cluster.gc.expire_offsets(cluster.now) == 0
    cluster.now += 1
    assert cluster.gc.expire_offsets(cluster.now) == 1


def test_empty_group_offsets_expire_retention_after_the_group_became_empty(make_cluster) -> None:
    cluster = make_cluster(offsets_retention_ms=7 * DAY)
    members, generation = cluster.stable_group("g", 1)
    cluster.commit("g", {("t", 0): 1}, generation=generation, member_id=members[0])
    cluster.now += 10 * DAY  # old commit, but the group is active: nothing expires
    cluster.heartbeat("g", generation, members[0])
    assert cluster.gc.expire_offsets(cluster.now) == 0
    cluster.leave("g", MemberIdentity(members[0]))
    cluster.now += 7 * DAY - 1
    assert cluster.gc.expire_offsets(cluster.now) == 0
    cluster.now += 1
    assert cluster.gc.expire_offsets(cluster.now) == 1
    # With no offsets left the empty group is deleted too, with a tombstone for its metadata.
    assert cluster.describe("g").state == "Dead"
    assert records_of(cluster, "g")[-2:] == [(OffsetCommitKey("g", "t", 0), None), (GroupMetadataKey("g"), None)]


def test_stable_consumer_group_only_loses_offsets_of_unsubscribed_topics(make_cluster) -> None:
    cluster = make_cluster(offsets_retention_ms=7 * DAY, max_session_timeout_ms=20 * DAY)
    members, generation = cluster.stable_group("g", 1, session=20 * DAY)
    cluster.commit("g", {("t", 0): 1, ("old-topic", 0): 2}, generation=generation, member_id=members[0])
    cluster.now += 7 * DAY
    assert cluster.gc.expire_offsets(cluster.now) == 1
    assert cluster.committed("g") == {("t", 0): 1}
    assert cluster.state("g") == "Stable"


def test_subscriptions_of_all_members_protect_their_topics(make_cluster) -> None:
    cluster = make_cluster(offsets_retention_ms=DAY, max_session_timeout_ms=20 * DAY)
    a = cluster.join_new("g", protocols=[("range", subscription("t"))], session=20 * DAY)
    b = cluster.join_new("g", protocols=[("range", subscription("u"))], session=20 * DAY)
    cluster.advance(6000)
    leader = a.value.leader
    follower = ({a.value.member_id, b.value.member_id} - {leader}).pop()
    cluster.sync("g", 1, follower)
    cluster.sync("g", 1, leader)
    cluster.commit("g", {("t", 0): 1, ("u", 0): 1, ("v", 0): 1}, generation=1, member_id=leader)
    cluster.now += DAY
    cluster.gc.expire_offsets(cluster.now)
    assert cluster.committed("g") == {("t", 0): 1, ("u", 0): 1}
