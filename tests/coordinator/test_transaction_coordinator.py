"""The sans-IO transaction coordinator: Kafka's transitions, fencing and errors, with an in-memory log."""

from __future__ import annotations

import pytest

from logway.coordinator.txn_coordinator import TransactionCoordinator
from logway.coordinator.txn_metadata import InvalidTransition, TransactionMetadata, TxnState
from logway.coordinator.txn_schema import TxnLogValue, decode_key, decode_value, encode_key, encode_value
from logway.wire.errors import ErrorCode as E
from logway.wire.errors import KafkaError

T0 = 1_700_000_000_000
TID = "app-1"


class MemoryLog:
    """Records appended per partition; ``fail`` makes the next appends raise as a full disk would."""

    def __init__(self) -> None:
        self.records: dict[int, list[tuple[bytes, bytes | None]]] = {}
        self.fail = False

    def append(self, partition, key, value, now_ms):
        if self.fail:
            raise KafkaError("disk full", E.kafka_storage_error)
        self.records.setdefault(partition, []).append((key, value))

    def states(self, tid: str) -> list[str]:
        return [TxnState(decode_value(v).state).kafka_name for recs in self.records.values() for k, v in recs
                if v is not None and decode_key(k) == tid]


class Markers:
    def __init__(self) -> None:
        self.written: list[tuple[int, int, bool, tuple]] = []
        self.failing: set = set()

    def write_markers(self, pid, epoch, commit, partitions, now_ms):
        partitions = tuple(partitions)
        self.written.append((pid, epoch, commit, partitions))
        return {p for p in partitions if p in self.failing}


@pytest.fixture
def parts():
    log, markers, ids = MemoryLog(), Markers(), iter(range(1000, 2000))
    coordinator = TransactionCoordinator(log, markers, lambda: next(ids), num_partitions=3)
    for p in range(3):
        coordinator.load(p, [], T0)
    return coordinator, log, markers


def init(c, tid=TID, timeout=60_000, pid=-1, epoch=-1, now=T0):
    r = c.init_producer_id(tid, timeout, pid, epoch, now)
    return r.error, r.producer_id, r.producer_epoch


def test_init_begin_commit_walks_kafkas_states(parts):
    c, log, markers = parts
    assert init(c) == (E.none, 1000, 0)
    assert c.add_partitions(TID, 1000, 0, [("t", 0), ("t", 1)], T0 + 1) == E.none
    assert c.add_partitions(TID, 1000, 0, [("t", 1)], T0 + 2) == E.none  # nothing new: no write
    assert c.end_txn(TID, 1000, 0, True, T0 + 3) == E.none
    assert log.states(TID) == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]
    assert markers.written == [(1000, 0, True, (("t", 0), ("t", 1)))]
    meta = c.transaction(TID)
    assert (meta.state, meta.partitions, meta.start_ms) == (TxnState.COMPLETE_COMMIT, set(), T0 + 1)
    # A retried EndTxn of the same outcome is answered NONE, the opposite one INVALID_TXN_STATE.
    assert c.end_txn(TID, 1000, 0, True, T0 + 4) == E.none
    assert c.end_txn(TID, 1000, 0, False, T0 + 4) == E.invalid_txn_state


def test_errors_as_kafka_answers_them(parts):
    c, _, _ = parts
    assert init(c, timeout=0)[0] == E.invalid_transaction_timeout
    assert init(c, timeout=900_001)[0] == E.invalid_transaction_timeout
    assert init(c, tid="")[0] == E.invalid_request
    assert c.add_partitions("unknown", 1, 0, [("t", 0)], T0) == E.invalid_producer_id_mapping
    _, pid, epoch = init(c)
    assert c.add_partitions(TID, pid + 1, epoch, [("t", 0)], T0) == E.invalid_producer_id_mapping
    assert c.end_txn(TID, pid, epoch, True, T0) == E.invalid_txn_state  # Empty: nothing to end
    assert c.add_partitions(TID, pid, epoch + 1, [("t", 0)], T0) == E.producer_fenced
    unloaded = TransactionCoordinator(MemoryLog(), Markers(), lambda: 1, num_partitions=3)
    assert init(unloaded)[0] == E.coordinator_load_in_progress


def test_a_new_instance_fences_the_old_one_and_aborts_its_transaction(parts):
    c, log, markers = parts
    _, pid, epoch = init(c)
    c.add_partitions(TID, pid, epoch, [("t", 0)], T0)
    # The open transaction is aborted with a fencing epoch; the client retries and gets epoch + 2.
    assert init(c)[0] == E.concurrent_transactions
    assert markers.written == [(pid, epoch + 1, False, (("t", 0),))]
    assert init(c) == (E.none, pid, epoch + 2)
    assert c.add_partitions(TID, pid, epoch, [("t", 1)], T0) == E.producer_fenced
    assert c.end_txn(TID, pid, epoch, True, T0) == E.producer_fenced
    assert log.states(TID)[-3:] == ["PrepareAbort", "CompleteAbort", "Empty"]


def test_kip_360_epoch_bump_of_the_current_producer_and_its_retry(parts):
    c, _, _ = parts
    _, pid, epoch = init(c)
    assert init(c, pid=pid, epoch=epoch) == (E.none, pid, epoch + 1)
    # The answer was lost and the client retries with the epoch it had: the same epoch again.
    assert init(c, pid=pid, epoch=epoch) == (E.none, pid, epoch + 1)
    assert init(c, pid=pid, epoch=epoch - 5)[0] == E.producer_fenced
    assert init(c, pid=pid + 7, epoch=0)[0] == E.producer_fenced


def test_an_exhausted_epoch_gets_a_new_producer_id(parts):
    c, _, _ = parts
    _, pid, _ = init(c)
    c.transaction(TID).producer_epoch = 32766
    error, new_pid, epoch = init(c)
    assert (error, epoch) == (E.none, 0) and new_pid != pid
    assert c.transaction(TID).previous_producer_id == pid


def test_a_failed_state_write_changes_nothing(parts):
    c, log, _ = parts
    _, pid, epoch = init(c)
    log.fail = True
    assert c.add_partitions(TID, pid, epoch, [("t", 0)], T0) == E.not_coordinator
    assert c.transaction(TID).state == TxnState.EMPTY


def test_timed_out_transactions_are_aborted_and_their_producer_fenced(parts):
    c, _, markers = parts
    _, pid, epoch = init(c, timeout=1000)
    c.add_partitions(TID, pid, epoch, [("t", 0)], T0)
    assert c.abort_timed_out(T0 + 1000) == []
    assert c.abort_timed_out(T0 + 1001) == [TID]
    assert markers.written == [(pid, epoch + 1, False, (("t", 0),))]
    assert c.transaction(TID).state == TxnState.COMPLETE_ABORT
    assert c.end_txn(TID, pid, epoch, True, T0 + 2000) == E.producer_fenced


def test_failed_markers_keep_the_prepare_state_until_a_retry_succeeds(parts):
    c, log, markers = parts
    _, pid, epoch = init(c)
    c.add_partitions(TID, pid, epoch, [("t", 0)], T0)
    markers.failing = {("t", 0)}
    assert c.end_txn(TID, pid, epoch, True, T0) == E.none
    assert c.transaction(TID).state == TxnState.PREPARE_COMMIT
    assert c.add_partitions(TID, pid, epoch, [("t", 1)], T0) == E.concurrent_transactions
    markers.failing = set()
    c.retry_markers(T0 + 10)
    assert c.transaction(TID).state == TxnState.COMPLETE_COMMIT


def test_loading_completes_a_prepared_commit_and_keeps_an_ongoing_one(parts):
    c, log, _ = parts
    _, pid, epoch = init(c)
    c.add_partitions(TID, pid, epoch, [("t", 0)], T0)
    _, opid, oepoch = init(c, tid="other")
    c.add_partitions("other", opid, oepoch, [("t", 1)], T0)
    ongoing = c.transaction(TID)
    prepared = ongoing.transition(TxnState.PREPARE_COMMIT, T0 + 5)
    log.append(c.partition_for(TID), encode_key(TID), encode_value(prepared.to_log_value()), T0 + 5)

    markers = Markers()
    reloaded = TransactionCoordinator(log, markers, lambda: 5000, num_partitions=3)
    for p in range(3):
        reloaded.load(p, log.records.get(p, []), T0 + 10)
    assert markers.written == [(pid, epoch, True, (("t", 0),))]
    assert reloaded.transaction(TID).state == TxnState.COMPLETE_COMMIT
    assert reloaded.transaction("other").state == TxnState.ONGOING
    assert reloaded.transaction("other").partitions == {("t", 1)}


def test_idle_transactional_ids_expire_with_a_tombstone(parts):
    c, log, _ = parts
    c.id_expiration_ms = 1000
    init(c)
    assert c.expire_transactional_ids(T0 + 999) == []
    assert c.expire_transactional_ids(T0 + 1000) == [TID]
    assert c.transaction(TID) is None
    assert log.records[c.partition_for(TID)][-1] == (encode_key(TID), None)


def test_kafkas_transitions_are_enforced():
    meta = TransactionMetadata(TID, 1, 0, 1000)
    with pytest.raises(InvalidTransition):
        meta.transition(TxnState.PREPARE_COMMIT, T0)


def test_log_value_bytes_follow_kafkas_schema():
    value = TxnLogValue(42, 3, 60_000, int(TxnState.ONGOING), {"b": (1, 0), "a": (2,)}, T0 + 1, T0)
    raw = encode_value(value, version=0)
    # TransactionLogValue v0: version, producer id, epoch, timeout, status, partitions (sorted topics), times.
    assert raw[:17] == bytes.fromhex("0000" "000000000000002a" "0003" "0000ea60" "01")
    assert raw[17:21] == b"\x00\x00\x00\x02" and raw[21:24] == b"\x00\x01a"
    assert decode_value(raw) == TxnLogValue(42, 3, 60_000, 1, {"a": (2,), "b": (1, 0)}, T0 + 1, T0)
    assert encode_key("tx") == b"\x00\x00\x00\x02tx" and decode_key(b"\x00\x00\x00\x02tx") == "tx"
    empty = encode_value(TxnLogValue(1, 0, 1000, 0, {}, T0, -1), null_partitions=True, version=0)
    assert empty[17:21] == b"\xff\xff\xff\xff" and decode_value(empty).partitions == {}


def test_log_value_version_1_is_flexible_with_its_tagged_fields():
    """What Kafka 4 writes once transaction.version is 1 or more: compact arrays and strings, and the tagged
    fields that are not at their defaults (PreviousProducerId 0, NextProducerId 1, ClientTransactionVersion 2)."""
    value = TxnLogValue(42, 3, 60_000, int(TxnState.PREPARE_COMMIT), {"a": (2,)}, T0 + 1, T0,
                        previous_producer_id=-1, next_producer_id=77, client_version=2)
    raw = encode_value(value)
    assert raw[:17] == bytes.fromhex("0001" "000000000000002a" "0003" "0000ea60" "02")
    assert raw[17:26] == bytes.fromhex("02" "0261" "02" "00000002" "00")  # [{"a", [2]}], no tags in the entry
    assert raw[42:] == bytes.fromhex("02" "01" "08" "000000000000004d" "02" "02" "0002")
    assert decode_value(raw) == value
    empty = encode_value(TxnLogValue(1, 0, 1000, 0, {}, T0, -1), null_partitions=True)
    assert empty[17:18] == b"\x00" and empty[-1:] == b"\x00" and decode_value(empty).partitions == {}


def test_a_produce_is_verified_against_the_ongoing_transaction(parts):
    c, _, _ = parts
    _, pid, epoch = init(c)
    assert c.verify_partition(TID, pid, epoch, ("t", 0)) == E.invalid_txn_state  # not added yet
    c.add_partitions(TID, pid, epoch, [("t", 0)], T0)
    assert c.verify_partition(TID, pid, epoch, ("t", 0)) == E.none
    assert c.verify_partition(TID, pid, epoch, ("t", 1)) == E.invalid_txn_state
    assert c.verify_partition(TID, pid, epoch - 1, ("t", 0)) == E.invalid_producer_epoch
    assert c.verify_partition(TID, pid + 1, epoch, ("t", 0)) == E.invalid_producer_id_mapping
    unloaded = TransactionCoordinator(MemoryLog(), Markers(), lambda: 1, num_partitions=3)
    assert unloaded.verify_partition(TID, pid, epoch, ("t", 0)) == E.not_enough_replicas
