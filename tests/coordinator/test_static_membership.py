"""KIP-345 static membership: restarts without rebalances, fencing of stale instances."""

from __future__ import annotations

from coordinator_harness import Cluster, subscription

from logway.coordinator.offsets_schema import decode_group_metadata_value
from logway.wire.errors import ErrorCode as E


def stable_static_group(cluster: Cluster, protocols=None) -> tuple[dict[str, str], str, int]:
    """Instances "a" and "b" in a Stable generation; returns ({instance: member id}, leader, generation)."""
    ra = cluster.join("g", instance="a", protocols=protocols)
    rb = cluster.join("g", instance="b", protocols=protocols)
    cluster.advance(6000)
    ids = {"a": ra.value.member_id, "b": rb.value.member_id}
    leader, generation = ra.value.leader, ra.value.generation_id
    follower = next(m for m in ids.values() if m != leader)
    follower_sync = cluster.sync("g", generation, follower, instance=_instance(ids, follower))
    cluster.sync(
        "g", generation, leader, {m: f"for-{i}".encode() for i, m in ids.items()}, instance=_instance(ids, leader)
    )
    assert follower_sync.error == E.none and cluster.state("g") == "Stable"
    return ids, leader, generation


def _instance(ids: dict[str, str], member_id: str) -> str:
    return next(i for i, m in ids.items() if m == member_id)


def test_restarted_static_member_rejoins_without_a_rebalance(cluster: Cluster) -> None:
    ids, leader, generation = stable_static_group(cluster)
    restarted = cluster.join("g", instance="a")
    result = restarted.value
    assert result.error_code == E.none and result.generation_id == generation
    assert result.member_id != ids["a"] and result.member_id.startswith("a-")
    # Before v9 the old leader id comes back, so a restarted leader does not run the assignor.
    assert result.leader == leader and result.members == () and not result.skip_assignment
    assert cluster.state("g") == "Stable"
    assert cluster.heartbeat("g", generation, ids["b"], "b") == E.none
    # The new member id was persisted before the member was answered.
    stored = decode_group_metadata_value(cluster.log.partitions[cluster.gc.partition_for("g")][-1][1])
    assert {m.group_instance_id: m.member_id for m in stored.members} == {"a": result.member_id, "b": ids["b"]}
    # Its assignment is unchanged.
    assert cluster.sync("g", generation, result.member_id, instance="a").value.assignment == b"for-a"


def test_old_member_id_of_a_restarted_static_member_is_fenced(cluster: Cluster) -> None:
    ids, _, generation = stable_static_group(cluster)
    new_id = cluster.join("g", instance="a").value.member_id
    assert cluster.heartbeat("g", generation, ids["a"], "a") == E.fenced_instance_id
    assert cluster.sync("g", generation, ids["a"], instance="a").error == E.fenced_instance_id
    assert cluster.commit("g", {("t", 0): 1}, generation=generation, member_id=ids["a"], instance="a") == {
        ("t", 0): E.fenced_instance_id
    }
    assert cluster.join("g", ids["a"], instance="a").error == E.fenced_instance_id
    assert cluster.heartbeat("g", generation, new_id, "a") == E.none


def test_restarted_static_leader_on_v9_learns_it_leads_but_skips_assignment(cluster: Cluster) -> None:
    ids, leader, generation = stable_static_group(cluster)
    leader_instance = _instance(ids, leader)
    result = cluster.join("g", instance=leader_instance, skip=True).value
    assert result.leader == result.member_id and result.skip_assignment
    assert {m.group_instance_id for m in result.members} == {"a", "b"}
    assert result.generation_id == generation and cluster.state("g") == "Stable"


def test_static_rejoin_that_changes_the_chosen_protocol_rebalances(cluster: Cluster) -> None:
    sub = subscription("t")
    ids, _, generation = stable_static_group(cluster, protocols=[("range", sub), ("roundrobin", sub)])
    rejoin = cluster.join("g", instance="a", protocols=[("roundrobin", sub)])
    assert not rejoin.done and cluster.state("g") == "PreparingRebalance"
    cluster.join("g", ids["b"], instance="b", protocols=[("range", sub), ("roundrobin", sub)])
    assert rejoin.value.generation_id == generation + 1 and rejoin.value.protocol_name == "roundrobin"


def test_duplicate_instance_waiting_on_join_is_fenced_by_the_newer_one(cluster: Cluster) -> None:
    first = cluster.join("g", instance="a")
    assert not first.done
    second = cluster.join("g", instance="a")
    assert first.error == E.fenced_instance_id
    cluster.advance(3000)
    assert second.error == E.none and second.value.generation_id == 1


def test_absent_static_member_keeps_its_place_through_a_rebalance(cluster: Cluster) -> None:
    ids, leader, generation = stable_static_group(cluster)
    rejoin_b = cluster.join("g", ids["b"], instance="b", protocols=[("range", subscription("t", "u"))])
    assert not rejoin_b.done
    for _ in range(5):  # "a" is alive but does not rejoin until the rebalance times out
        cluster.advance(5000)
        assert cluster.heartbeat("g", generation, ids["a"], "a") == E.rebalance_in_progress
    cluster.advance(5000)
    result = rejoin_b.value
    assert result.generation_id == generation + 1 and result.leader == ids["b"]
    assert {m.member_id for m in result.members} == set(ids.values())


def test_static_member_that_stops_heartbeating_is_removed(cluster: Cluster) -> None:
    ids, _, generation = stable_static_group(cluster)
    for _ in range(3):
        cluster.advance(4000)
        cluster.heartbeat("g", generation, ids["b"], "b")
    # "a" went silent: its session expired, it is gone, and "b" is told to rejoin.
    assert cluster.heartbeat("g", generation, ids["b"], "b") == E.rebalance_in_progress
    assert [m.group_instance_id for m in cluster.describe("g").members] == ["b"]
    assert cluster.join("g", ids["a"], instance="a").error == E.unknown_member_id
