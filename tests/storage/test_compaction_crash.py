"""Crash safety of the compaction swap: a kill at any point recovers the old or the new segments, never loses data."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from storage_helpers import NOW, keyed_batch, log_records

from logway.storage import fs
from logway.storage.config import LogConfig
from logway.storage.partition_log import PartitionLog

PROPS = {"cleanup.policy": "compact", "segment.bytes": "1024", "file.delete.delay.ms": "0"}
HERE = Path(__file__).parent
ROOT = HERE.parent.parent


class Killed(Exception):
    """Stands for the process dying between two file operations."""


def fill(plog, rounds: int) -> None:
    """Overwrite keys k0..k9 in batches of five: the record at offset o is key o % 10, value v<o>."""
    for _ in range(2 * rounds):
        base = plog.log_end_offset
        plog.append(keyed_batch([(b"k%d" % ((base + i) % 10), b"v%d" % (base + i)) for i in range(5)]), now_ms=NOW)


def assert_consistent(records, log_end: int, must_contain) -> None:
    """No record differs from what was written at its offset, and nothing ``must_contain`` holds is missing."""
    for offset, key, value in records:
        assert (key, value) == (b"k%d" % (offset % 10), b"v%d" % offset)
    present = set(records)
    assert all(r in present for r in must_contain)
    latest = {}
    for offset in range(log_end):
        latest[offset % 10] = offset
    for key, offset in latest.items():  # the newest value of every key always survives
        assert (offset, b"k%d" % key, b"v%d" % offset) in present


def reopen(directory: Path) -> PartitionLog:
    return PartitionLog(directory, "t", 0, LogConfig.from_properties(PROPS))


def test_leftover_cleaned_files_are_removed_and_the_old_log_kept(open_log, tmp_path):
    plog = open_log(PROPS)
    fill(plog, rounds=12)
    old = log_records(plog)
    plog.compact(NOW)  # .cleaned files written; killed before finish_compaction
    assert any(n.endswith(".log.cleaned") for n in os.listdir(plog.dir))
    crashed = tmp_path / "crashed" / "t-0"
    shutil.copytree(plog.dir, crashed)
    again = reopen(crashed)
    try:
        assert log_records(again) == old
        assert not any(n.endswith((".cleaned", ".swap")) for n in os.listdir(crashed))
    finally:
        again.close()


def build(directory: Path, one_group: bool) -> PartitionLog:
    """A log of 1 KiB segments; with ``one_group`` the compaction merges all of them into one segment."""
    plog = PartitionLog(directory, "t", 0, LogConfig.from_properties(PROPS))
    fill(plog, rounds=12)
    if one_group:
        plog.config = LogConfig.from_properties({**PROPS, "segment.bytes": "100000"})
    return plog


@pytest.mark.parametrize("one_group", [True, False], ids=["one-group", "many-groups"])
def test_a_kill_at_every_rename_of_the_swap_recovers_old_or_new(tmp_path, monkeypatch, one_group):
    probe = build(tmp_path / "probe" / "t-0", one_group)
    old, old_bases = log_records(probe), probe.segment_base_offsets
    log_end = probe.log_end_offset
    stats = probe.compact(NOW)
    renames = []
    real_replace = fs.replace
    monkeypatch.setattr(fs, "replace", lambda a, b: (renames.append(str(b)), real_replace(a, b))[1])
    probe.finish_compaction()
    monkeypatch.setattr(fs, "replace", real_replace)
    new, new_bases = log_records(probe), probe.segment_base_offsets
    probe._close_files()
    assert len(new) < len(old)
    commit = next(i for i, target in enumerate(renames) if target.endswith(".log.swap"))
    if one_group:
        assert stats.segments_written == 1 and stats.segments_cleaned >= 2
        assert len(renames) == 3 + 3 * stats.segments_cleaned + 3  # to .swap, sources to .deleted, to final names

    for kill_at in range(len(renames) + 1):
        source = tmp_path / f"run{kill_at}" / "t-0"
        plog = build(source, one_group)
        plog.compact(NOW)
        calls = 0

        def dying_replace(a, b, kill_at=kill_at):
            nonlocal calls
            if calls == kill_at:
                raise Killed
            calls += 1
            real_replace(a, b)

        monkeypatch.setattr(fs, "replace", dying_replace)
        with pytest.raises(Killed) if kill_at < len(renames) else _no_error():
            plog.finish_compaction()
        monkeypatch.setattr(fs, "replace", real_replace)
        crashed = tmp_path / f"crashed{kill_at}" / "t-0"
        shutil.copytree(source, crashed)  # the disk as the killed process left it
        plog._close_files()

        again = reopen(crashed)
        try:
            records = log_records(again)
            assert again.log_end_offset == log_end
            assert_consistent(records, log_end, must_contain=new)
            if kill_at <= commit:
                assert (records, again.segment_base_offsets) == (old, old_bases)  # no group committed yet
            if kill_at == len(renames) or (one_group and kill_at > commit):
                assert (records, again.segment_base_offsets) == (new, new_bases)
            assert not any(n.endswith((".cleaned", ".swap", ".deleted")) for n in os.listdir(crashed))
        finally:
            again.close()


class _no_error:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


CHILD = """
import sys
sys.path[:0] = [{root!r}, {here!r}]
from storage_helpers import NOW, keyed_batch
from logway.storage import fs
from logway.storage.config import LogConfig
from logway.storage.partition_log import PartitionLog

plog = PartitionLog({data!r}, "t", 0, LogConfig.from_properties({props!r}))
for round_ in range(10_000):
    for _ in range(4):
        base = plog.log_end_offset
        plog.append(keyed_batch([(b"k%d" % ((base + i) % 10), b"v%d" % (base + i)) for i in range(5)]), now_ms=NOW)
    plog.compact(NOW)
    plog.finish_compaction()
    plog.delete_pending_segments(NOW)
    print(plog.log_end_offset, flush=True)
"""


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sigkill_during_compaction_loses_nothing(tmp_path, seed):
    data = tmp_path / "t-0"
    script = CHILD.format(root=str(ROOT), here=str(HERE), data=str(data), props=PROPS)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        lines = [child.stdout.readline() for _ in range(20)]
        time.sleep(random.Random(seed).uniform(0.0, 0.3))
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
        child.stdout.close()
    assert all(line.strip().isdigit() for line in lines)
    again = reopen(data)
    try:
        assert again.log_end_offset >= int(lines[-1])
        assert_consistent(log_records(again), again.log_end_offset, must_contain=())
    finally:
        again.close()
