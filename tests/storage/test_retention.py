"""Retention by time and by size: whole segments, oldest first, never the active one; delayed unlink."""

from __future__ import annotations

import os

import pytest
from storage_helpers import NOW, make_batch

from logway.storage.errors import OffsetOutOfRange

DAY = 86_400_000


def segment_files(plog, suffix=".log"):
    return sorted(n for n in os.listdir(plog.dir) if n.endswith(suffix))


def test_time_retention_uses_the_largest_timestamp_of_each_segment(open_log):
    plog = open_log({"segment.bytes": "400", "retention.ms": str(DAY), "file.delete.delay.ms": "1000"})
    for day in range(5):
        for _ in range(3):
            plog.append(make_batch([b"x" * 60], timestamps=[NOW + day * DAY]), now_ms=NOW + day * DAY)
    bases = plog.segment_base_offsets
    assert len(bases) >= 5
    now = NOW + 4 * DAY
    deleted = plog.delete_old_segments(now)
    # everything older than one day before `now` goes; segments of day 3 and 4 stay
    assert deleted > 0
    assert plog.log_start_offset == plog.segment_base_offsets[0]
    assert plog.offset_for_timestamp(0)[1] >= NOW + 3 * DAY
    with pytest.raises(OffsetOutOfRange):
        plog.read(0, 100)
    # renamed now, unlinked only after file.delete.delay.ms
    assert any(n.endswith(".log.deleted") for n in os.listdir(plog.dir))
    plog.delete_pending_segments(now + 999)
    assert any(n.endswith(".log.deleted") for n in os.listdir(plog.dir))
    plog.delete_pending_segments(now + 1000)
    assert not any(n.endswith(".deleted") for n in os.listdir(plog.dir))
    assert len(segment_files(plog)) == len(plog.segment_base_offsets)


def test_time_retention_never_deletes_the_active_segment(open_log):
    plog = open_log({"retention.ms": "1000"})
    plog.append(make_batch([b"old"], timestamps=[NOW]), now_ms=NOW)
    assert plog.delete_old_segments(NOW + 10 * DAY) == 0
    assert plog.read_bytes(0, 100)


def test_size_retention_keeps_at_least_retention_bytes(open_log):
    plog = open_log({"segment.bytes": "500", "retention.bytes": "1000", "retention.ms": "-1"})
    for _ in range(30):
        plog.append(make_batch([b"y" * 100]), now_ms=NOW)
    total_before = plog.size_bytes
    assert total_before > 2000
    plog.delete_old_segments(NOW)
    assert 1000 <= plog.size_bytes < 1000 + 500
    assert plog.log_start_offset == plog.segment_base_offsets[0] > 0
    assert plog.log_end_offset == 30


def test_size_retention_never_deletes_the_active_segment(open_log):
    plog = open_log({"retention.bytes": "0"})
    for _ in range(5):
        plog.append(make_batch([b"z" * 100]), now_ms=NOW)
    assert plog.delete_old_segments(NOW) == 0
    assert plog.log_start_offset == 0


def test_compact_only_topics_are_not_subject_to_retention(open_log):
    plog = open_log({"segment.bytes": "200", "retention.bytes": "0", "cleanup.policy": "compact"})
    for _ in range(10):
        plog.append(make_batch([b"k" * 100], keys=[b"key"]), now_ms=NOW)
    assert plog.delete_old_segments(NOW + 30 * DAY) == 0


def test_log_start_offset_survives_restart(tmp_path, clock):
    from logway.storage.config import LogConfig
    from logway.storage.log_manager import LogManager

    manager = LogManager([tmp_path], LogConfig.from_properties({"segment.bytes": "300", "retention.bytes": "0"}), clock_ms=clock)
    manager.open()
    plog = manager.create_topic("r", 1).partitions[0]
    for _ in range(10):
        plog.append(make_batch([b"w" * 100]), now_ms=NOW)
    manager.maintenance(NOW)
    start = plog.log_start_offset
    assert start > 0
    manager.close()
    again = LogManager([tmp_path], manager.default_config, clock_ms=clock)
    again.open()
    assert again.get_partition("r", 0).log_start_offset == start
    again.close()


def test_delete_records_moves_the_start_and_drops_only_whole_segments_below_it(open_log):
    plog = open_log({"segment.bytes": "500", "cleanup.policy": "compact", "file.delete.delay.ms": "0"})
    for i in range(20):
        plog.append(make_batch([b"z" * 100], keys=[b"k%d" % i]), now_ms=NOW)
    bases = plog.segment_base_offsets
    assert len(bases) >= 4
    target = bases[2] + 1  # inside the third segment
    assert plog.delete_records_before(target) == target
    # The segments ending at or below the target go, even on a compacted topic; the one holding it stays.
    assert plog.segment_base_offsets == bases[2:]
    assert plog.log_start_offset == target
    with pytest.raises(OffsetOutOfRange):
        plog.read(target - 1, 1000)
    assert plog.read_bytes(target, 1000)
    assert plog.delete_records_before(1) == target  # lower than the start: nothing changes
    assert plog.delete_records_before(20) == 20  # the high watermark: everything but the active segment
    assert plog.segment_base_offsets == bases[-1:]
    with pytest.raises(OffsetOutOfRange):
        plog.delete_records_before(21)
    plog.append(make_batch([b"after"], keys=[b"k"]), now_ms=NOW)
    assert plog.read_bytes(20, 1000)


def test_retention_keeps_segments_at_or_above_the_high_watermark(open_log):
    """Appends waiting for their fsync (flush.acks.all.enable) are above the high watermark: retention does not
    take their segments, so the log start offset never passes the high watermark (Kafka's deletableSegments)."""
    plog = open_log({"segment.bytes": "400", "retention.ms": str(DAY), "flush.acks.all.enable": "true"})
    for _ in range(8):  # old records, fsync not yet done: several segments above the high watermark
        assert plog.append(make_batch([b"x" * 60]), now_ms=NOW, acks_all=True).flush_needed
    assert len(plog.segment_base_offsets) > 2 and plog.high_watermark == 0
    assert plog.delete_old_segments(NOW + 2 * DAY) == 0
    assert plog.log_start_offset == 0
    plog.flush()  # now acknowledged: the high watermark moves to the log end, and retention may take them
    assert plog.high_watermark == plog.log_end_offset
    assert plog.delete_old_segments(NOW + 2 * DAY) > 0
    assert plog.log_start_offset <= plog.high_watermark
