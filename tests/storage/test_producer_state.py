"""Idempotent producers: duplicates, sequence gaps, fenced epochs, and state surviving restarts."""

from __future__ import annotations

import os

import pytest
from storage_helpers import NOW, make_batch

from logway.storage.errors import InvalidProducerEpoch, InvalidRecord, OutOfOrderSequence

PID = 4242


def batch(seq: int, n: int = 2, epoch: int = 0, pid: int = PID) -> bytearray:
    return make_batch([b"v%d" % (seq + i) for i in range(n)], producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def test_retried_batch_is_a_duplicate_with_its_original_offsets(open_log):
    plog = open_log()
    plog.append(make_batch([b"other"]), now_ms=NOW)
    first = plog.append(batch(0), now_ms=NOW)
    plog.append(batch(2), now_ms=NOW)
    retry = plog.append(batch(0), now_ms=NOW)
    assert retry.duplicate
    assert (retry.base_offset, retry.last_offset) == (first.base_offset, first.last_offset) == (1, 2)
    assert plog.log_end_offset == 5


def test_only_the_last_five_batches_are_remembered(open_log):
    plog = open_log()
    for seq in range(0, 12, 2):
        plog.append(batch(seq), now_ms=NOW)
    assert plog.append(batch(2), now_ms=NOW).duplicate  # 2nd of 6: still among the last five
    with pytest.raises(OutOfOrderSequence):
        plog.append(batch(0), now_ms=NOW)  # evicted: now just out of order


def test_sequence_gap_is_out_of_order(open_log):
    plog = open_log()
    plog.append(batch(0), now_ms=NOW)
    with pytest.raises(OutOfOrderSequence):
        plog.append(batch(3), now_ms=NOW)
    with pytest.raises(OutOfOrderSequence):
        plog.append(batch(1), now_ms=NOW)  # overlaps, but is not an exact duplicate
    assert plog.append(batch(2), now_ms=NOW).base_offset == 2


def test_unknown_producer_may_start_anywhere_and_sequences_wrap(open_log):
    plog = open_log()
    plog.append(batch(2**31 - 2, n=2), now_ms=NOW)
    assert not plog.append(batch(0), now_ms=NOW).duplicate


def test_older_epoch_is_fenced_and_new_epoch_starts_at_zero(open_log):
    plog = open_log()
    plog.append(batch(0, epoch=3), now_ms=NOW)
    with pytest.raises(InvalidProducerEpoch):
        plog.append(batch(2, epoch=2), now_ms=NOW)
    with pytest.raises(OutOfOrderSequence):
        plog.append(batch(5, epoch=4), now_ms=NOW)
    plog.append(batch(0, epoch=4), now_ms=NOW)
    # the old epoch's batch is forgotten once the epoch moved on
    with pytest.raises(InvalidProducerEpoch):
        plog.append(batch(0, epoch=3), now_ms=NOW)


def test_two_batches_of_one_producer_in_one_append(open_log):
    plog = open_log()
    result = plog.append(batch(0) + batch(2), now_ms=NOW)
    assert (result.base_offset, result.last_offset) == (0, 3)
    with pytest.raises(OutOfOrderSequence):
        plog.append(batch(4) + batch(7), now_ms=NOW)
    assert plog.log_end_offset == 4


def test_producer_id_without_sequence_is_invalid(open_log):
    plog = open_log()
    with pytest.raises(InvalidRecord):
        plog.append(make_batch([b"a"], producer_id=1, producer_epoch=0, base_sequence=-1), now_ms=NOW)


@pytest.mark.parametrize("clean", [True, False])
def test_duplicate_detected_after_reopen(open_log, clean):
    props = {"segment.bytes": "400"}
    plog = open_log(props)
    offsets = {}
    for seq in range(0, 20, 2):
        offsets[seq] = plog.append(batch(seq, n=2), now_ms=NOW).base_offset
    assert len(plog.segment_base_offsets) > 2
    if clean:
        plog.close()
    else:
        plog._close_files()  # like SIGKILL: no snapshot at the end, no clean-shutdown marker
    again = open_log(props, clean_shutdown=clean)
    retry = again.append(batch(14, n=2), now_ms=NOW)
    assert retry.duplicate and retry.base_offset == offsets[14]
    assert again.append(batch(20), now_ms=NOW).base_offset == 20
    with pytest.raises(OutOfOrderSequence):
        again.append(batch(30), now_ms=NOW)


def test_corrupt_snapshot_falls_back_to_scanning_the_log(open_log):
    plog = open_log()
    plog.append(batch(0), now_ms=NOW)
    plog.close()
    snapshots = [n for n in os.listdir(plog.dir) if n.endswith(".snapshot")]
    assert snapshots
    for name in snapshots:
        with open(plog.dir / name, "r+b") as f:
            f.seek(8)
            f.write(b"\xde\xad")
    again = open_log(clean_shutdown=True)
    assert again.append(batch(0), now_ms=NOW).duplicate


def test_expired_producers_are_forgotten(open_log):
    plog = open_log()
    plog.append(batch(0), now_ms=NOW)
    plog.expire_producers(NOW + 86_400_000)
    assert not plog.append(batch(0), now_ms=NOW).duplicate  # unknown again: any sequence is accepted
