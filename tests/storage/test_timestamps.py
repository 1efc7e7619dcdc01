"""Time index, ListOffsets by timestamp and MAX_TIMESTAMP, and time-based rolling."""

from __future__ import annotations

from storage_helpers import NOW, make_batch


def test_offset_for_timestamp_finds_the_first_record_at_or_after(open_log):
    plog = open_log({"segment.bytes": "1500", "index.interval.bytes": "100"})
    # batch i holds records with timestamps T+10i, T+10i+3, T+10i+6 (offsets 3i..3i+2)
    for i in range(100):
        ts = [NOW + 10 * i, NOW + 10 * i + 3, NOW + 10 * i + 6]
        plog.append(make_batch([b"v" * 30] * 3, timestamps=ts), now_ms=NOW + 10 * i + 6)
    assert len(plog.segment_base_offsets) > 3
    assert plog.offset_for_timestamp(0) == (0, NOW)
    assert plog.offset_for_timestamp(NOW + 500) == (150, NOW + 500)
    assert plog.offset_for_timestamp(NOW + 501) == (151, NOW + 503)
    assert plog.offset_for_timestamp(NOW + 507) == (153, NOW + 510)
    assert plog.offset_for_timestamp(NOW + 996) == (299, NOW + 996)
    assert plog.offset_for_timestamp(NOW + 997) is None
    for target in range(NOW, NOW + 997, 37):
        offset, ts = plog.offset_for_timestamp(target)
        i, j = divmod(offset, 3)
        assert ts == NOW + 10 * i + 3 * j >= target
        assert offset == 0 or ts - (3 if j else 4) < target  # the previous record is earlier


def test_offset_for_timestamp_with_out_of_order_timestamps(open_log):
    plog = open_log()
    plog.append(make_batch([b"a"], timestamps=[NOW + 100]), now_ms=NOW)
    plog.append(make_batch([b"b"], timestamps=[NOW + 50]), now_ms=NOW)
    plog.append(make_batch([b"c"], timestamps=[NOW + 200]), now_ms=NOW)
    assert plog.offset_for_timestamp(NOW + 60) == (0, NOW + 100)
    assert plog.offset_for_timestamp(NOW + 150) == (2, NOW + 200)


def test_offset_for_timestamp_survives_reopen(open_log):
    plog = open_log({"segment.bytes": "1000", "index.interval.bytes": "100"})
    for i in range(40):
        plog.append(make_batch([b"v" * 40], timestamps=[NOW + i]), now_ms=NOW)
    answers = [plog.offset_for_timestamp(NOW + i) for i in range(41)]
    plog.close()
    again = open_log({"segment.bytes": "1000", "index.interval.bytes": "100"}, clean_shutdown=True)
    assert [again.offset_for_timestamp(NOW + i) for i in range(41)] == answers
    assert answers[17] == (17, NOW + 17)


def test_max_timestamp_is_the_first_record_with_the_largest_timestamp(open_log):
    plog = open_log({"segment.bytes": "1000"})
    assert plog.max_timestamp() is None
    plog.append(make_batch([b"a", b"b"], timestamps=[NOW + 1, NOW + 9]), now_ms=NOW)
    plog.append(make_batch([b"c", b"d", b"e"], timestamps=[NOW + 2, NOW + 30, NOW + 30]), now_ms=NOW)
    plog.append(make_batch([b"f"], timestamps=[NOW + 5]), now_ms=NOW)
    assert plog.max_timestamp() == (3, NOW + 30)


def test_segment_rolls_when_segment_ms_has_elapsed_by_record_time(open_log):
    plog = open_log({"segment.ms": "1000"})
    plog.append(make_batch([b"a"], timestamps=[NOW]), now_ms=NOW)
    plog.append(make_batch([b"b"], timestamps=[NOW + 1000]), now_ms=NOW + 1000)
    assert plog.segment_base_offsets == (0,)
    plog.append(make_batch([b"c"], timestamps=[NOW + 1001]), now_ms=NOW + 1001)
    assert plog.segment_base_offsets == (0, 2)


def test_time_index_full_rolls_the_segment(open_log):
    # segment.index.bytes=24: two time-index entries (12 bytes each), three offset-index entries
    plog = open_log({"segment.index.bytes": "24", "index.interval.bytes": "0"})
    for i in range(8):
        plog.append(make_batch([b"x"], timestamps=[NOW + i]), now_ms=NOW)
    assert len(plog.segment_base_offsets) > 1
    assert [plog.offset_for_timestamp(NOW + i)[0] for i in range(8)] == list(range(8))
