"""Transactions in the log: last stable offset, markers, the .txnindex, and their recovery."""

from __future__ import annotations

import pytest
from storage_helpers import NOW

from logway.storage.errors import InvalidProducerEpoch
from logway.storage.txn_index import read_entries
from logway.wire.records import build_batch, decode_batches

A, B = 100, 200


def txn_batch(pid: int, seq: int, n: int = 2, epoch: int = 0) -> bytearray:
    return bytearray(build_batch([(None, b"v%d" % i, ()) for i in range(n)], base_timestamp=NOW, producer_id=pid,
                                 producer_epoch=epoch, base_sequence=seq, is_transactional=True))


def plain(n: int = 1) -> bytearray:
    return bytearray(build_batch([(None, b"p", ())] * n, base_timestamp=NOW))


def read_offsets(plog, offset: int, max_offset: int | None) -> list[int]:
    data = plog.read_bytes(offset, 1 << 20) if max_offset is None else _read(plog, offset, max_offset)
    return [r.offset for b in decode_batches(data) for r in b.records]


def _read(plog, offset: int, max_offset: int) -> bytes:
    import os

    result = plog.read(offset, 1 << 20, max_offset=max_offset)
    return os.pread(result.fd, result.size, result.position) if result.size else b""


def test_last_stable_offset_follows_the_earliest_open_transaction(open_log):
    plog = open_log()
    plog.append(plain(), now_ms=NOW)  # 0
    plog.append(txn_batch(A, 0), now_ms=NOW)  # 1-2
    plog.append(plain(), now_ms=NOW)  # 3
    plog.append(txn_batch(B, 0), now_ms=NOW)  # 4-5
    assert plog.last_stable_offset == 1 and plog.high_watermark == 6
    assert plog.fetch_offsets() == (6, 1, 0)  # what a Fetch answers: high watermark, LSO, log start offset
    assert read_offsets(plog, 0, plog.last_stable_offset) == [0]
    assert read_offsets(plog, 1, plog.last_stable_offset) == []
    assert plog.append_marker(A, 0, True, now_ms=NOW).base_offset == 6
    assert plog.last_stable_offset == 4
    assert read_offsets(plog, 0, 4) == [0, 1, 2, 3]
    plog.append_marker(B, 0, False, now_ms=NOW)  # 7
    assert plog.last_stable_offset == plog.high_watermark == 8
    assert plog.fetch_offsets() == (8, 8, 0)
    assert plog.aborted_transactions(0, 8) == [(B, 4)]
    assert plog.aborted_transactions(8, 8) == []  # the ABORT marker at 7 is before the fetch
    assert plog.aborted_transactions(0, 4) == []  # the transaction starts at the upper bound
    assert read_entries(plog.dir / "00000000000000000000.txnindex") == [(B, 4, 7, 8)]


def test_a_marker_with_an_older_epoch_is_refused(open_log):
    plog = open_log()
    plog.append(txn_batch(A, 0, epoch=3), now_ms=NOW)
    with pytest.raises(InvalidProducerEpoch):
        plog.append_marker(A, 2, False, now_ms=NOW)
    assert plog.last_stable_offset == 0


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "killed"])
def test_open_transactions_and_aborts_survive_a_restart(open_log, clean):
    props = {"segment.bytes": "300"}  # a roll (and a producer snapshot) inside the open transaction
    plog = open_log(props)
    plog.append(txn_batch(B, 0), now_ms=NOW)  # 0-1
    plog.append_marker(B, 0, False, now_ms=NOW)  # 2
    plog.append(txn_batch(A, 0), now_ms=NOW)  # 3-4
    for seq in range(2, 12, 2):
        plog.append(txn_batch(A, seq), now_ms=NOW)
    assert len(plog.segment_base_offsets) > 1 and plog.last_stable_offset == 3
    if clean:
        plog.close()
    else:
        plog._close_files()
    again = open_log(props, clean_shutdown=clean)
    assert again.last_stable_offset == 3
    assert again.aborted_transactions(0, 100) == [(B, 0)]
    again.append_marker(A, 0, False, now_ms=NOW)
    assert again.last_stable_offset == again.high_watermark
    assert again.aborted_transactions(3, 100) == [(A, 3)]


def test_a_txnindex_lost_in_a_crash_is_rebuilt_from_the_markers(open_log):
    plog = open_log()
    plog.append(txn_batch(A, 0), now_ms=NOW)
    plog.append_marker(A, 0, False, now_ms=NOW)
    plog._close_files()
    (plog.dir / "00000000000000000000.txnindex").unlink()
    again = open_log()
    assert again.aborted_transactions(0, 10) == [(A, 0)]
    assert read_entries(again.dir / "00000000000000000000.txnindex") == [(A, 0, 2, 3)]


def test_truncation_forgets_aborts_and_markers_beyond_it(open_log):
    plog = open_log()
    plog.append(txn_batch(A, 0), now_ms=NOW)  # 0-1
    plog.append_marker(A, 0, False, now_ms=NOW)  # 2
    plog.truncate_to(2)
    assert plog.aborted_transactions(0, 10) == []
    assert plog.last_stable_offset == 0  # the transaction is open again
    assert read_entries(plog.dir / "00000000000000000000.txnindex") == []


def test_deleted_segments_take_their_aborted_transactions_along(open_log):
    plog = open_log({"segment.bytes": "300"})
    plog.append(txn_batch(A, 0), now_ms=NOW)  # 0-1
    plog.append_marker(A, 0, False, now_ms=NOW)  # 2
    for _ in range(6):
        plog.append(plain(3), now_ms=NOW)
    assert len(plog.segment_base_offsets) > 2
    plog.delete_records_before(plog.segment_base_offsets[2])
    assert plog.aborted_transactions(0, plog.high_watermark) == []


def keyed(key: bytes, value: bytes, pid: int = -1, seq: int = -1) -> bytearray:
    return bytearray(build_batch([(key, value, ())], base_timestamp=NOW, producer_id=pid,
                                 producer_epoch=0 if pid >= 0 else -1, base_sequence=seq, is_transactional=pid >= 0))


def test_compaction_drops_aborted_records_and_stops_at_open_transactions(open_log):
    props = {"cleanup.policy": "compact", "segment.bytes": "200", "min.cleanable.dirty.ratio": "0.01"}
    plog = open_log(props)
    plog.append(keyed(b"k", b"committed"), now_ms=NOW)
    plog.append(keyed(b"k", b"aborted", pid=A, seq=0), now_ms=NOW)
    plog.append_marker(A, 0, False, now_ms=NOW)
    plog.append(keyed(b"j", b"before"), now_ms=NOW)
    plog.append(keyed(b"j", b"open", pid=B, seq=0), now_ms=NOW)  # B's transaction stays open
    for i in range(4):
        plog.append(keyed(b"x", b"%d" % i), now_ms=NOW)
    plog.compact(NOW)
    plog.finish_compaction()
    values: dict[bytes, list[bytes]] = {}
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        for batch in decode_batches(plog.read_bytes(offset, 1 << 20)):
            offset = batch.header.last_offset + 1
            for r in [] if batch.header.is_control else batch.records:
                values.setdefault(r.key, []).append(r.value)
    # The aborted record neither survives nor hides the committed one; the open transaction is not cleaned.
    assert values[b"k"] == [b"committed"]
    assert values[b"j"] == [b"before", b"open"]


def test_replaying_markers_already_in_the_txnindex_adds_nothing(open_log):
    plog = open_log()
    plog.append(txn_batch(A, 0), now_ms=NOW)
    plog.append_marker(A, 0, False, now_ms=NOW)
    plog._close_files()  # killed: no snapshot, so the reopen replays the marker
    again = open_log()
    assert again.aborted_transactions(0, 10) == [(A, 0)]
    assert read_entries(again.dir / "00000000000000000000.txnindex") == [(A, 0, 2, 3)]
