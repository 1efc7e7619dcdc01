"""Append and read: offsets, segment rolls, containing-batch reads, max_bytes/min_one, out-of-range."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_helpers import NOW, make_batch

from logway.storage.errors import (
    CorruptRecord,
    InvalidRecord,
    InvalidTimestamp,
    OffsetOutOfRange,
    RecordBatchTooLarge,
    RecordTooLarge,
)
from logway.storage.partition_log import PartitionLog
from logway.wire.batch import iter_headers, parse_header
from logway.wire.records import decode_batches

SMALL = {"segment.bytes": "2000", "index.interval.bytes": "200"}


def fill(plog: PartitionLog, batches: int, records: int = 3, size: int = 20) -> list[tuple[int, int]]:
    """Append ``batches`` batches of ``records`` records; return their (base, last) offsets."""
    spans = []
    for i in range(batches):
        result = plog.append(make_batch([bytes([i % 256]) * size] * records), now_ms=NOW)
        spans.append((result.base_offset, result.last_offset))
    return spans


def test_offsets_are_assigned_consecutively_and_written_into_the_batch(open_log):
    plog = open_log()
    buf = make_batch([b"a", b"b", b"c"])
    first = plog.append(buf, now_ms=NOW, leader_epoch=7)
    second = plog.append(make_batch([b"d"]), now_ms=NOW)
    assert (first.base_offset, first.last_offset, first.duplicate) == (0, 2, False)
    assert (second.base_offset, second.last_offset) == (3, 3)
    assert first.log_append_time_ms == -1 and first.log_start_offset == 0
    assert plog.log_end_offset == plog.high_watermark == 4
    # patched in place: the caller's buffer now holds the stored bytes
    assert parse_header(buf).partition_leader_epoch == 7
    assert plog.read_bytes(0, 10_000)[: len(buf)] == bytes(buf)


def test_round_trip_across_many_segment_rolls(open_log):
    plog = open_log(SMALL)
    spans = fill(plog, 200)
    assert len(plog.segment_base_offsets) > 10
    values, offset = [], 0
    while offset < plog.log_end_offset:
        data = plog.read_bytes(offset, 700)
        assert data, offset
        for batch in decode_batches(data):
            for record in batch.records:
                if record.offset >= offset:
                    values.append((record.offset, record.value))
        offset = values[-1][0] + 1
    assert [o for o, _ in values] == list(range(600))
    assert [v for _, v in values] == [bytes([o // 3 % 256]) * 20 for o in range(600)]
    assert spans[-1] == (597, 599)


def test_reopened_log_reads_the_same(open_log):
    plog = open_log(SMALL)
    fill(plog, 60)
    before = [plog.read_bytes(o, 1000) for o in range(0, 180, 7)]
    plog.close()
    again = open_log(SMALL, clean_shutdown=True)
    assert again.log_end_offset == 180
    assert [again.read_bytes(o, 1000) for o in range(0, 180, 7)] == before


def test_every_offset_inside_a_batch_returns_the_containing_batch(open_log):
    plog = open_log(SMALL)
    spans = fill(plog, 50, records=5)
    for base, last in spans:
        for offset in range(base, last + 1):
            data = plog.read_bytes(offset, 1)  # min_one: exactly the containing batch
            header = parse_header(data)
            assert (header.base_offset, header.last_offset) == (base, last)
            assert len(data) == header.size


def test_max_bytes_keeps_whole_batches_only(open_log):
    plog = open_log()
    fill(plog, 20)
    size = len(plog.read_bytes(0, 1))
    for max_bytes in (size, size + 1, 3 * size - 1, 3 * size, 10 * size):
        data = plog.read_bytes(0, max_bytes)
        assert len(data) == (max_bytes // size) * size
        assert len(list(iter_headers(data))) == max_bytes // size


def test_min_one_returns_an_oversized_first_batch_and_without_it_nothing(open_log):
    plog = open_log()
    plog.append(make_batch([b"x" * 500]), now_ms=NOW)
    assert len(plog.read_bytes(0, 100)) > 500
    result = plog.read(0, 100, min_one=False)
    assert result.size == 0


def test_read_stops_at_segment_end(open_log):
    plog = open_log(SMALL)
    fill(plog, 30)
    second_segment = plog.segment_base_offsets[1]
    data = plog.read_bytes(0, 1_000_000)
    last = list(iter_headers(data))[-1][1]
    assert last.last_offset + 1 == second_segment


def test_out_of_range_on_both_sides_and_empty_at_the_end(open_log):
    plog = open_log()
    fill(plog, 3)
    with pytest.raises(OffsetOutOfRange):
        plog.read(-1, 100)
    with pytest.raises(OffsetOutOfRange):
        plog.read(10, 100)
    end = plog.read(9, 100)
    assert end.size == 0 and end.high_watermark == 9


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.tuples(st.integers(1, 6), st.integers(1, 300)), min_size=1, max_size=60),
    interval=st.sampled_from([0, 64, 300, 4096]),
    data=st.data(),
)
def test_index_lookup_agrees_with_a_linear_scan(tmp_path_factory, clock, sizes, interval, data):
    directory = tmp_path_factory.mktemp("idx") / "t-0"
    from logway.storage.config import LogConfig

    config = LogConfig.from_properties({"segment.bytes": "3000", "index.interval.bytes": str(interval)})
    plog = PartitionLog(directory, "t", 0, config, clock_ms=clock)
    try:
        spans = []
        for records, size in sizes:
            r = plog.append(make_batch([b"v" * size] * records), now_ms=NOW)
            spans.append((r.base_offset, r.last_offset))
        for offset in data.draw(st.lists(st.integers(0, plog.log_end_offset - 1), min_size=1, max_size=20)):
            expected = next(span for span in spans if span[1] >= offset)
            header = parse_header(plog.read_bytes(offset, 1))
            assert (header.base_offset, header.last_offset) == expected
    finally:
        plog._close_files()


def test_validation_errors(open_log):
    plog = open_log({"max.message.bytes": "300", "segment.bytes": "1000"})
    with pytest.raises(InvalidRecord):
        plog.append(bytearray(), now_ms=NOW)
    corrupt = make_batch([b"abc"])
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptRecord):
        plog.append(corrupt, now_ms=NOW)
    with pytest.raises(CorruptRecord):
        plog.append(make_batch([b"abc"])[:-3], now_ms=NOW)
    with pytest.raises(RecordTooLarge):
        plog.append(make_batch([b"x" * 400]), now_ms=NOW)
    with pytest.raises(RecordBatchTooLarge):
        plog.append(make_batch([b"x" * 200]) * 6, now_ms=NOW)
    with pytest.raises(InvalidTimestamp):
        plog.append(make_batch([b"late"], timestamps=[NOW + 3_600_001]), now_ms=NOW)
    assert plog.log_end_offset == 0 and plog.size_bytes == 0
    two = make_batch([b"a"]) + make_batch([b"b", b"c"])
    assert plog.append(two, now_ms=NOW).last_offset == 2


def test_log_append_time_stamps_batches(open_log):
    plog = open_log({"message.timestamp.type": "LogAppendTime"})
    result = plog.append(make_batch([b"a", b"b"], timestamps=[5, 6]), now_ms=NOW + 42)
    assert result.log_append_time_ms == NOW + 42
    header = parse_header(plog.read_bytes(0, 100))
    assert header.log_append_time and header.max_timestamp == NOW + 42
    assert plog.max_timestamp() == (0, NOW + 42)


def test_write_is_a_single_syscall_for_a_multi_batch_append(open_log, monkeypatch):
    plog = open_log()
    calls = []
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: calls.append(len(data)) or real_write(fd, data))
    buf = make_batch([b"a"]) + make_batch([b"b"]) + make_batch([b"c"])
    plog.append(buf, now_ms=NOW)
    assert calls == [len(buf)]
