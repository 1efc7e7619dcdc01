"""A huge CreateTopics must not freeze other clients, must respect max.partitions.per.request, and must not
hold a file descriptor per partition (the issue's defect 4: 66 s without answers and 15.6k descriptors)."""

from __future__ import annotations

import os
import socket
import struct
import threading
import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewPartitions, NewTopic
from kafka.errors import PolicyViolationError

PARTITIONS = 1500
LIMIT = 2000


def _metadata_request(correlation: int) -> bytes:
    client = b"probe"
    body = struct.pack(">hhih", 3, 1, correlation, len(client)) + client + struct.pack(">i", 0)
    return struct.pack(">i", len(body)) + body


class Probe(threading.Thread):
    """Another client: a Metadata round trip every 10 ms on its own connection; the longest wait for an answer."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.settimeout(60)
        self.answers = 0
        self.longest_gap = 0.0
        self.done = threading.Event()

    def run(self) -> None:
        last = time.monotonic()
        while not self.done.is_set():
            self.sock.sendall(_metadata_request(self.answers + 1))
            (size,) = struct.unpack(">i", self._recv(4))
            self._recv(size)
            now = time.monotonic()
            self.answers += 1
            self.longest_gap = max(self.longest_gap, now - last)
            last = now
            time.sleep(0.01)
        self.sock.close()

    def _recv(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            assert chunk, "the gateway closed the probe connection"
            buf += chunk
        return buf


@pytest.fixture
def gateway(gateway_process):
    gateway_process.extra_args = ("--override", f"max.partitions.per.request={LIMIT}")
    return gateway_process.start()


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_huge_create_topics_keeps_others_answered_and_fds_bounded(gateway) -> None:
    admin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap, request_timeout_ms=300_000)
    probe = Probe(gateway.port)
    try:
        probe.start()
        admin.create_topics([NewTopic("wide", PARTITIONS, 1)], timeout_ms=300_000)
        time.sleep(0.2)
    finally:
        probe.done.set()
        probe.join(60)
    assert probe.answers > 10
    assert probe.longest_gap < 1.0, f"the other client waited {probe.longest_gap:.1f} s for an answer"
    # Idle partitions hold no descriptors: far fewer than one per partition (3 per partition before).
    assert open_fds(gateway.proc.pid) < 200
    admin.create_partitions({"wide": NewPartitions(PARTITIONS + 10)})
    assert len(admin.describe_topics(["wide"])[0]["partitions"]) == PARTITIONS + 10
    admin.close()

    # The created partitions work: a record into the last one comes back.
    last = TopicPartition("wide", PARTITIONS + 9)
    producer = KafkaProducer(bootstrap_servers=gateway.bootstrap)
    assert producer.send("wide", b"hello", partition=last.partition).get(timeout=30).offset == 0
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=gateway.bootstrap, auto_offset_reset="earliest")
    consumer.assign([last])
    got = []
    deadline = time.monotonic() + 30
    while not got and time.monotonic() < deadline:
        got = [r.value for recs in consumer.poll(timeout_ms=200).values() for r in recs]
    consumer.close()
    assert got == [b"hello"]


def test_requests_over_the_limit_get_policy_violation(gateway) -> None:
    admin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap)
    try:
        with pytest.raises(PolicyViolationError, match="max.partitions.per.request"):
            admin.create_topics([NewTopic("too-wide", LIMIT + 1, 1)])
        with pytest.raises(PolicyViolationError):  # the whole request counts
            admin.create_topics([NewTopic("half-a", LIMIT // 2 + 1, 1), NewTopic("half-b", LIMIT // 2, 1)])
        admin.create_topics([NewTopic("narrow", 1, 1)])
        with pytest.raises(PolicyViolationError):
            admin.create_partitions({"narrow": NewPartitions(LIMIT + 2)})
        topics = admin.list_topics()
        assert "narrow" in topics and not {"too-wide", "half-a", "half-b"} & set(topics)
        assert len(admin.describe_topics(["narrow"])[0]["partitions"]) == 1
    finally:
        admin.close()
