"""Client quotas in the broker, over the wire: quotas survive a restart; the request_percentage, consumer_byte_rate
(Fetch and ShareFetch), controller_mutation_rate and connection_creation_rate quotas each hold their client as Kafka does and tell it the
throttle time (producer_byte_rate with real clients: compat_tests/kafka/test_quotas.py)."""

from __future__ import annotations

import datetime
import socket
import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from raw_requests import exchange, read_frame, request_frame, share_join

from logway.gateway.in_process import InProcessGateway
from logway.wire.records import NewRecord, build_batch


def _alter(gw: InProcessGateway, entity: dict, ops: dict[str, float | None]) -> None:
    with socket.create_connection(("127.0.0.1", gw.port)) as s:
        resp = exchange(s, 49, 1, {"entries": [{
            "entity": [{"entity_type": kind, "entity_name": name} for kind, name in entity.items()],
            "ops": [{"key": k, "value": v or 0.0, "remove": v is None} for k, v in ops.items()]}],
            "validate_only": False})
    assert resp.entries[0].error_code == 0, resp


def _describe(gw: InProcessGateway) -> dict:
    with socket.create_connection(("127.0.0.1", gw.port)) as s:
        resp = exchange(s, 48, 1, {"components": [], "strict": False})
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in resp.entries}


@pytest.fixture
def gateway(tmp_path):
    gw = InProcessGateway(tmp_path / "data").start()
    try:
        yield gw
    finally:
        gw.stop()


def test_quotas_survive_a_restart(gateway):
    _alter(gateway, {"user": "alice", "client-id": None}, {"producer_byte_rate": 1024.0, "request_percentage": 5.5})
    _alter(gateway, {"ip": None}, {"connection_creation_rate": 50.0})
    before = _describe(gateway)
    gateway.stop()
    gateway.start()
    assert _describe(gateway) == before == {
        (("client-id", None), ("user", "alice")): {"producer_byte_rate": 1024.0, "request_percentage": 5.5},
        (("ip", None),): {"connection_creation_rate": 50.0}}


def test_a_client_over_its_request_percentage_is_throttled_for_at_most_a_window(gateway):
    # The client id of raw_requests is "x": a quota of a thousandth of a percent, used up by a few requests.
    _alter(gateway, {"client-id": "x"}, {"request_percentage": 0.001})
    throttles = []
    with socket.create_connection(("127.0.0.1", gateway.port)) as s:
        deadline = time.monotonic() + 30
        while not any(throttles) and time.monotonic() < deadline:
            resp = exchange(s, 3, 12, {"topics": [], "allow_auto_topic_creation": False})
            throttles.append(resp.throttle_time.total_seconds() * 1000)
    assert 0 < max(throttles) <= 1000  # quota.window.size.seconds bounds a request-time throttle


def _fill(gw: InProcessGateway, topic: str, count: int, size: int) -> None:
    admin = AdminClient({"bootstrap.servers": gw.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": gw.bootstrap, "linger.ms": 5})
    for _ in range(count):
        producer.produce(topic, b"f" * size)
    assert producer.flush(30) == 0


def _fetch(s: socket.socket, topic: str, session_id: int, epoch: int) -> object:
    return exchange(s, 1, 12, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 50 << 20, "isolation_level": 0,
        "session_id": session_id, "session_epoch": epoch, "rack_id": "", "forgotten_topics_data": [],
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0, "current_leader_epoch": -1,
                                                     "log_start_offset": -1, "partition_max_bytes": 1 << 20,
                                                     "last_fetched_epoch": -1}]}]})


def test_a_consumer_over_its_byte_rate_is_answered_no_data_and_its_throttle_time(gateway):
    topic = f"fetch-quota-{uuid.uuid4().hex[:6]}"
    _fill(gateway, topic, 10, 10_000)
    _alter(gateway, {"client-id": "x"}, {"consumer_byte_rate": 1000.0})
    with socket.create_connection(("127.0.0.1", gateway.port)) as s:
        # max_bytes is capped at 10 windows of the quota, but a fetch carries its first batch whole (KIP-74): that
        # batch alone is over the quota, so the answer has no data, only the time to wait; no session is kept.
        first = _fetch(s, topic, 0, 0)
        assert first.responses == () and first.throttle_time.total_seconds() > 1
        assert first.session_id == 0
    # Without the quota the same fetch gets the data and a session.
    _alter(gateway, {"client-id": "x"}, {"consumer_byte_rate": None})
    with socket.create_connection(("127.0.0.1", gateway.port)) as s:
        second = _fetch(s, topic, 0, 0)
    assert second.responses[0].partitions[0].records and second.session_id != 0
    assert second.throttle_time.total_seconds() == 0


def _share_fetch(s: socket.socket, member: str, topic_id: uuid.UUID) -> object:
    return exchange(s, 78, 1, {
        "group_id": "g", "member_id": member, "share_session_epoch": 0,
        "max_wait": datetime.timedelta(milliseconds=5000), "min_bytes": 1, "max_bytes": 50 << 20,
        "max_records": 100, "batch_size": 100, "forgotten_topics_data": [],
        "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}]})


def test_a_share_consumer_over_its_byte_rate_is_told_its_throttle_time_and_keeps_its_records(tmp_path):
    # Kafka 4.3 counts a ShareFetch answer against consumer_byte_rate as a Fetch's (processShareFetchResponse).
    gw = InProcessGateway(tmp_path / "data", {"group.share.assignment.interval.ms": "0"}).start()
    try:
        gw.broker.logs.create_topic("t", 1)
        topic_id = gw.broker.logs.topics["t"].topic_id
        with socket.create_connection(("127.0.0.1", gw.port), timeout=20) as s:
            exchange(s, 44, 1, {"resources": [{"resource_type": 32, "resource_name": "g", "configs": [
                {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]}],
                "validate_only": False})
            batch = build_batch([NewRecord(b"k", b"v" * 10_000) for _ in range(10)])
            exchange(s, 0, 9, {"acks": -1, "timeout": 10_000, "transactional_id": None, "topic_data": [
                {"name": "t", "partition_data": [{"index": 0, "records": batch}]}]})
            members = [str(uuid.uuid4()), str(uuid.uuid4())]
            for member in members:
                joined = share_join(s, "g", member, ["t"])
                assert joined.error_code == 0, joined
        with socket.create_connection(("127.0.0.1", gw.port), timeout=20) as s:
            free = _share_fetch(s, members[0], topic_id)
        assert free.throttle_time.total_seconds() == 0  # no quota yet
        acquired = [(a.first_offset, a.last_offset) for t in free.responses for p in t.partitions
                    for a in p.acquired_records]
        assert acquired == [(0, 9)]
        _alter(gw, {"client-id": "x"}, {"consumer_byte_rate": 1000.0})
        # The first member's connection is closed: the records it held are delivered again (to the second).
        with socket.create_connection(("127.0.0.1", gw.port), timeout=20) as s:
            throttled = _share_fetch(s, members[1], topic_id)
        # 100 kB against 1000 B/s: told to wait, and the records it acquired come with the answer (Kafka's answer
        # drops them, leaving them locked to the member until the lock runs out).
        assert throttled.throttle_time.total_seconds() > 1
        records = [p.records for t in throttled.responses for p in t.partitions]
        assert [(a.first_offset, a.last_offset) for t in throttled.responses for p in t.partitions
                for a in p.acquired_records] == [(0, 9)] and sum(map(len, records)) > 100_000
    finally:
        gw.stop()


def _create(s: socket.socket, version: int, name: str, partitions: int) -> object:
    return exchange(s, 19, version, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                                                 "assignments": [], "configs": []}],
                                     "timeout_ms": 30_000, "validate_only": False})


def test_a_controller_mutation_quota_refuses_topics_once_spent_and_throttles_older_clients(gateway):
    _alter(gateway, {"client-id": "x"}, {"controller_mutation_rate": 1.0})  # a bucket of 11 partitions
    prefix = f"mutations-{uuid.uuid4().hex[:6]}"
    with socket.create_connection(("127.0.0.1", gateway.port)) as s:
        accepted = _create(s, 7, prefix + "-a", 20)  # the bucket was not empty: taken, now 9 partitions short
        assert accepted.topics[0].error_code == 0 and accepted.throttle_time.total_seconds() == 0
        refused = _create(s, 7, prefix + "-b", 1)
        assert refused.topics[0].error_code == 89  # THROTTLING_QUOTA_EXCEEDED
        assert 8 < refused.throttle_time.total_seconds() <= 9
    with socket.create_connection(("127.0.0.1", gateway.port)) as s:
        older = _create(s, 5, prefix + "-c", 1)  # CreateTopics v5: permissive, created and throttled
    assert older.topics[0].error_code == 0 and older.throttle_time.total_seconds() > 8


def test_connections_over_an_ips_creation_rate_are_closed_unserved(gateway):
    _alter(gateway, {"ip": "127.0.0.1"}, {"connection_creation_rate": 1.0})  # 10 at once, then one a second
    served = refused = 0
    for _ in range(15):
        with socket.create_connection(("127.0.0.1", gateway.port)) as s:
            s.sendall(request_frame(18, 3, {"client_software_name": "t", "client_software_version": "1"}))
            s.settimeout(5)
            try:
                read_frame(s)
                served += 1
            except ConnectionError:  # held for the throttle time (at most a second), then closed
                refused += 1
    assert served == 10 and refused == 5
