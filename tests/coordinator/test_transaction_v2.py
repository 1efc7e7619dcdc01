"""Transaction version 2 (KIP-890 part 2) in the sans-IO transaction coordinator: partitions added by the
produce itself, the epoch bumped at every EndTxn v5 (markers written with the new epoch), retries recognized
by the previous epoch, Kafka's table for ending Empty / CompleteCommit / CompleteAbort transactions, and a new
producer id past an exhausted epoch."""

from __future__ import annotations

from test_transaction_coordinator import T0, TID, init, parts  # noqa: F401  (the fixture)

from logway.coordinator.txn_metadata import TxnState
from logway.coordinator.txn_schema import decode_value
from logway.wire.errors import ErrorCode as E


def end(c, epoch: int, commit: bool, pid: int = 1000, now: int = T0 + 10):
    r = c.end_txn_v2(TID, pid, epoch, commit, now)
    return r.error, r.producer_id, r.producer_epoch


def test_every_end_bumps_the_epoch_and_the_markers_carry_it(parts):  # noqa: F811
    c, log, markers = parts
    assert init(c) == (E.none, 1000, 0)
    assert c.add_partitions(TID, 1000, 0, [("t", 0)], T0 + 1, client_version=2) == E.none
    assert end(c, 0, True) == (E.none, 1000, 1)
    assert markers.written == [(1000, 1, True, (("t", 0),))]
    meta = c.transaction(TID)
    assert (meta.state, meta.producer_epoch, meta.last_producer_epoch, meta.client_version) == (
        TxnState.COMPLETE_COMMIT, 1, 0, 2)
    # The next transaction runs at the new epoch; the old one is fenced.
    assert c.add_partitions(TID, 1000, 0, [("t", 0)], T0 + 20, client_version=2) == E.producer_fenced
    assert c.add_partitions(TID, 1000, 1, [("t", 1)], T0 + 20, client_version=2) == E.none
    assert end(c, 1, False, now=T0 + 30) == (E.none, 1000, 2)
    assert markers.written[-1] == (1000, 2, False, (("t", 1),))
    # The records of __transaction_state: schema version 1, ClientTransactionVersion 2 on the v2 transaction.
    values = [decode_value(v) for recs in log.records.values() for _, v in recs]
    assert [v.client_version for v in values] == [0, 2, 2, 2, 2, 2, 2]
    assert all(value[:2] == b"\x00\x01" for recs in log.records.values() for _, value in recs)


def test_retries_are_recognized_by_the_previous_epoch(parts):  # noqa: F811
    c, _, _ = parts
    init(c)
    c.add_partitions(TID, 1000, 0, [("t", 0)], T0 + 1, client_version=2)
    assert end(c, 0, True) == (E.none, 1000, 1)
    assert end(c, 0, True) == (E.none, 1000, 1)  # the answer was lost: the same answer
    assert end(c, 0, False)[0] == E.invalid_txn_state  # a retry of the other outcome
    assert end(c, 1, True)[0] == E.invalid_txn_state  # a commit of nothing at the current epoch
    assert end(c, 5, True)[0] == E.producer_fenced
    assert end(c, 0, True, pid=999)[0] == E.invalid_producer_id_mapping


def test_aborting_with_nothing_added_bumps_the_epoch_without_markers(parts):  # noqa: F811
    c, log, markers = parts
    init(c)
    assert end(c, 0, True)[0] == E.invalid_txn_state  # Empty: no commit
    assert end(c, 0, False) == (E.none, 1000, 1)  # Empty: an abort moves the epoch on
    assert all(not partitions for *_, partitions in markers.written)  # no partition to mark
    assert end(c, 0, False) == (E.none, 1000, 1)  # its retry
    assert end(c, 1, False) == (E.none, 1000, 2)  # CompleteAbort at the current epoch: again
    assert c.transaction(TID).state == TxnState.COMPLETE_ABORT


def test_an_exhausted_epoch_moves_to_a_new_producer_id(parts):  # noqa: F811
    c, _, markers = parts
    init(c)
    meta = c.transaction(TID)
    meta.producer_epoch = 32766  # Short.MAX_VALUE - 1: the last epoch a client may use
    c.add_partitions(TID, 1000, 32766, [("t", 0)], T0 + 1, client_version=2)
    assert end(c, 32766, True) == (E.none, 1001, 0)
    assert markers.written == [(1000, 32767, True, (("t", 0),))]  # the markers fence the old id's epochs
    meta = c.transaction(TID)
    assert (meta.producer_id, meta.producer_epoch, meta.previous_producer_id, meta.next_producer_id) == (
        1001, 0, 1000, -1)
    assert end(c, 32766, True, pid=1000) == (E.none, 1001, 0)  # a retry from before the move


def test_a_prepared_transaction_answers_concurrent_transactions_to_its_retry(parts):  # noqa: F811
    c, _, markers = parts
    init(c)
    markers.failing = {("t", 0)}
    c.add_partitions(TID, 1000, 0, [("t", 0)], T0 + 1, client_version=2)
    assert end(c, 0, True) == (E.none, 1000, 1)  # answered once PrepareCommit is written
    assert c.transaction(TID).state == TxnState.PREPARE_COMMIT
    assert end(c, 0, True)[0] == E.concurrent_transactions
    assert end(c, 1, True)[0] == E.producer_fenced  # only a retry can meet a Prepare state
    markers.failing = set()
    c.retry_markers(T0 + 40)
    assert c.transaction(TID).state == TxnState.COMPLETE_COMMIT
