"""LogManager: log.dirs placement, topic lifecycle, persistence across restarts, flush scheduling."""

from __future__ import annotations

import os
import uuid
from collections import Counter

import pytest
from storage_helpers import NOW, make_batch

from logway.storage.config import LogConfig
from logway.storage.errors import (
    InvalidConfig,
    InvalidPartitions,
    InvalidTopic,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
)
from logway.storage.log_manager import LogManager


@pytest.fixture
def make_manager(tmp_path, clock):
    managers = []

    def factory(dirs=("d0",), config=None):
        manager = LogManager([tmp_path / d for d in dirs], config or LogConfig(), clock_ms=clock)
        manager.open()
        managers.append(manager)
        return manager

    yield factory
    for manager in managers:
        for topic in manager.topics.values():
            for plog in topic.partitions:
                plog._close_files()


def test_new_partitions_go_to_the_log_dir_with_the_fewest(make_manager, tmp_path):
    manager = make_manager(("a", "b", "c"))
    topic = manager.create_topic("spread", 7)
    dirs = [p.dir.parent.name for p in topic.partitions]
    assert dirs == ["a", "b", "c", "a", "b", "c", "a"]
    manager.create_topic("more", 2)
    assert Counter(p.dir.parent.name for t in manager.topics.values() for p in t.partitions) == {"a": 3, "b": 3, "c": 3}
    manager.close()
    # a new, empty log dir receives new partitions until it catches up
    again = make_manager(("a", "b", "c", "d"))
    assert [p.dir.parent.name for p in again.create_topic("fresh", 3).partitions] == ["d", "d", "d"]


def test_topics_survive_a_restart_with_ids_configs_and_data(make_manager, tmp_path):
    manager = make_manager(("a", "b"))
    topic_id = uuid.uuid4()
    manager.create_topic("orders.v1", 3, {"retention.ms": "1000", "cleanup.policy": "compact"}, topic_id=topic_id)
    manager.create_topic("plain", 1)
    for p in range(3):
        batch = make_batch([b"p%d" % p] * (p + 1), keys=[b"k%d" % i for i in range(p + 1)])
        manager.get_partition("orders.v1", p).append(batch, now_ms=NOW)
    manager.close()
    assert (tmp_path / "a" / ".kafka_cleanshutdown").exists()
    metadata = (tmp_path / "a" / "orders.v1-0" / "partition.metadata").read_text()
    assert metadata.startswith("version: 0\ntopic_id: ")

    again = make_manager(("a", "b"))
    assert not (tmp_path / "a" / ".kafka_cleanshutdown").exists()
    assert set(again.topics) == {"orders.v1", "plain"}
    topic = again.topics["orders.v1"]
    assert topic.topic_id == topic_id
    assert topic.overrides == {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert topic.config.retention_ms == 1000 and topic.config.compact_enabled
    assert again.topics["plain"].config == LogConfig()
    assert [p.log_end_offset for p in topic.partitions] == [1, 2, 3]
    assert again.get_partition("orders.v1", 2).read_bytes(0, 1000)


def test_recovery_point_checkpoint_format(make_manager, tmp_path):
    manager = make_manager()
    plog = manager.create_topic("cp", 2).partitions[1]
    plog.append(make_batch([b"x", b"y"]), now_ms=NOW)
    manager.close()
    lines = (tmp_path / "d0" / "recovery-point-offset-checkpoint").read_text().splitlines()
    assert lines == ["0", "2", "cp 0 0", "cp 1 2"]


def test_unclean_restart_recovers_a_garbage_tail(make_manager, tmp_path):
    manager = make_manager()
    plog = manager.create_topic("crash", 1).partitions[0]
    for _ in range(5):
        plog.append(make_batch([b"ok"]), now_ms=NOW)
    plog._close_files()  # killed: no flush, no checkpoint update, no marker
    with open(plog.dir / f"{0:020d}.log", "ab") as f:
        f.write(os.urandom(333))
    again = make_manager()
    recovered = again.get_partition("crash", 0)
    assert recovered.log_end_offset == 5
    assert recovered.append(make_batch([b"next"]), now_ms=NOW).base_offset == 5


def test_delete_topic_is_immediate_and_files_go_after_the_delay(make_manager, tmp_path, clock):
    manager = make_manager(config=LogConfig.from_properties({"file.delete.delay.ms": "5000"}))
    plog = manager.create_topic("gone", 2).partitions[0]
    plog.append(make_batch([b"bye"]), now_ms=NOW)
    in_flight = plog.read(0, 1000)
    manager.delete_topic("gone")
    assert "gone" not in manager.topics
    with pytest.raises(UnknownTopicOrPartition):
        manager.get_partition("gone", 0)
    renamed = sorted(n for n in os.listdir(tmp_path / "d0") if n.endswith("-delete"))
    assert len(renamed) == 2 and all(n.startswith(("gone-0.", "gone-1.")) for n in renamed)
    # a fetch answered just before the delete can still send its bytes
    assert os.pread(in_flight.fd, in_flight.size, in_flight.position)
    # the name is free again at once
    manager.create_topic("gone", 1)
    manager.maintenance(clock.now + 4999)
    assert len([n for n in os.listdir(tmp_path / "d0") if n.endswith("-delete")]) == 2
    manager.maintenance(clock.now + 5000)
    assert not [n for n in os.listdir(tmp_path / "d0") if n.endswith("-delete")]
    assert manager.get_partition("gone", 0).log_end_offset == 0


def test_pending_topic_deletion_finishes_on_open(make_manager, tmp_path):
    manager = make_manager()
    manager.create_topic("old", 1)
    manager.delete_topic("old")
    for topic in manager.topics.values():
        for plog in topic.partitions:
            plog._close_files()
    again = make_manager()
    assert "old" not in again.topics
    assert not [n for n in os.listdir(tmp_path / "d0") if "old" in n]


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "bad name", "ümlaut", "a/b"])
def test_invalid_topic_names(make_manager, name):
    with pytest.raises(InvalidTopic):
        make_manager().create_topic(name, 1)


def test_topic_creation_errors(make_manager):
    manager = make_manager()
    manager.create_topic("a.b", 1)
    manager.create_topic("x" * 249, 1)
    with pytest.raises(TopicAlreadyExists):
        manager.create_topic("a.b", 1)
    with pytest.raises(InvalidTopic):
        manager.create_topic("a_b", 1)  # collides with a.b
    with pytest.raises(InvalidPartitions):
        manager.create_topic("zero", 0)
    with pytest.raises(InvalidConfig):
        manager.create_topic("cfg", 1, {"no.such.config": "1"})
    with pytest.raises(InvalidConfig):
        manager.create_topic("cfg", 1, {"retention.ms": "soon"})
    assert set(manager.topics) == {"a.b", "x" * 249}


def test_create_partitions_grows_only(make_manager):
    manager = make_manager(("a", "b"))
    manager.create_topic("grow", 2)
    manager.create_partitions("grow", 5)
    assert [p.partition for p in manager.topics["grow"].partitions] == [0, 1, 2, 3, 4]
    manager.get_partition("grow", 4).append(make_batch([b"new"]), now_ms=NOW)
    for count in (5, 3):
        with pytest.raises(InvalidPartitions):
            manager.create_partitions("grow", count)
    with pytest.raises(UnknownTopicOrPartition):
        manager.create_partitions("missing", 3)
    manager.close()
    assert len(make_manager(("a", "b")).topics["grow"].partitions) == 5


def test_alter_config_applies_and_persists(make_manager):
    manager = make_manager()
    manager.create_topic("alt", 1, {"retention.ms": "5"})
    manager.alter_config("alt", {"message.timestamp.type": "LogAppendTime"})
    plog = manager.get_partition("alt", 0)
    assert plog.append(make_batch([b"t"]), now_ms=NOW).log_append_time_ms == NOW
    manager.close()
    topic = make_manager().topics["alt"]
    assert topic.overrides == {"message.timestamp.type": "LogAppendTime"}
    assert topic.config.retention_ms == LogConfig().retention_ms


def test_flush_due_by_flush_ms_and_flush_needed_by_flush_messages(make_manager, clock):
    manager = make_manager(config=LogConfig.from_properties({"flush.ms": "1000"}))
    by_time = manager.create_topic("by-time", 1).partitions[0]
    by_count = manager.create_topic("by-count", 1, {"flush.messages": "3"}).partitions[0]
    assert manager.flush_due(clock.now + 5000) == []  # nothing unflushed
    by_time.append(make_batch([b"a"]), now_ms=NOW)
    assert manager.flush_due(clock.now + 999) == []
    assert manager.flush_due(clock.now + 1000) == [by_time]
    by_time.flush()
    assert by_time.recovery_point == 1 and manager.flush_due(clock.now + 1000) == []
    assert not by_count.append(make_batch([b"1", b"2"]), now_ms=NOW).flush_needed
    result = by_count.append(make_batch([b"3"]), now_ms=NOW)
    # flush.messages reached: the append says so but never fsyncs on the caller's (event loop) thread.
    assert result.flush_needed and by_count.recovery_point == 0
    by_count.flush()
    assert by_count.recovery_point == 3
    assert not by_count.append(make_batch([b"4"]), now_ms=NOW).flush_needed


def test_a_roll_makes_a_log_due_for_a_flush_whatever_flush_ms(make_manager, clock):
    """Kafka's roll schedules a flush up to the new segment: the recovery point moves at least every segment."""
    manager = make_manager()
    plog = manager.create_topic("rolls", 1, {"segment.bytes": "300"}).partitions[0]
    plog.append(make_batch([b"x" * 100]), now_ms=NOW)
    assert manager.flush_due(clock.now) == []  # flush.ms is Long.MAX_VALUE: never by time
    while len(plog.segment_base_offsets) < 2:
        plog.append(make_batch([b"x" * 100]), now_ms=NOW)
    assert manager.flush_due(clock.now) == [plog]
    plog.flush()
    assert plog.recovery_point == plog.log_end_offset and manager.flush_due(clock.now) == []


def test_broker_properties_precedence():
    config = LogConfig.from_broker_properties(
        {"log.retention.hours": "1", "log.retention.minutes": "2", "log.roll.hours": "3", "log.segment.bytes": "5000",
         "message.max.bytes": "777", "broker.id": "0"}
    )
    assert config.retention_ms == 120_000
    assert config.segment_ms == 3 * 3_600_000
    assert (config.segment_bytes, config.max_message_bytes) == (5000, 777)
    assert LogConfig.from_broker_properties({"log.retention.ms": "-1", "log.retention.hours": "5"}).retention_ms == -1
