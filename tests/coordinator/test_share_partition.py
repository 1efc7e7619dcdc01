"""KIP-932 share partitions on a fake clock and log: acquisition with locks, acknowledgements, releases and their
redelivery, the delivery limit, lock expiry, the in-flight bound, and the state rebuilt from __share_group_state."""

from __future__ import annotations

import uuid
from collections import defaultdict

from logway.coordinator.share_partition import AcknowledgeType as A
from logway.coordinator.share_partition import RecordState, ShareLimits, SharePartition
from logway.coordinator.share_state import ShareStateStore
from logway.wire.errors import ErrorCode as E

BATCHES = [(0, 4, False), (5, 9, False)]  # two batches of 5 records


def test_acquire_hands_out_whole_batches_once() -> None:
    sp = SharePartition(0)
    assert sp.acquire("a", BATCHES, max_records=3, now_ms=0) == [(0, 4, 1)]  # the whole first batch
    assert sp.next_fetch_offset() == 5
    assert sp.acquire("b", BATCHES[1:], max_records=10, now_ms=0) == [(5, 9, 1)]
    assert sp.acquire("b", BATCHES, max_records=10, now_ms=0) == []  # everything is taken


def test_accepted_records_move_the_start_released_ones_come_back() -> None:
    sp = SharePartition(0)
    sp.acquire("a", BATCHES, 10, now_ms=0)
    error, changed = sp.acknowledge("a", [(0, 4, [A.ACCEPT]), (5, 9, [A.RELEASE])], now_ms=1)
    assert (error, changed, sp.start) == (E.none, set(range(10)), 5)
    assert sp.next_fetch_offset() == 5
    assert sp.acquire("b", BATCHES, 10, now_ms=2) == [(5, 9, 2)]  # delivered a second time


def test_only_the_member_holding_a_record_may_acknowledge_it() -> None:
    sp = SharePartition(0)
    sp.acquire("a", BATCHES[:1], 10, now_ms=0)
    assert sp.acknowledge("b", [(0, 4, [A.ACCEPT])], now_ms=1) == (E.invalid_record_state, set())
    assert sp.acknowledge("a", [(0, 6, [A.ACCEPT])], now_ms=1)[0] == E.invalid_request  # 5-6 never acquired
    assert sp.acknowledge("a", [(0, 4, [A.ACCEPT, A.REJECT])], now_ms=1)[0] == E.invalid_request  # 2 types for 5
    assert sp.state_of(0) == (RecordState.ACQUIRED, 1)  # nothing changed


def test_per_record_types_and_gaps() -> None:
    sp = SharePartition(0)
    sp.acquire("a", BATCHES[:1], 10, now_ms=0)
    sp.acknowledge("a", [(0, 4, [A.ACCEPT, A.GAP, A.REJECT, A.RELEASE, A.ACCEPT])], now_ms=1)
    assert sp.start == 3 and sp.state_of(3) == (RecordState.AVAILABLE, 1) and sp.state_of(4)[0] is RecordState.ACKNOWLEDGED


def test_a_record_past_the_delivery_limit_is_archived() -> None:
    sp = SharePartition(0, ShareLimits(delivery_count_limit=2))
    for delivery in (1, 2):
        assert sp.acquire("a", BATCHES[:1], 10, now_ms=0) == [(0, 4, delivery)]
        sp.acknowledge("a", [(0, 4, [A.RELEASE])], now_ms=0)
    assert sp.start == 5 and sp.acquire("a", BATCHES[:1], 10, now_ms=0) == []  # archived after two deliveries


def test_locks_expire_and_leaving_members_give_records_back() -> None:
    sp = SharePartition(0, ShareLimits(lock_duration_ms=1000))
    sp.acquire("a", BATCHES[:1], 10, now_ms=0)
    sp.acquire("b", BATCHES[1:], 10, now_ms=500)
    assert sp.next_deadline() == 1000
    assert sp.expire_locks(now_ms=1000) == set(range(5))  # a's lock lapsed
    assert sp.release_member("b") == set(range(5, 10))
    assert sp.acquire("c", BATCHES, 10, now_ms=1001) == [(0, 9, 2)]


def test_the_in_flight_window_is_bounded() -> None:
    sp = SharePartition(0, ShareLimits(max_record_locks=7))
    assert sp.acquire("a", BATCHES, 100, now_ms=0) == [(0, 6, 1)]
    assert not sp.can_acquire()


def test_control_batches_and_holes_are_archived_as_passed() -> None:
    sp = SharePartition(0)
    assert sp.acquire("a", [(0, 1, False), (2, 2, True), (5, 6, False)], 10, now_ms=0) == [(0, 1, 1), (5, 6, 1)]
    sp.acknowledge("a", [(0, 1, [A.ACCEPT])], now_ms=0)
    assert sp.start == 5  # 2 (a marker) and 3-4 (a hole) did not hold it back


class FakeStateLog:
    def __init__(self) -> None:
        self.partitions: dict[int, list] = defaultdict(list)

    def append(self, partition: int, records: list, now_ms: int) -> None:
        self.partitions[partition].extend(records)

    def read(self, partition: int) -> list:
        return list(self.partitions[partition])


def test_state_survives_a_reload_of_share_group_state() -> None:
    state_log = FakeStateLog()
    store = ShareStateStore(state_log, num_partitions=3, updates_per_snapshot=3)
    key = ("g", uuid.uuid4(), 0)
    sp, error = store.open(key, lambda: 0, now_ms=0)
    assert error == E.none
    sp.acquire("a", BATCHES, 10, now_ms=0)
    for first, kind in ((0, A.ACCEPT), (2, A.RELEASE), (4, A.REJECT), (6, A.ACCEPT)):
        _, changed = sp.acknowledge("a", [(first, first + 1, [kind])], now_ms=1)
        assert store.persist(key, changed, now_ms=1) == E.none
    # 8-9 stay acquired: after a restart they are delivered again, as 2-3 (released) are.
    reloaded = ShareStateStore(state_log, num_partitions=3)
    for partition in range(3):
        reloaded.load(state_log.read(partition))
    again = reloaded.get(key)
    assert again is not None and again.start == 2
    assert [again.state_of(o) for o in range(2, 10)] == [
        (RecordState.AVAILABLE, 1)] * 2 + [(RecordState.ARCHIVED, 1)] * 2 + [(RecordState.ACKNOWLEDGED, 1)] * 2 + [
        (RecordState.AVAILABLE, 1)] * 2
    assert again.acquire("b", BATCHES, 10, now_ms=2) == [(2, 3, 2), (8, 9, 2)]


def test_deleted_state_stays_deleted_after_a_reload() -> None:
    state_log = FakeStateLog()
    store = ShareStateStore(state_log, num_partitions=1)
    key = ("g", uuid.uuid4(), 0)
    store.open(key, lambda: 7, now_ms=0)
    assert store.delete([key], now_ms=1) == E.none
    reloaded = ShareStateStore(state_log, num_partitions=1)
    reloaded.load(state_log.read(0))
    assert reloaded.get(key) is None
