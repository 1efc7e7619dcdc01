"""Sessionless Fetches with nothing new are answered from their topics' kept heads (gateway/fetch_heads.py), and
only while those are right: after an append, DeleteRecords moving a log start offset, or the topic deleted and
made again, a request gets what the general path answers. Requests come in rotated partition orders, as
librdkafka sends them."""

from __future__ import annotations

import random
import struct
import time
import types

import pytest
import trio
from kafka import KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from logway.gateway.apis import fetch
from logway.gateway.context import RequestContext
from logway.gateway.metrics.collector import take_snapshot
from logway.storage.partition_log import PartitionLog
from logway.wire.protocol import RequestHeader, build, decode_body, encode_body, request_type

TOPIC = "heads"
PARTITIONS = 6


class Client:
    """Fetch requests of one connection, answered by the handler or by the general path alone."""

    def __init__(self, logway) -> None:
        self.logway = logway
        self.broker = logway.broker
        self.connection = types.SimpleNamespace(realm=self.broker.realm, principal="User:ANONYMOUS",
                                                peer="127.0.0.1:1", listener=types.SimpleNamespace(name="PLAINTEXT"))

    def on_loop(self, fn):
        async def call():
            return fn()

        return trio.from_thread.run(call, trio_token=self.logway._token)

    def ask(self, version: int, data: dict, correlation_id: int, general: bool = False) -> list:
        async def call() -> list:
            body = encode_body(build(request_type(1, version), data))
            head = struct.pack(">hhih", 1, version, correlation_id, 1) + b"x" + (b"\x00" if version >= 12 else b"")
            frame = memoryview(bytearray(head + body))
            ctx = RequestContext(self.connection, self.broker, RequestHeader(1, version, correlation_id, "x"), frame,
                                 len(head))
            if general:
                return await fetch._serve(ctx, decode_body(1, version, bytes(frame), len(head)), None, None)
            return await fetch.handle(ctx, None)

        return trio.from_thread.run(call, trio_token=self.logway._token)

    def topic(self):
        return self.on_loop(lambda: self.broker.logs.topics.get(TOPIC))

    def request(self, version: int, rotate: int, partitions: range = range(PARTITIONS)) -> dict:
        """A request of ``partitions`` at their ends, the list rotated by ``rotate``."""
        topic = self.topic()
        ends = self.on_loop(lambda: [plog.high_watermark for plog in topic.partitions])
        order = list(partitions)
        order = order[rotate:] + order[:rotate]
        return {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "rack_id": "",
                "topics": [{"topic": TOPIC, "topic_id": topic.topic_id, "partitions": [
                    {"partition": p, "fetch_offset": ends[p], "partition_max_bytes": 1 << 16,
                     "current_leader_epoch": -1, "log_start_offset": -1} for p in order]}]}

    def same(self, version: int, data: dict, correlation_id: int) -> list:
        answer = self.ask(version, data, correlation_id)
        assert answer == self.ask(version, data, correlation_id, general=True)
        return answer


def _not_read(*_args):
    raise AssertionError("a partition's offsets were read: the topic's kept heads were not used")


@pytest.mark.parametrize("version", [4, 11, 12, 13, 17])
def test_quiet_fetches_are_answered_from_kept_heads_until_the_topic_changes(logway, monkeypatch, version):
    admin = KafkaAdminClient(bootstrap_servers=logway.bootstrap)
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
    producer = KafkaProducer(bootstrap_servers=logway.bootstrap)
    for p in (1, 2, 2, 4):
        producer.send(TOPIC, b"v" * 30, partition=p).get(timeout=10)
    client = Client(logway)
    rng = random.Random(version)

    data = client.request(version, 0)
    client.same(version, data, 1)  # the heads are made
    with monkeypatch.context() as m:
        m.setattr(PartitionLog, "fetch_offsets", _not_read)
        for correlation_id in range(2, 8):  # any order of the same partitions: answered from them
            rotated = client.request(version, rng.randrange(PARTITIONS))
            answer = client.ask(version, rotated, correlation_id)
            m.undo()
            assert answer == client.ask(version, rotated, correlation_id, general=True)
            m.setattr(PartitionLog, "fetch_offsets", _not_read)

    # An append: the same request now has records to read.
    producer.send(TOPIC, b"w" * 30, partition=3).get(timeout=10)
    answer = client.same(version, data, 8)
    assert any(isinstance(chunk, fetch.FileSlice) for chunk in answer)

    # DeleteRecords moves a log start offset, with no append.
    data = client.request(version, 2)
    before = client.same(version, data, 9)
    admin.delete_records({TopicPartition(TOPIC, 2): 1})
    after = client.same(version, data, 9)
    if version >= 5:  # log_start_offset is in the answer from v5: the kept heads would now be wrong
        assert after != before

    # The topic deleted and made again (a new topic id, empty partitions).
    old = client.topic()
    admin.delete_topics([TOPIC])
    deadline = time.monotonic() + 30
    while client.topic() in (None, old) and time.monotonic() < deadline:
        try:
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
        except Exception:  # noqa: BLE001 (TopicAlreadyExistsError while the deletion finishes)
            time.sleep(0.1)
    assert client.topic() not in (None, old)
    client.same(version, data, 10)
    client.same(version, client.request(version, 3), 11)
    producer.close()
    admin.delete_topics([TOPIC])
    admin.close()


def test_requests_for_part_of_a_topic_fill_its_heads(logway, monkeypatch):
    """Two consumers of a group, each with half the partitions, are read once each; then the whole topic is
    answered from the heads they left."""
    admin = KafkaAdminClient(bootstrap_servers=logway.bootstrap)
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
    client = Client(logway)
    client.same(12, client.request(12, 0, range(0, 3)), 1)
    client.same(12, client.request(12, 1, range(3, PARTITIONS)), 2)
    whole = client.request(12, 4)
    with monkeypatch.context() as m:
        m.setattr(PartitionLog, "fetch_offsets", _not_read)
        answer = client.ask(12, whole, 3)
    assert answer == client.ask(12, whole, 3, general=True)
    admin.delete_topics([TOPIC])
    admin.close()


def test_the_fast_path_counts_fetch_requests_per_topic(logway):
    """TotalFetchRequestsPerSec counts the partitions of every answer, from kept heads too."""
    admin = KafkaAdminClient(bootstrap_servers=logway.bootstrap)
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
    client = Client(logway)

    def counted() -> int:
        snapshot = client.on_loop(lambda: take_snapshot(client.broker))
        return sum(row[10] for row in snapshot.partitions if row[0] == TOPIC)

    before = counted()
    for i in range(5):
        client.ask(12, client.request(12, i), i)
    assert counted() - before == 5 * PARTITIONS
    admin.delete_topics([TOPIC])
    admin.close()
