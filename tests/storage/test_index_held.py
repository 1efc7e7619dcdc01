"""Index entries held in memory (storage.index_file: written in runs of WRITE_EVERY, on roll and at a clean shutdown):
lookups see them at once, a roll or a full flush puts them in the files, and after a crash (SIGKILL) recovery rebuilds
them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from storage_helpers import NOW, make_batch

from logway.storage.config import LogConfig
from logway.storage.index_file import WRITE_EVERY
from logway.storage.log_manager import LogManager
from logway.storage.partition_log import PartitionLog
from logway.wire.batch import iter_headers

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
# An index entry for every batch but a segment's first; segments large enough for several runs of entries.
PROPS = {"index.interval.bytes": "1", "segment.bytes": "1000000"}


def batch(i: int) -> bytearray:
    return make_batch([b"record %05d " % i + b"x" * (i % 50)], timestamps=[NOW + i])


def index_files(plog: PartitionLog, base: int = 0) -> tuple[int, int]:
    """Entries in the .index and .timeindex files of the segment at ``base``."""
    stem = plog.dir / f"{base:020d}"
    return os.path.getsize(stem.with_suffix(".index")) // 8, os.path.getsize(stem.with_suffix(".timeindex")) // 12


def batch_starts(plog: PartitionLog) -> dict[int, int]:
    """Last offset -> position of every batch of the first segment, read from the log file itself."""
    data = (plog.dir / f"{0:020d}.log").read_bytes()
    return {header.last_offset: pos for pos, header in iter_headers(data)}


def lookups(plog: PartitionLog) -> list[int]:
    index = plog._segments[0].offset_index
    return [index.lookup(offset) for offset in range(plog._segments[0].end_offset)]


def test_a_lookup_right_after_an_append_finds_its_entry(open_log):
    plog = open_log(PROPS)
    for i in range(20):
        plog.append(batch(i), now_ms=NOW)
        index = plog._segments[0].offset_index
        if i:  # the first batch of a segment gets no entry (Kafka's index.interval.bytes accounting)
            assert index.lookup(i) == batch_starts(plog)[i]
    assert index_files(plog) == (0, 0)  # all 19 entries are held, none written yet
    assert plog.offset_for_timestamp(NOW + 13)[0] == 13


def test_entries_are_written_in_runs_and_by_a_full_flush(open_log):
    plog = open_log(PROPS)
    for i in range(WRITE_EVERY + 11):
        plog.append(batch(i), now_ms=NOW)
    assert index_files(plog) == (WRITE_EVERY, WRITE_EVERY)
    plog.flush()  # the flush a durable append waits for syncs the log alone: recovery rebuilds the active indexes
    assert index_files(plog) == (WRITE_EVERY, WRITE_EVERY)
    plog.flush(full=True)
    entries = len(plog._segments[0].offset_index)
    assert entries == WRITE_EVERY + 10
    assert index_files(plog) == (entries, entries)


def test_a_roll_and_a_clean_shutdown_write_every_entry(open_log):
    plog = open_log({**PROPS, "segment.bytes": "4000"})
    for i in range(150):
        plog.append(batch(i), now_ms=NOW)
    expected = {base: len(seg.offset_index)
                for base, seg in zip(plog.segment_base_offsets, plog._segments, strict=True)}
    assert len(expected) > 2
    rolled = dict(list(expected.items())[:-1])
    assert {base: index_files(plog, base)[0] for base in rolled} == rolled  # written when the segment rolled
    plog.close()
    assert {base: index_files(plog, base)[0] for base in expected} == expected  # the active one at close
    again = open_log({**PROPS, "segment.bytes": "4000"}, clean_shutdown=True)
    assert [len(s.offset_index) for s in again._segments] == list(expected.values())


def test_held_entries_lost_in_a_crash_are_rebuilt(open_log):
    plog = open_log(PROPS)
    for i in range(WRITE_EVERY + 40):
        plog.append(batch(i), now_ms=NOW)
    before = lookups(plog), plog._segments[0].time_index.last_entry()
    plog._close_files()  # crash: the 39 held entries never reach the files
    assert index_files(plog) == (WRITE_EVERY, WRITE_EVERY)
    again = open_log(PROPS, recovery_point=0)
    assert (lookups(again), again._segments[0].time_index.last_entry()) == before
    assert index_files(again) == (WRITE_EVERY + 39, WRITE_EVERY + 39)  # recovery writes what it rebuilt


CHILD = """
import sys, time
sys.path[:0] = [{root!r}, {here!r}]
from test_index_held import PROPS, batch
from storage_helpers import NOW
from logway.storage.config import LogConfig
from logway.storage.log_manager import LogManager

manager = LogManager([{data!r}], LogConfig.from_properties(PROPS))
manager.open()
plog = manager.create_topic("k", 1).partitions[0]
for i in range({count}):
    plog.append(batch(i), now_ms=NOW)
print(plog.log_end_offset, flush=True)
time.sleep(60)
"""


def test_sigkill_with_held_entries_recovers_the_same_indexes(tmp_path, open_log):
    count = 2 * WRITE_EVERY + 77
    reference = open_log(PROPS)  # the same appends, never crashed
    for i in range(count):
        reference.append(batch(i), now_ms=NOW)
    data = tmp_path / "data"
    script = CHILD.format(root=str(ROOT), here=str(HERE), data=str(data), count=count)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline()
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
        child.stdout.close()
    assert line.strip() == str(count)
    manager = LogManager([data], LogConfig.from_properties(PROPS))
    manager.open()
    try:
        plog = manager.get_partition("k", 0)
        assert plog.log_end_offset == count
        assert lookups(plog) == lookups(reference)
        assert [plog.offset_for_timestamp(NOW + t) for t in range(0, count, 7)] == \
            [reference.offset_for_timestamp(NOW + t) for t in range(0, count, 7)]
        assert plog.append(batch(count), now_ms=NOW).base_offset == count
    finally:
        manager.close()


def test_log_maintenance_writes_the_held_entries_of_live_logs(tmp_path):
    manager = LogManager([tmp_path / "data"], LogConfig.from_properties(PROPS))
    manager.open()
    try:
        plog = manager.create_topic("live", 1).partitions[0]
        for i in range(20):
            plog.append(batch(i), now_ms=NOW)
        assert index_files(plog) == (0, 0)
        manager.maintenance(NOW)  # every few seconds in the broker: files of a live log stay close behind
        assert index_files(plog) == (19, 19)
    finally:
        manager.close()
