"""TxnOffsetCommit in the group coordinator: offsets wait for their transaction's marker (KIP-98, KIP-447)."""

from __future__ import annotations

from coordinator_harness import Cluster, Reply

from logway.coordinator.results import CommitOffset
from logway.wire.errors import ErrorCode as E

PID = 7


def txn_commit(c: Cluster, group: str, offset: int, *, generation: int = -1, member: str = "") -> dict:
    reply = Reply()
    c.gc.txn_offset_commit(group, PID, 0, generation, member, None, [CommitOffset("t", 0, offset)],
                           now_ms=c.now, respond=reply)
    return reply.value.partitions


def stable_fetch(c: Cluster, group: str):
    reply = Reply()
    c.gc.offset_fetch(group, [("t", 0)], require_stable=True, now_ms=c.now, respond=reply)
    return reply.value.partitions[0]


def test_offsets_count_only_on_commit_and_are_unstable_until_then():
    c = Cluster()
    assert txn_commit(c, "g", 10) == {("t", 0): E.none}
    assert c.committed("g") == {}
    assert stable_fetch(c, "g").error_code == E.unstable_offset_commit
    partition = c.gc.partition_for("g")
    assert c.gc.complete_txn(PID, 0, True, [partition], c.now) == set()
    assert c.log.markers == [(partition, PID, True)]
    assert c.committed("g") == {("t", 0): 10}
    assert (stable_fetch(c, "g").error_code, stable_fetch(c, "g").offset) == (E.none, 10)


def test_aborted_offsets_are_dropped():
    c = Cluster()
    c.commit("g", {("t", 0): 5})
    txn_commit(c, "g", 10)
    c.gc.complete_txn(PID, 0, False, [c.gc.partition_for("g")], c.now)
    assert c.committed("g") == {("t", 0): 5}


def test_kip_447_checks_the_member_and_generation():
    c = Cluster()
    members, generation = c.stable_group("g", 1)
    assert txn_commit(c, "g", 1, generation=generation, member=members[0]) == {("t", 0): E.none}
    assert txn_commit(c, "g", 1, generation=generation + 1, member=members[0]) == {("t", 0): E.illegal_generation}
    assert txn_commit(c, "g", 1, generation=generation, member="gone") == {("t", 0): E.unknown_member_id}
    assert txn_commit(c, "new", 1, generation=3, member="m") == {("t", 0): E.illegal_generation}


def test_pending_offsets_reloaded_after_a_restart_commit_into_a_new_group():
    first = Cluster()
    txn_commit(first, "g", 10)
    partition = first.gc.partition_for("g")
    again = Cluster(first.log, load=False)
    records = first.log.read(partition)
    for p in range(again.gc.num_partitions):
        again.gc.load(p, again.now, [] if p == partition else None, {PID: records} if p == partition else None)
    assert again.committed("g") == {}
    again.gc.complete_txn(PID, 0, True, [partition], again.now)
    assert again.committed("g") == {("t", 0): 10}
