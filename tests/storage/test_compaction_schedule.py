"""When a log is due for compaction: dirty ratio, compaction lags, the cleaner checkpoint and cleaner settings."""

from __future__ import annotations

import pytest
import trio
from storage_helpers import NOW, keyed_batch

from logway.storage.cleaner import CleanerConfig
from logway.storage.config import LogConfig
from logway.storage.errors import InvalidConfig
from logway.storage.log_manager import LogManager

COMPACT = {"cleanup.policy": "compact", "segment.bytes": "1024"}


def overwrite(plog, batches: int, timestamp: int = NOW) -> None:
    """Batches that rewrite the same five keys (mostly dirt once compacted)."""
    for i in range(batches):
        pairs = [(b"k%d" % k, b"value-%d" % i) for k in range(5)]
        plog.append(keyed_batch(pairs, timestamp=timestamp), now_ms=timestamp)


def unique(plog, batches: int) -> None:
    """Batches of keys written once (they all survive compaction: a large clean head)."""
    for i in range(batches):
        plog.append(keyed_batch([(b"u%d-%d" % (i, k), b"once") for k in range(5)]), now_ms=NOW)


@pytest.fixture
def make_manager(tmp_path, clock):
    managers = []

    def factory(cleaner: CleanerConfig | None = None) -> LogManager:
        manager = LogManager([tmp_path / "logs"], LogConfig(), clock_ms=clock, cleaner_config=cleaner)
        manager.open()
        managers.append(manager)
        return manager

    yield factory
    for manager in managers:
        manager.close()


async def run_due(manager: LogManager, now_ms: int) -> list:
    """What the gateway does: pick due logs on the loop, compact in a worker thread, swap back on the loop."""
    done = []
    for plog in manager.compaction_due(now_ms):
        stats = await trio.to_thread.run_sync(plog.compact, now_ms)
        assert plog.finish_compaction()
        done.append((plog, stats))
    return done


async def test_dirty_ratio_decides_and_the_checkpoint_moves_the_clean_point(make_manager, tmp_path):
    manager = make_manager()
    plog = manager.create_topic("c", 1, COMPACT).partitions[0]
    manager.create_topic("plain", 1, {"segment.bytes": "1024"})
    overwrite(plog, 40)
    overwrite(manager.get_partition("plain", 0), 40)
    first = plog.cleanable_range(NOW)
    assert first.clean_bytes == 0 and first.cleanable_ratio == 1.0
    assert first.cleanable_bytes == plog.size_bytes - plog._segments[-1].size
    assert manager.compaction_due(NOW) == [plog]  # the delete-policy topic is never picked

    unique(plog, 80)
    [(_, stats)] = await run_due(manager, NOW)
    active_base = plog.segment_base_offsets[-1]
    assert stats.end_offset == active_base == plog.cleaner_offset
    assert manager.compaction_due(NOW) == []  # nothing dirty outside the active segment

    overwrite(plog, 12)  # a little dirt after a large clean head
    again = plog.cleanable_range(NOW)
    assert again.first_dirty_offset == active_base
    assert again.cleanable_ratio == pytest.approx(again.cleanable_bytes / (again.clean_bytes + again.cleanable_bytes))
    assert 0 < again.cleanable_ratio <= 0.5 and manager.compaction_due(NOW) == []
    manager.alter_config("c", {**COMPACT, "min.cleanable.dirty.ratio": "0.01"})
    assert manager.compaction_due(NOW) == [plog]

    manager.close()
    lines = (tmp_path / "logs" / "cleaner-offset-checkpoint").read_text().splitlines()
    assert lines == ["0", "1", f"c 0 {active_base}"]
    reopened = make_manager()
    assert reopened.get_partition("c", 0).cleaner_offset == active_base
    assert reopened.get_partition("c", 0).cleanable_range(NOW).first_dirty_offset == active_base


def test_min_compaction_lag_keeps_recent_segments_dirty(make_manager):
    manager = make_manager()
    plog = manager.create_topic("lag", 1, {**COMPACT, "min.compaction.lag.ms": "1000"}).partitions[0]
    for step in range(6):
        overwrite(plog, 8, timestamp=NOW + step * 1000)
    bases = plog.segment_base_offsets
    assert len(bases) > 4
    # At NOW+2500 records newer than NOW+1500 may not be cleaned: cleaning stops at the first segment holding one.
    now = NOW + 2500
    newest_cleanable = max(s.base_offset for s in plog._segments[:-1] if s.max_timestamp <= now - 1000)
    rng = plog.cleanable_range(now)
    first_young = next(s.base_offset for s in plog._segments[:-1] if s.max_timestamp > now - 1000)
    assert rng.first_uncleanable_offset == first_young > newest_cleanable
    stats = plog.compact(now)
    plog.finish_compaction()
    assert stats.end_offset <= first_young and plog.cleaner_offset <= first_young
    young = [s.base_offset for s in plog._segments if s.base_offset >= first_young]
    assert young == [b for b in bases if b >= first_young]  # untouched

    fresh = manager.create_topic("fresh", 1, {**COMPACT, "min.compaction.lag.ms": "60000"}).partitions[0]
    overwrite(fresh, 40)
    assert fresh.cleanable_range(NOW).cleanable_bytes == 0
    assert fresh not in manager.compaction_due(NOW) and fresh in manager.compaction_due(NOW + 60_001)


def test_max_compaction_lag_forces_a_clean_below_the_ratio(make_manager):
    manager = make_manager()
    plog = manager.create_topic("old", 1, {**COMPACT, "max.compaction.lag.ms": "5000"}).partitions[0]
    unique(plog, 80)
    plog.compact(NOW)
    plog.finish_compaction()
    overwrite(plog, 12)
    assert plog.cleanable_range(NOW).cleanable_ratio <= 0.5
    assert manager.compaction_due(NOW + 4000) == []
    assert manager.compaction_due(NOW + 5001) == [plog]


def test_due_logs_are_dirtiest_first_bounded_by_threads_and_skip_running_ones(make_manager):
    manager = make_manager(CleanerConfig(threads=2))
    logs = [manager.create_topic(f"t{i}", 1, COMPACT).partitions[0] for i in range(3)]
    for plog in logs:
        unique(plog, 80)
    for plog in logs[:2]:
        plog.compact(NOW)
        plog.finish_compaction()
    overwrite(logs[0], 80)
    overwrite(logs[1], 12)
    ratios = [plog.cleanable_range(NOW).cleanable_ratio for plog in logs]
    assert ratios[2] > ratios[0] > 0.5
    assert manager.compaction_due(NOW) == [logs[2], logs[0]]
    logs[2].compact(NOW)  # running: not offered again, and it takes one of the two slots
    assert manager.compaction_due(NOW) == [logs[0]]
    logs[2].finish_compaction()
    assert make_manager(CleanerConfig(enable=False)).compaction_due(NOW) == []


def test_cleaner_config_from_broker_properties():
    config = CleanerConfig.from_broker_properties(
        {"log.cleaner.threads": "4", "log.cleaner.dedupe.buffer.size": "1048576", "log.cleaner.enable": "false", "x": "1"}
    )
    assert (config.threads, config.enable, config.map_memory_per_thread) == (4, False, 262144)
    assert CleanerConfig.from_broker_properties({}) == CleanerConfig()
    with pytest.raises(InvalidConfig):
        CleanerConfig.from_broker_properties({"log.cleaner.threads": "0"})
    with pytest.raises(InvalidConfig):
        CleanerConfig.from_broker_properties({"log.cleaner.enable": "yes"})


def test_a_small_offset_map_cleans_in_several_passes(make_manager):
    # 24 bytes per key at load factor 0.9: 200 bytes hold 7 keys, so one pass maps only part of the dirty log.
    manager = make_manager(CleanerConfig(dedupe_buffer_size=200))
    plog = manager.create_topic("small", 1, COMPACT).partitions[0]
    for i in range(30):
        plog.append(keyed_batch([(b"key%d" % ((i * 5 + k) % 20), b"v%d" % i) for k in range(5)]), now_ms=NOW)
    active_base = plog.segment_base_offsets[-1]
    ends = []
    for _ in range(40):
        stats = plog.compact(NOW)
        plog.finish_compaction()
        ends.append(stats.end_offset)
        if stats.end_offset == active_base:
            break
    assert ends[0] < active_base and ends[-1] == active_base and ends == sorted(ends)
