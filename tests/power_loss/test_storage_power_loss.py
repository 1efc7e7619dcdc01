"""A power loss at every kind of moment of the storage layer loses no flushed record (tests/power_loss/crash_fs.py).

One scripted workload on a LogManager: appends to a topic whose segments roll and whose old segments go by
retention, keyed appends to a compacted topic that the cleaner compacts, transactions that commit and abort,
checkpoints, and a clean shutdown and restart in the middle. Each append is acknowledged (counted) once its
flush returned, as a producer waiting for the group commit is. The power goes out before the n-th file
operation under the log dir (the crash points are drawn from a seeded random source, LOGWAY_POWER_LOSS_SEED
replays a run); the log dir is rebuilt from what was fsynced and opened again, and then:

- every acknowledged record of the plain topic is there once, in order, at contiguous offsets (retention may
  have removed the oldest: what is there is a run of what was produced, reaching past the last acknowledged);
- every key of the compacted topic has its last acknowledged value, or a later one;
- every acknowledged transaction reads as committed or aborted, as its acknowledged marker said;
- every topic created is there with the same topic id and configs;
- the log takes appends again after it.

`make test` draws 16 points; `make soak` (LOGWAY_POWER_LOSSES=all) tries every operation.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from crash_fs import PowerLost, Recorder, power_loss
from storage_helpers import FakeClock, keyed_batch, log_records

from logway.storage.config import LogConfig
from logway.storage.log_manager import LogManager

SEED = int(os.environ.get("LOGWAY_POWER_LOSS_SEED", random.randrange(2**32)))
LOSSES = os.environ.get("LOGWAY_POWER_LOSSES", "16")
STEPS = 60
PLAIN = {"segment.bytes": "2500", "index.interval.bytes": "1", "retention.bytes": "10000",
         "file.delete.delay.ms": "0"}
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "1200", "min.cleanable.dirty.ratio": "0.01",
           "file.delete.delay.ms": "0"}
TXN = {"segment.bytes": "1500", "file.delete.delay.ms": "0"}


class Workload:
    """The scripted appends, and what was acknowledged (flushed) of them."""

    def __init__(self, data: Path) -> None:
        self.data = data
        self.clock = FakeClock()
        self.manager: LogManager | None = None
        self.plain: dict[int, int] = {0: 0, 1: 0}  # partition -> records acknowledged (values p-0, p-1, ...)
        self.produced: dict[int, int] = {0: 0, 1: 0}
        self.keys: dict[bytes, int] = {}  # key -> sequence of its last acknowledged value
        self.txns: dict[int, tuple[int, bool]] = {}  # producer id -> (first offset, committed), once acknowledged
        self.topics: dict[str, tuple[object, dict[str, str]]] = {}  # name -> (topic id, configs), once created

    def open(self) -> LogManager:
        self.manager = LogManager([self.data], LogConfig(), clock_ms=self.clock)
        self.manager.open()
        return self.manager

    def abandon(self) -> None:
        """Close the files of a log manager whose power went out (nothing written)."""
        if self.manager is not None:
            for topic in self.manager.topics.values():
                for plog in topic.partitions:
                    plog._close_files()
            self.manager._unlock_log_dirs()

    def run(self) -> None:
        manager = self.open()
        for name, partitions, props in (("plain", 2, PLAIN), ("compacted", 1, COMPACT), ("txn", 1, TXN)):
            topic = manager.create_topic(name, partitions, props)
            self.topics[name] = (topic.topic_id, props)
        for step in range(STEPS):
            self.step(step)
            if step == STEPS // 2:  # a clean shutdown and start in the middle
                manager.close()
                manager = self.open()
        manager.close()

    def step(self, step: int) -> None:
        manager = self.manager
        self.clock.now += 1000
        p = step % 2
        plog = manager.get_partition("plain", p)
        first = self.produced[p]
        self.produced[p] += 3
        plog.append(keyed_batch([(None, b"%d-%d" % (p, first + i)) for i in range(3)], timestamp=self.clock.now),
                    now_ms=self.clock.now)
        plog.flush()
        self.plain[p] = self.produced[p]
        if step % 3 == 0:
            self.compacted(step)
        if step % 5 == 1:
            self.transaction(step)
        if step % 4 == 3:
            manager.maintenance(self.clock.now)  # retention of the plain topic, deletion of old files
        if step % 6 == 5:
            manager.checkpoint()

    def compacted(self, step: int) -> None:
        plog = self.manager.get_partition("compacted", 0)
        pairs = [(b"k%d" % ((step + i) % 4), b"%d" % step) for i in range(3)]
        plog.append(keyed_batch(pairs, timestamp=self.clock.now), now_ms=self.clock.now)
        plog.flush()
        for key, _ in pairs:
            self.keys[key] = step
        if step % 9 == 0:
            plog.compact(self.clock.now)
            plog.finish_compaction()

    def transaction(self, step: int) -> None:
        plog = self.manager.get_partition("txn", 0)
        pid, commit = 1000 + step, step % 10 == 1
        result = plog.append(keyed_batch([(None, b"txn-%d" % pid)], producer_id=pid, producer_epoch=0,
                                         base_sequence=0, transactional=True), now_ms=self.clock.now)
        plog.append_marker(pid, 0, commit, now_ms=self.clock.now)
        plog.flush()
        self.txns[pid] = (result.base_offset, commit)


def check(workload: Workload, data: Path) -> None:
    """Open the rebuilt log dir and check what a consumer would read against what was acknowledged."""
    again = Workload(data)
    manager = again.open()
    try:
        topics = manager.topics
        for name, (topic_id, props) in workload.topics.items():
            assert (topics[name].topic_id, topics[name].overrides) == (topic_id, props), f"topic {name} changed"
        for p, acked in workload.plain.items():
            if "plain" not in topics:
                assert acked == 0, "the topic of acknowledged records is gone"
                continue
            plog = manager.get_partition("plain", p)
            records = log_records(plog)
            assert [o for o, _, _ in records] == list(range(plog.log_start_offset, plog.log_end_offset))
            values = [int(v.split(b"-")[1]) for _, _, v in records]
            assert all(v.startswith(b"%d-" % p) for _, _, v in records)
            if values:
                assert values == list(range(values[0], values[0] + len(values))), "duplicates or a gap"
            assert (values[-1] + 1 if values else 0) >= acked, f"plain-{p}: acknowledged records lost"
        if workload.keys:
            latest = {k: int(v) for _, k, v in log_records(manager.get_partition("compacted", 0))}
            for key, step in workload.keys.items():
                assert latest.get(key, -1) >= step, f"compacted: key {key!r} lost its acknowledged value"
        if workload.txns:
            plog = manager.get_partition("txn", 0)
            aborted = set(plog.aborted_transactions(0, plog.log_end_offset))
            for pid, (first, committed) in workload.txns.items():
                assert ((pid, first) in aborted) != committed, f"transaction {pid} reads wrongly"
        for name in topics:  # and the logs go on
            for plog in topics[name].partitions:
                end = plog.log_end_offset
                plog.append(keyed_batch([(b"k", b"after")]), now_ms=again.clock.now)
                assert log_records(plog)[-1][0] == end
    finally:
        manager.close()


def crash_points(total: int) -> list[int]:
    if LOSSES == "all":
        return list(range(1, total + 1))
    return sorted(random.Random(SEED).sample(range(1, total + 1), min(int(LOSSES), total)))


def count_operations(tmp_path: Path) -> int:
    data = tmp_path / "count"
    data.mkdir()
    recorder = Recorder(data, tmp_path / "count-work").install()
    try:
        Workload(data).run()
    finally:
        recorder.uninstall()
    return recorder.operations


def test_a_power_loss_at_any_file_operation_loses_no_flushed_record(tmp_path):
    total = count_operations(tmp_path)
    points = crash_points(total)
    print(f"power loss test: {len(points)} of {total} operations, LOGWAY_POWER_LOSS_SEED={SEED}")
    for n in points:
        data, work = tmp_path / f"data{n}", tmp_path / f"work{n}"
        data.mkdir()
        workload = Workload(data)
        recorder = Recorder(data, work, crash_at=n, crash=lambda: None).install()
        try:
            with pytest.raises(PowerLost):
                workload.run()
        finally:
            recorder.uninstall()
        rebuilt = tmp_path / f"rebuilt{n}"
        power_loss(data, work, rebuilt, random.Random(SEED + n))
        workload.abandon()
        try:
            check(workload, rebuilt)
        except AssertionError as exc:
            raise AssertionError(f"after a power loss before operation {n} (LOGWAY_POWER_LOSS_SEED={SEED}): "
                                 f"{exc}") from exc
