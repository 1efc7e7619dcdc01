"""A Fetch over many partitions with no new data (the per-partition fast path): every partition is answered with
its offsets and no records, an unknown partition gets its own error, and an append during the long poll wakes
the fetch with the new record."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from raw_requests import exchange

from logway.wire.errors import ErrorCode

PARTITIONS = 30


@pytest.fixture
def wide_topic(logway, topic_name):
    """A topic of PARTITIONS partitions holding one record each; returns (gateway, topic, producer)."""
    admin = KafkaAdminClient(bootstrap_servers=logway.bootstrap)
    admin.create_topics([NewTopic(topic_name, PARTITIONS, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=logway.bootstrap)
    for p in range(PARTITIONS):
        producer.send(topic_name, b"v", partition=p).get(timeout=10)
    yield logway, topic_name, producer
    producer.close()


def fetch(s: socket.socket, version: int, topic: str, partitions: list[int], max_wait_ms: int, isolation: int = 0):
    response = exchange(s, 1, version, {
        "replica_id": -1, "max_wait": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": isolation,
        "topics": [{"topic": topic, "partitions": [{"partition": p, "fetch_offset": 1, "partition_max_bytes": 1 << 16}
                                                   for p in partitions]}]})
    [answer] = response.responses
    return {p.partition_index: p for p in answer.partitions}


@pytest.mark.parametrize("version", [4, 11, 12])
def test_every_partition_at_its_end_is_answered_without_records(wide_topic, version):
    gateway, topic, _ = wide_topic
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as s:
        started = time.monotonic()
        got = fetch(s, version, topic, list(range(PARTITIONS)), max_wait_ms=300)
        waited = time.monotonic() - started
    assert sorted(got) == list(range(PARTITIONS))
    for p in got.values():
        assert (p.error_code, p.high_watermark, p.last_stable_offset) == (ErrorCode.none, 1, 1)
        assert not p.records
        assert p.aborted_transactions is None
        if version >= 5:
            assert p.log_start_offset == 0
    assert waited >= 0.25  # nothing new: the answer came when max_wait was over, not at once


def test_unknown_partition_is_its_own_error_and_read_committed_gets_an_empty_aborted_list(wide_topic):
    gateway, topic, _ = wide_topic
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as s:
        got = fetch(s, 11, topic, [0, 1, PARTITIONS + 5], max_wait_ms=5000, isolation=1)
    assert got[PARTITIONS + 5].error_code == ErrorCode.unknown_topic_or_partition
    for p in (0, 1):
        assert (got[p].error_code, got[p].high_watermark, got[p].aborted_transactions) == (ErrorCode.none, 1, ())


def test_an_append_during_the_long_poll_wakes_the_fetch_with_it(wide_topic):
    gateway, topic, producer = wide_topic
    later = threading.Timer(0.3, lambda: producer.send(topic, b"new", partition=7).get(timeout=10))
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=20) as s:
        later.start()
        try:
            started = time.monotonic()
            got = fetch(s, 12, topic, list(range(PARTITIONS)), max_wait_ms=10000)
            waited = time.monotonic() - started
        finally:
            later.join()
    assert got[7].high_watermark == 2 and got[7].records
    assert all(not got[p].records and got[p].high_watermark == 1 for p in got if p != 7)
    assert waited < 9  # woken by the append, not by max_wait
