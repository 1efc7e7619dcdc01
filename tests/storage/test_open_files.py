"""Open file descriptors stay bounded however many partitions exist and are used (DESIGN.md principle 4)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from storage_helpers import NOW, log_records, make_batch

from logway.storage.config import LogConfig
from logway.storage.log_manager import LogManager
from logway.storage.open_files import OPEN_SEGMENTS

PARTITIONS = 64
BOUND = 16


def fds_under(directory: Path) -> int:
    """Descriptors of this process open on segment files below ``directory`` (not the log dirs' held .lock)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith(str(directory)) and not target.endswith("/.lock"):
                count += 1
        except OSError:
            pass
    return count


@pytest.fixture
def manager(tmp_path, monkeypatch):
    monkeypatch.setattr(OPEN_SEGMENTS, "max_open", OPEN_SEGMENTS.max_open)  # restored after the test
    monkeypatch.setattr(OPEN_SEGMENTS, "grace_s", 0.0)
    m = LogManager([tmp_path / "d"], LogConfig(), clock_ms=lambda: NOW, max_open_segments=BOUND)
    m.open()
    yield m
    m.close()


def test_new_partitions_hold_no_descriptors(manager, tmp_path) -> None:
    manager.create_topic("wide", PARTITIONS)
    assert fds_under(tmp_path) == 0


def test_using_every_partition_keeps_descriptors_under_the_bound(manager, tmp_path) -> None:
    manager.create_topic("wide", PARTITIONS)
    for rounds in range(2):  # the second round reopens what the bound closed
        for p in range(PARTITIONS):
            plog = manager.get_partition("wide", p)
            plog.append(make_batch([f"r{rounds}-{p}".encode()]), now_ms=NOW)
            assert fds_under(tmp_path) <= 3 * BOUND
    for p in range(PARTITIONS):
        plog = manager.get_partition("wide", p)
        assert [v for _, _, v in log_records(plog)] == [f"r0-{p}".encode(), f"r1-{p}".encode()]
        plog.flush()
        assert plog.recovery_point == 2
    assert fds_under(tmp_path) <= 3 * BOUND


def test_a_descriptor_handed_to_sendfile_stays_valid_through_its_grace_period(manager, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(OPEN_SEGMENTS, "grace_s", 30.0)
    manager.create_topic("wide", 2 * BOUND)
    first = manager.get_partition("wide", 0)
    first.append(make_batch([b"first"]), now_ms=NOW)
    handed_out = first.read(0, 1 << 20)  # what Fetch gives the connection for os.sendfile
    for _ in range(2):  # enough use of other segments to evict the first one's (a second chance, then out)
        for p in range(1, 2 * BOUND):
            manager.get_partition("wide", p).append(make_batch([b"x"]), now_ms=NOW)
    assert first._segments[0]._fd == -1  # evicted ...
    data = os.pread(handed_out.fd, handed_out.size, handed_out.position)
    assert b"first" in data  # ... but the number handed out still reads the same file


def test_reopened_after_load(tmp_path, monkeypatch) -> None:
    """A restart loads every segment, then releases the descriptors: idle partitions hold none."""
    monkeypatch.setattr(OPEN_SEGMENTS, "max_open", OPEN_SEGMENTS.max_open)
    monkeypatch.setattr(OPEN_SEGMENTS, "grace_s", 0.0)
    m = LogManager([tmp_path / "d"], LogConfig(), clock_ms=lambda: NOW, max_open_segments=BOUND)
    m.open()
    m.create_topic("wide", 50)
    for p in range(50):
        m.get_partition("wide", p).append(make_batch([b"v"]), now_ms=NOW)
    m.close()
    again = LogManager([tmp_path / "d"], LogConfig(), clock_ms=lambda: NOW, max_open_segments=BOUND)
    again.open()
    try:
        assert fds_under(tmp_path) == 0
        assert all(again.get_partition("wide", p).log_end_offset == 1 for p in range(50))
    finally:
        again.close()
