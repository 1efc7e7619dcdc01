"""KIP-227 fetch sessions against a real gateway: raw Fetch requests for the session rules and error codes, and
real clients (kafka-python uses sessions; librdkafka fetches sessionless) reading everything exactly once."""

from __future__ import annotations

import socket
import uuid
from datetime import timedelta

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpPartition
from raw_requests import exchange

from logway.gateway.fetch_sessions import MAX_SESSION_PARTITIONS, FetchSessionCache
from logway.gateway.in_process import InProcessGateway
from logway.wire.errors import ErrorCode

PARTITIONS = 3


def produce(bootstrap: str, topic: str, per_partition: dict[int, int], start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for partition, count in per_partition.items():
        for i in range(start, start + count):
            producer.produce(topic, f"{partition}-{i}".encode(), partition=partition)
    assert producer.flush(30) == 0


def create(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)


def fetch(s: socket.socket, version: int, session_id: int, epoch: int, partitions: dict[int, int],
          topic: str = "", topic_id: uuid.UUID | None = None, forgotten: list[int] = ()) -> object:
    """One raw Fetch (max_wait 0) of ``partitions`` {partition: offset}; v13+ names the topic by id."""
    parts = [{"partition": p, "current_leader_epoch": -1, "fetch_offset": o, "last_fetched_epoch": -1,
              "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p, o in partitions.items()]
    ref = {"topic_id": topic_id} if version >= 13 else {"topic": topic}
    body = {"replica_id": -1, "max_wait": timedelta(0), "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": session_id, "session_epoch": epoch, "rack_id": "",
            "topics": [{**ref, "partitions": parts}] if parts else [],
            "forgotten_topics_data": [{**ref, "partitions": list(forgotten)}] if forgotten else []}
    return exchange(s, 1, version, body)


def returned(answer) -> dict[int, int]:
    """{partition: high watermark} of the partitions an answer carries."""
    return {p.partition_index: p.high_watermark for t in answer.responses for p in t.partitions}


@pytest.fixture
def topic(logway, topic_name) -> str:
    create(logway.bootstrap, topic_name)
    produce(logway.bootstrap, topic_name, {0: 5, 1: 5, 2: 5})
    return topic_name


@pytest.mark.parametrize("version", [7, 12, 13, 16])
def test_incremental_fetches_carry_only_changed_partitions(logway, topic, version):
    topic_id = logway.broker.logs.topics[topic].topic_id
    with socket.create_connection(("127.0.0.1", logway.port), timeout=10) as s:
        full = fetch(s, version, 0, 0, {0: 0, 1: 0, 2: 0}, topic, topic_id)
        assert full.error_code == ErrorCode.none and full.session_id != 0
        assert returned(full) == {0: 5, 1: 5, 2: 5}
        session = full.session_id
        # The client moved its positions to 5: only they change; nothing new, so nothing in the answer.
        idle = fetch(s, version, session, 1, {0: 5, 1: 5, 2: 5}, topic, topic_id)
        assert (idle.error_code, idle.session_id, returned(idle)) == (ErrorCode.none, session, {})
        produce(logway.bootstrap, topic, {1: 2})
        # An empty incremental request: the session remembers the offsets; only partition 1 has news.
        news = fetch(s, version, session, 2, {}, topic, topic_id)
        assert returned(news) == {1: 7}
        records = news.responses[0].partitions[0].records
        assert records  # the two new records, from the offset the session kept
        # Forget partition 2: new records there are no longer reported.
        forgot = fetch(s, version, session, 3, {1: 7}, topic, topic_id, forgotten=[2])
        assert returned(forgot) == {}
        produce(logway.bootstrap, topic, {0: 1, 2: 1})
        assert returned(fetch(s, version, session, 4, {}, topic, topic_id)) == {0: 6}


def test_session_errors(logway, topic):
    with socket.create_connection(("127.0.0.1", logway.port), timeout=10) as s:
        session = fetch(s, 12, 0, 0, {0: 0}, topic).session_id
        assert fetch(s, 12, session, 1, {}, topic).error_code == ErrorCode.none
        stale = fetch(s, 12, session, 1, {}, topic)  # epoch 1 again: the next one is 2
        assert (stale.error_code, stale.session_id, stale.responses) == (ErrorCode.invalid_fetch_session_epoch, 0, ())
        unknown = fetch(s, 12, session ^ 0x5A5A, 1, {0: 0}, topic)
        assert unknown.error_code == ErrorCode.fetch_session_id_not_found
        # A session made with names cannot go on with topic ids (v13+).
        topic_id = logway.broker.logs.topics[topic].topic_id
        switched = fetch(s, 13, session, 2, {}, topic_id=topic_id)
        assert switched.error_code == ErrorCode.fetch_session_topic_id_error
        assert fetch(s, 12, session, 2, {}, topic).error_code == ErrorCode.none  # the session lives on
        # Epoch -1 closes a session; the answer is a sessionless full fetch.
        session = fetch(s, 12, 0, 0, {0: 0}, topic).session_id
        closing = fetch(s, 12, session, -1, {0: 0}, topic)
        assert (closing.error_code, closing.session_id, returned(closing)) == (ErrorCode.none, 0, {0: 5})
        assert fetch(s, 12, session, 1, {}, topic).error_code == ErrorCode.fetch_session_id_not_found


def test_without_cache_slots_fetches_are_sessionless(tmp_path, topic_name):
    gateway = InProcessGateway(tmp_path / "data", {"max.incremental.fetch.session.cache.slots": "0"}).start()
    try:
        create(gateway.bootstrap, topic_name)
        produce(gateway.bootstrap, topic_name, {0: 3})
        with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as s:
            answer = fetch(s, 12, 0, 0, {0: 0}, topic_name)
            assert (answer.error_code, answer.session_id, returned(answer)) == (ErrorCode.none, 0, {0: 3})
    finally:
        gateway.stop()


class _Partition:
    def __init__(self, partition: int) -> None:
        self.partition, self.fetch_offset, self.partition_max_bytes = partition, 0, 1 << 20


class _Topic:
    def __init__(self, name: str, count: int, start: int = 0) -> None:
        self.topic, self.topic_id = name, None
        self.partitions = [_Partition(p) for p in range(start, start + count)]


class _Request:
    def __init__(self, session_id: int, epoch: int, topics: list, forgotten: tuple = ()) -> None:
        self.session_id, self.session_epoch, self.topics = session_id, epoch, topics
        self.forgotten_topics_data = forgotten
        self.max_bytes, self.min_bytes, self.isolation_level, self.max_wait = 1 << 20, 1, 0, 0


ALICE = ("SASL_PLAINTEXT", "User:alice")


def test_cache_is_bounded_in_sessions_and_partitions():
    """Hostile clients cannot grow the cache: slots are reused (least recently used idle sessions go first),
    and a session cannot grow past MAX_SESSION_PARTITIONS (it is dropped: the client starts over)."""
    now = [0.0]
    cache = FetchSessionCache(slots=2, clock=lambda: now[0])
    Request, Topic = _Request, _Topic

    first = cache.context(12, Request(0, 0, [Topic("a", 2)]), ALICE).session_id
    second = cache.context(12, Request(0, 0, [Topic("a", 2)]), ALICE).session_id
    assert first and second and len(cache.sessions) == 2
    assert cache.context(12, Request(0, 0, [Topic("a", 1)]), ALICE).session_id == 0  # full, none stale or smaller
    now[0] = 121.0
    third = cache.context(12, Request(0, 0, [Topic("a", 1)]), ALICE).session_id
    assert third and first not in cache.sessions and len(cache.sessions) == 2
    huge = cache.context(12, Request(second, 1, [Topic("b", MAX_SESSION_PARTITIONS)]), ALICE)
    assert huge.error == ErrorCode.fetch_session_id_not_found and second not in cache.sessions
    assert cache.cached_partitions == 1


def test_a_session_is_not_there_for_another_principal_or_listener():
    """Another principal (or the same one on another listener) naming a live session gets the answer of an id
    never issued, whatever the epoch (no existence oracle), and can neither use nor close it."""
    cache = FetchSessionCache()
    mine = cache.context(12, _Request(0, 0, [_Topic("a", 1)]), ALICE).session_id
    for intruder in (("SASL_PLAINTEXT", "User:mallory"), ("OTHER", "User:alice")):
        for epoch in (1, 2, 7):  # the right epoch and wrong ones answer alike
            answer = cache.context(12, _Request(mine, epoch, []), intruder)
            assert (answer.error, answer.session) == (ErrorCode.fetch_session_id_not_found, None)
        assert cache.context(12, _Request(mine, -1, []), intruder).session is None  # a close of it: not done
        assert cache.context(12, _Request(mine, 0, [_Topic("x", 1)]), intruder).session_id != mine
    assert cache.context(12, _Request(mine, 1, []), ALICE).session_id == mine  # untouched for its owner
    never_issued = cache.context(12, _Request(12345, 1, []), ALICE)
    assert never_issued.error == ErrorCode.fetch_session_id_not_found


def test_kafka_python_reads_everything_through_a_session(logway, topic):
    """kafka-python uses fetch sessions (its FetchSessionHandler): every record once, through a live session."""
    consumer = KafkaConsumer(bootstrap_servers=logway.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100,
                             max_partition_fetch_bytes=256)
    try:
        parts = [KpPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        seen: list[bytes] = []
        for round_ in range(3):
            if round_:
                produce(logway.bootstrap, topic, {round_: 4}, start=5)
            want = 15 + 4 * round_
            for _ in range(200):
                for records in consumer.poll(timeout_ms=100).values():
                    seen.extend(r.value for r in records)
                if len(seen) >= want:
                    break
        assert sorted(seen) == sorted([f"{p}-{i}".encode() for p in range(3) for i in range(5)]
                                      + [f"1-{i}".encode() for i in range(5, 9)]
                                      + [f"2-{i}".encode() for i in range(5, 9)])
        assert logway.broker.fetch_sessions.sessions, "kafka-python's session was not kept"
    finally:
        consumer.close()


def test_librdkafka_sessionless_reads_everything(logway, topic):
    consumer = Consumer({"bootstrap.servers": logway.bootstrap, "group.id": "g", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        seen = []
        for _ in range(100):
            seen += [m.value() for m in consumer.consume(100, 0.2) if m.error() is None]
            if len(seen) >= 15:
                break
        assert sorted(seen) == sorted(f"{p}-{i}".encode() for p in range(3) for i in range(5))
        assert not logway.broker.fetch_sessions.sessions  # librdkafka sends session epoch -1
    finally:
        consumer.close()
