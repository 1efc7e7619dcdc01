"""Cold reads off the event loop (issue 15): data evicted from the page cache is read in by a worker thread.

The segment files are really evicted (fsync, then posix_fadvise DONTNEED) and a real librdkafka consumer
reads them back: the bytes must be the same, and while a worker thread is still paging a cold range in,
another client must be answered (the hook that pages in is made to wait; were the page-in on the event loop,
the other client's request would wait with it).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from logway.gateway.in_process import InProcessGateway
from logway.storage import residency

RECORDS = 200
VALUE_BYTES = 10_000  # 2 MB over segments of 512 KiB: several segments, all evicted


@pytest.fixture
def gateway(tmp_path: Path):
    gw = InProcessGateway(tmp_path / "data", {"log.segment.bytes": str(512 * 1024)}).start()
    try:
        yield gw
    finally:
        gw.stop()


def write(bootstrap: str, topic: str, count: int) -> list[bytes]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    values = [f"{i:06d}".encode() * (VALUE_BYTES // 6) for i in range(count)]
    # Batches of ~100 KB: a batch larger than the segment would be refused (RECORD_BATCH_TOO_LARGE).
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "batch.size": 100_000})
    errors = []
    for v in values:
        producer.produce(topic, v, partition=0, on_delivery=lambda err, _m: err and errors.append(err))
    assert producer.flush(15) == 0
    assert not errors
    return values


def evict(partition_dir: Path) -> list[Path]:
    """fsync and drop every file of the partition from the page cache; skip if this filesystem cannot."""
    logs = sorted(partition_dir.glob("*.log"))
    assert len(logs) > 1
    for path in partition_dir.iterdir():
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            # Only cachestat can tell without reading: a RWF_NOWAIT probe would start readahead of the file.
            evicted = residency._CACHESTAT is None or not residency.cached(fd, 0, max(1, os.fstat(fd).st_size))
        finally:
            os.close(fd)
        if path.suffix == ".log" and not evicted:
            pytest.skip(f"the page cache keeps {path.name} (tmpfs, or no cachestat/RWF_NOWAIT): nothing is cold")
    return logs


def consume(bootstrap: str, topic: str, count: int, timeout: float = 30.0) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cold", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            for message in consumer.consume(100, 0.5):
                assert message.error() is None, message.error()
                got.append(message.value())
    finally:
        consumer.close()
    return got


def counting_page_in(monkeypatch) -> list[tuple[int, int, int]]:
    calls: list[tuple[int, int, int]] = []
    real = residency.page_in

    def page_in(fd: int, position: int, size: int) -> None:
        calls.append((fd, position, size))
        real(fd, position, size)

    monkeypatch.setattr(residency, "page_in", page_in)
    return calls


def test_fetch_of_evicted_segments_returns_the_same_bytes(gateway, monkeypatch):
    values = write(gateway.bootstrap, "cold-bytes", RECORDS)
    evict(gateway.data_dir / "cold-bytes-0")
    calls = counting_page_in(monkeypatch)
    assert consume(gateway.bootstrap, "cold-bytes", RECORDS) == values
    assert calls, "the evicted segments were read without being paged in first"
    assert {position for _, position, _ in calls} >= {0}  # from the start of a segment, as the consumer began


def test_a_cold_read_in_progress_does_not_stop_other_connections(gateway, monkeypatch):
    values = write(gateway.bootstrap, "cold-held", RECORDS)
    evict(gateway.data_dir / "cold-held-0")
    entered, release = threading.Event(), threading.Event()
    real = residency.page_in

    def held_page_in(fd: int, position: int, size: int) -> None:
        entered.set()
        release.wait(30)
        real(fd, position, size)

    monkeypatch.setattr(residency, "page_in", held_page_in)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.extend(consume(gateway.bootstrap, "cold-held", RECORDS)))
    reader.start()
    try:
        assert entered.wait(20), "the cold fetch never reached the page-in"
        # The cold fetch is held in its worker thread; another connection produces and reads meanwhile.
        other = write(gateway.bootstrap, "cold-other", 3)
        assert consume(gateway.bootstrap, "cold-other", 3, timeout=15) == other
        assert not got, "the cold data was sent before it was paged in"
    finally:
        release.set()
        reader.join(40)
    assert got == values
