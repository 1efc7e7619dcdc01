"""The log lines an operator reads: topics created and deleted, recovery per log dir (with progress), retention
and compaction runs with what they removed. Progress lines come at most every PROGRESS_INTERVAL_S (10 s);
the tests set it to 0 so each step logs."""

from __future__ import annotations

import logging
import os
import re

import pytest
from storage_helpers import NOW, keyed_batch, make_batch

from logway.storage import progress
from logway.storage.config import LogConfig
from logway.storage.log_manager import LogManager


@pytest.fixture
def info_lines(caplog):
    caplog.set_level(logging.INFO, logger="logway.storage")

    def lines(pattern: str) -> list[re.Match]:
        return [m for r in caplog.records if (m := re.search(pattern, r.getMessage()))]

    return lines


def open_manager(tmp_path, clock) -> LogManager:
    manager = LogManager([tmp_path / "d0"], LogConfig(), clock_ms=clock)
    manager.open()
    return manager


def test_topics_and_partitions_created_and_deleted_are_logged(tmp_path, clock, info_lines):
    manager = open_manager(tmp_path, clock)
    manager.create_topic("orders", 3, {"retention.ms": "1000"})
    manager.create_partitions("orders", 5)
    for plog in manager.topics["orders"].partitions:
        plog.append(make_batch([b"z" * 10]), now_ms=NOW)
        plog.counters.bytes_in += 7  # as the server counts its appends
    manager.delete_topic("orders")
    # A deleted topic's counters stay in the broker's totals (Prometheus counters do not go down).
    assert manager.deleted_counters.bytes_in == 5 * 7
    manager.close()
    assert info_lines(r"created topic orders \(id \S+\) with 3 partitions and configs retention.ms=1000")
    assert info_lines(r"created partitions 3-4 of topic orders \(now 5 partitions\)")
    assert info_lines(r"deleted topic orders and its 5 partitions")


def test_recovery_logs_start_progress_and_end_per_log_dir(tmp_path, clock, info_lines, monkeypatch):
    manager = open_manager(tmp_path, clock)
    logs = manager.create_topic("crash", 3).partitions
    for plog in logs:
        for _ in range(4):
            plog.append(make_batch([b"x" * 100]), now_ms=NOW)
    size = sum(plog.size_bytes for plog in logs)
    for plog in logs:
        plog._close_files()  # killed: no flush, no clean-shutdown marker
    os.unlink(tmp_path / "d0" / "recovery-point-offset-checkpoint")  # nothing is known to be flushed
    monkeypatch.setattr(progress, "PROGRESS_INTERVAL_S", 0.0)

    again = open_manager(tmp_path, clock)
    d0 = str(tmp_path / "d0")
    assert info_lines(r"loading (\d+) partition directories from (\S+) \(no clean shutdown file")[-1].groups() == ("3", d0)
    steps = [m.groups() for m in info_lines(r"loading (\S+): (\d+) of (\d+) partition directories, (\d+) bytes")]
    # One line before each partition and one after each segment recovery scanned (one segment per partition).
    assert [(loaded, total) for _, loaded, total, _ in steps] == [(str(i // 2), "3") for i in range(6)]
    scanned = [int(b) for *_, b in steps]
    assert scanned == sorted(scanned) and scanned[-1] == size
    done = info_lines(r"loaded (\d+) partitions from (\S+) in [\d.]+ s: recovery scanned (\d+) bytes")
    assert done[-1].groups() == ("3", d0, str(size))
    assert again.recovered_bytes == size
    again.close()

    monkeypatch.setattr(progress, "PROGRESS_INTERVAL_S", 10.0)
    open_manager(tmp_path, clock).close()  # after a clean shutdown: nothing scanned, no progress lines
    assert info_lines(r"\(clean shutdown: recovery skipped\)")
    assert info_lines(r"recovery scanned (\d+) bytes")[-1].group(1) == "0"
    assert len(info_lines(r"partition directories, \d+ bytes")) == len(steps)


def test_retention_logs_segments_and_bytes_removed(open_log, info_lines):
    plog = open_log({"segment.bytes": "200", "retention.bytes": "300"})
    for _ in range(10):
        plog.append(make_batch([b"y" * 100]), now_ms=NOW)
    before = plog.size_bytes
    deleted = plog.delete_old_segments(NOW)
    assert deleted > 0
    (match,) = info_lines(r"t-0: deleted (\d+) segments \((\d+) bytes\) past retention.bytes=300; log start offset (\d+)")
    assert int(match.group(1)) == deleted
    assert int(match.group(2)) == before - plog.size_bytes
    assert int(match.group(3)) == plog.log_start_offset
    assert (plog.counters.segments_deleted, plog.counters.bytes_deleted) == (deleted, before - plog.size_bytes)


def test_a_long_compaction_logs_progress(open_log, info_lines, monkeypatch):
    plog = open_log({"cleanup.policy": "compact", "segment.bytes": "1024", "file.delete.delay.ms": "0"})
    for r in range(20):
        plog.append(keyed_batch([(b"k%d" % k, b"v%d" % r) for k in range(5)]), now_ms=NOW)
    monkeypatch.setattr(progress, "PROGRESS_INTERVAL_S", 0.0)
    plog.compact(NOW)
    plog.finish_compaction()
    assert info_lines(r"compacting t-0: building the offset map, \d+ records read so far")
    assert info_lines(r"compacting t-0: writing cleaned segments, \d+ records read so far")
