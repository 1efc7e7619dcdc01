"""Recovery never drops data silently: a WARN names the partition, offsets and bytes, and the manager counts it."""

from __future__ import annotations

import logging
import os

from storage_helpers import NOW, make_batch

from logway.storage.config import LogConfig
from logway.storage.log_manager import LogManager
from logway.wire.batch import iter_headers

CONFIG = LogConfig.from_properties({"segment.bytes": "1000", "index.interval.bytes": "150"})


def crashed_log_dir(tmp_path, batches: int = 40):
    """A log dir whose broker died without a clean shutdown or a checkpoint after its writes."""
    manager = LogManager([tmp_path], CONFIG)
    manager.open()
    plog = manager.create_topic("lost", 1).partitions[0]
    for i in range(batches):
        plog.append(make_batch([bytes([65 + i % 26]) * 60]), now_ms=NOW)
    plog._close_files()  # the process is gone: nothing flushed, no snapshot, no clean-shutdown marker
    return plog.dir, plog.segment_base_offsets


def reopen(tmp_path) -> LogManager:
    manager = LogManager([tmp_path], CONFIG)
    manager.open()
    return manager


def test_a_truncated_garbage_tail_is_logged_and_counted(tmp_path, caplog):
    part, bases = crashed_log_dir(tmp_path)
    last = part / f"{bases[-1]:020d}.log"
    with open(last, "ab") as f:
        f.write(os.urandom(333))
    with caplog.at_level(logging.WARNING, logger="logway.storage"):
        manager = reopen(tmp_path)
    try:
        plog = manager.get_partition("lost", 0)
        assert plog.log_end_offset == 40
        [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "lost-0" in r.getMessage()]
        assert f"{bases[-1]:020d}.log" in warning and "truncating to offset 40" in warning and "333 bytes" in warning
        loss = manager.recovery_loss
        assert (loss.truncations, loss.bytes_dropped, loss.segments_deleted) == (1, 333, 0)
    finally:
        manager.close()


def test_later_segments_deleted_after_a_bad_batch_are_logged_and_counted(tmp_path, caplog):
    part, bases = crashed_log_dir(tmp_path)
    assert len(bases) >= 4
    victim = part / f"{bases[1]:020d}.log"
    positions = [pos for pos, _ in iter_headers(victim.read_bytes())]
    with open(victim, "r+b") as f:
        f.seek(positions[2] + 40)
        f.write(b"\xff\xff")  # a bit flip inside the third batch: its CRC no longer matches
    later = {b: (part / f"{b:020d}.log").stat().st_size for b in bases[2:]}
    cut = victim.stat().st_size - positions[2]
    with caplog.at_level(logging.WARNING, logger="logway.storage"):
        manager = reopen(tmp_path)
    try:
        plog = manager.get_partition("lost", 0)
        assert plog.log_end_offset == bases[1] + 2
        messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "lost-0" in r.getMessage()]
        assert any(f"truncating to offset {bases[1] + 2}: {cut} bytes dropped" in m for m in messages), messages
        deleted = [m for m in messages if "deleted" in m]
        assert deleted and f"{len(later)} later segments" in deleted[0] and f"{sum(later.values())} bytes" in deleted[0]
        assert all(str(b) in deleted[0] for b in later)
        loss = manager.recovery_loss
        assert (loss.truncations, loss.bytes_dropped, loss.segments_deleted) == (1, cut + sum(later.values()), len(later))
    finally:
        manager.close()


def test_a_clean_restart_reports_no_loss(tmp_path, caplog):
    manager = LogManager([tmp_path], CONFIG)
    manager.open()
    plog = manager.create_topic("kept", 1).partitions[0]
    for _ in range(20):
        plog.append(make_batch([b"x" * 60]), now_ms=NOW)
    manager.close()
    with caplog.at_level(logging.WARNING, logger="logway.storage"):
        manager = reopen(tmp_path)
    manager.close()
    assert manager.recovery_loss.bytes_dropped == 0
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
