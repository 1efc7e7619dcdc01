"""Recovery on open (seeds 001 and 003): truncated and garbage tails, corrupt batches, lost or bad indexes."""

from __future__ import annotations

import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_helpers import NOW, make_batch

from logway.storage.config import LogConfig
from logway.storage.partition_log import PartitionLog
from logway.wire.batch import iter_headers

PROPS = {"segment.bytes": "3000", "index.interval.bytes": "150"}


def build(open_log, batches=60):
    plog = open_log(PROPS)
    for i in range(batches):
        plog.append(make_batch([bytes([65 + i % 26]) * 40] * 2, timestamps=[NOW + i, NOW + i]), now_ms=NOW)
    plog._close_files()  # crash: no flush, no snapshot, no clean-shutdown marker
    return plog


def last_log_file(plog):
    return plog.dir / f"{plog.segment_base_offsets[-1]:020d}.log"


def batch_positions(path):
    data = path.read_bytes()
    return [(pos, h) for pos, h in iter_headers(data)]


def assert_readable(plog, end):
    """Every offset below ``end`` reads back its own batch, and appends continue at ``end``."""
    assert plog.log_end_offset == end
    for offset in range(0, end, 5):
        (pos, header), *_ = iter_headers(plog.read_bytes(offset, 1))
        assert header.base_offset <= offset <= header.last_offset
    assert plog.append(make_batch([b"after"]), now_ms=NOW).base_offset == end


def test_truncated_tail_is_cut_at_the_last_whole_batch(open_log):
    crashed = build(open_log)
    path = last_log_file(crashed)
    batches = batch_positions(path)
    last_pos, last = batches[-1]
    os.truncate(path, last_pos + last.size - 7)
    plog = open_log(PROPS)
    assert_readable(plog, last.base_offset)
    assert os.path.getsize(path) == last_pos + make_batch([b"after"]).__len__()


@pytest.mark.parametrize("garbage", [b"\x00" * 700, bytes(random.Random(3).randrange(256) for _ in range(700))])
def test_garbage_tail_is_removed(open_log, garbage):
    crashed = build(open_log)
    path = last_log_file(crashed)
    size = os.path.getsize(path)
    with open(path, "ab") as f:
        f.write(garbage)
    plog = open_log(PROPS)
    assert_readable(plog, 120)
    assert os.path.getsize(path) == size + len(make_batch([b"after"]))


def test_plausible_garbage_batch_is_caught_by_its_crc(open_log):
    crashed = build(open_log)
    path = last_log_file(crashed)
    fake = make_batch([b"zz" * 30])
    fake[-5] ^= 0x40  # a well-formed header and length, wrong CRC
    fake[0:8] = (120).to_bytes(8, "big")
    with open(path, "ab") as f:
        f.write(fake)
    assert_readable(open_log(PROPS), 120)


def test_corrupt_byte_in_the_middle_of_the_last_segment_truncates_there(open_log):
    crashed = build(open_log)
    path = last_log_file(crashed)
    batches = batch_positions(path)
    pos, victim = batches[len(batches) // 2]
    with open(path, "r+b") as f:
        f.seek(pos + victim.size - 3)
        byte = f.read(1)
        f.seek(pos + victim.size - 3)
        f.write(bytes([byte[0] ^ 0xFF]))
    plog = open_log(PROPS)
    assert_readable(plog, victim.base_offset)


def test_corruption_in_an_unflushed_middle_segment_drops_later_segments(open_log):
    crashed = build(open_log)
    bases = crashed.segment_base_offsets
    assert len(bases) >= 3
    middle = crashed.dir / f"{bases[1]:020d}.log"
    pos, victim = batch_positions(middle)[2]
    with open(middle, "r+b") as f:
        f.seek(pos + 30)
        f.write(b"\xff\xff")
    plog = open_log(PROPS)
    assert plog.segment_base_offsets == bases[:2]
    assert_readable(plog, victim.base_offset)
    assert not (crashed.dir / f"{bases[2]:020d}.log").exists()


@pytest.mark.parametrize("checkpointed", [True, False])
def test_only_segments_after_the_recovery_point_are_rescanned(open_log, checkpointed):
    plog = open_log(PROPS)
    for _ in range(60):
        plog.append(make_batch([b"q" * 80]), now_ms=NOW)
    plog.flush()
    assert plog.recovery_point == 60
    plog._close_files()
    first = plog.dir / f"{0:020d}.log"
    pos, victim = batch_positions(first)[3]
    with open(first, "r+b") as f:  # flip a record byte: only a CRC check can notice
        f.seek(pos + victim.size - 4)
        f.write(b"!")
    again = open_log(PROPS, recovery_point=60 if checkpointed else 0)
    # Kafka trusts flushed segments below the recovery point; without it everything is re-validated.
    assert again.log_end_offset == (60 if checkpointed else victim.base_offset)


@pytest.mark.parametrize("clean", [True, False])
@pytest.mark.parametrize("damage", ["delete", "garbage", "truncate"])
def test_lost_or_damaged_index_files_are_rebuilt(open_log, clean, damage):
    plog = open_log(PROPS)
    for i in range(60):
        plog.append(make_batch([bytes([65 + i % 26]) * 40] * 2, timestamps=[NOW + i, NOW + i]), now_ms=NOW)
    expected = {o: plog.read_bytes(o, 500) for o in range(120)}
    by_time = {t: plog.offset_for_timestamp(NOW + t) for t in range(60)}
    if clean:
        plog.close()
    else:
        plog._close_files()
    rng = random.Random(7)
    for name in os.listdir(plog.dir):
        if name.endswith((".index", ".timeindex")):
            path = plog.dir / name
            if damage == "delete":
                path.unlink()
            elif damage == "garbage":
                path.write_bytes(bytes(rng.randrange(256) for _ in range(96)))
            else:
                os.truncate(path, max(0, os.path.getsize(path) - 5))
    again = open_log(PROPS, clean_shutdown=clean)
    assert again.log_end_offset == 120
    assert {o: again.read_bytes(o, 500) for o in range(120)} == expected
    assert {t: again.offset_for_timestamp(NOW + t) for t in range(60)} == by_time
    assert any(os.path.getsize(again.dir / n) > 0 for n in os.listdir(again.dir) if n.endswith(".index"))


def test_garbage_tail_after_a_clean_shutdown_is_caught_by_the_tail_check(open_log):
    plog = open_log(PROPS)
    for _ in range(10):
        plog.append(make_batch([b"c" * 50]), now_ms=NOW)
    plog.close()
    with open(last_log_file(plog), "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x0a\x00\x00\x01\x00garbage")
    assert_readable(open_log(PROPS, clean_shutdown=True), 10)


def test_truncate_to_removes_whole_batches_and_producer_state(open_log):
    plog = open_log(PROPS)
    for i in range(30):
        plog.append(make_batch([b"t" * 40] * 3, producer_id=9, producer_epoch=0, base_sequence=3 * i), now_ms=NOW)
    plog.truncate_to(44)  # inside the batch 42..44: the whole batch goes
    assert plog.log_end_offset == 42
    assert plog.read(41, 10_000).size > 0
    # the producer's state follows the log: sequence 42 is next again
    assert plog.append(make_batch([b"n"] * 3, producer_id=9, producer_epoch=0, base_sequence=42), now_ms=NOW).base_offset == 42


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut_fraction=st.floats(0.0, 1.0), garbage=st.binary(max_size=200))
def test_any_torn_tail_recovers_to_the_last_whole_batch(tmp_path_factory, clock, cut_fraction, garbage):
    directory = tmp_path_factory.mktemp("torn") / "t-0"
    config = LogConfig.from_properties(PROPS)
    plog = PartitionLog(directory, "t", 0, config, clock_ms=clock)
    for i in range(25):
        plog.append(make_batch([b"r" * (10 + i)] * 2), now_ms=NOW)
    plog._close_files()
    path = directory / f"{plog.segment_base_offsets[-1]:020d}.log"
    original = path.read_bytes()
    cut = int(cut_fraction * len(original))
    damaged = original[:cut] + garbage
    path.write_bytes(damaged)
    whole = []  # the leading batches whose bytes survived intact (garbage may happen to restore a cut byte)
    for pos, h in iter_headers(original):
        if damaged[pos : pos + h.size] != original[pos : pos + h.size]:
            break
        whole.append(h)
    expected = whole[-1].last_offset + 1 if whole else plog.segment_base_offsets[-1]
    again = PartitionLog(directory, "t", 0, config, clock_ms=clock)
    try:
        assert again.log_end_offset == expected
        assert os.path.getsize(path) == sum(h.size for h in whole)
    finally:
        again._close_files()
