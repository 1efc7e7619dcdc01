"""`logway proxy` in front of a 3-node Apache Kafka KRaft cluster (node ids 1, 2, 5; issue 17 part 5):
every client family through the proxy's ports, clients following a new leader when a broker stops, and
ports following the brokers in Metadata. One cluster for the module (it starts in ~10-20 s)."""

from __future__ import annotations

import shutil
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "compat_tests" / "matrix"))
from compat_tests.kafka.cluster import KafkaCluster  # noqa: E402
from compat_tests.kafka.wire_client import WireClient  # noqa: E402

NODE_IDS = (1, 2, 5)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[KafkaCluster]:
    if shutil.which("java") is None or shutil.which("mvn") is None:
        pytest.skip("the Apache Kafka cluster needs java and mvn on PATH")
    kafka = KafkaCluster(tmp_path_factory.mktemp("kafka3"), nodes=3,
                         config={"group.initial.rebalance.delay.ms": "0"}).start()
    try:
        yield kafka
    finally:
        kafka.stop()


@pytest.fixture(scope="module")
def kproxy(cluster, tmp_path_factory, proxy_process_type):
    p = proxy_process_type(tmp_path_factory.mktemp("proxy-kafka"), cluster.bootstrap).start()
    for node_id in NODE_IDS:
        p.wait_node_port(node_id)
    try:
        yield p
    finally:
        p.stop()


def _metadata(port: int):
    with WireClient(port) as client:
        return client.call(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                   "include_topic_authorized_operations": False,
                                   "include_cluster_authorized_operations": False})


def test_metadata_find_coordinator_and_describe_cluster_name_only_proxy_ports(cluster, kproxy):
    upstream_ports = {n.port for n in cluster.nodes}
    want = {(n, "127.0.0.1", kproxy.node_port(n)) for n in NODE_IDS}
    for port in (kproxy.port, *(kproxy.node_port(n) for n in NODE_IDS)):
        assert {(b.node_id, b.host, b.port) for b in _metadata(port).brokers} == want
    with WireClient(kproxy.port) as client:
        deadline = time.monotonic() + 30
        while True:  # Kafka answers COORDINATOR_NOT_AVAILABLE until __consumer_offsets exists
            found = client.call(10, 4, {"key_type": 0, "coordinator_keys": ["g-a", "g-b", "g-c"]})
            if all(c.node_id >= 0 for c in found.coordinators) or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        described = client.call(60, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 1})
    assert {(c.node_id, c.host, c.port) for c in found.coordinators} <= want
    assert {(b.broker_id, b.host, b.port) for b in described.brokers} == want
    assert not upstream_ports & {c.port for c in found.coordinators}


def _create(bootstrap: str, topic: str, partitions: int = 3, replication: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, replication,
                                                config={"min.insync.replicas": "1"})]).values():
        future.result(30)


def _consume_confluent(bootstrap: str, topic: str, count: int, group: str | None = None) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group or f"{topic}-reader",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 45
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    return values


def test_confluent_kafka_idempotent_produce_group_consume_and_admin(kproxy, topic_name):
    _create(kproxy.bootstrap, topic_name)
    producer = Producer({"bootstrap.servers": kproxy.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(300):
        producer.produce(topic_name, key=str(i).encode(), value=f"c{i}".encode())
    assert producer.flush(30) == 0
    assert sorted(_consume_confluent(kproxy.bootstrap, topic_name, 300)) == sorted(f"c{i}".encode() for i in range(300))
    admin = AdminClient({"bootstrap.servers": kproxy.bootstrap})
    for future in admin.delete_topics([topic_name]).values():
        future.result(30)


def test_kafka_python_idempotent_produce_and_group_consume(kproxy, topic_name):
    _create(kproxy.bootstrap, topic_name)
    producer = KafkaProducer(bootstrap_servers=kproxy.bootstrap, enable_idempotence=True, acks="all")
    for i in range(200):
        producer.send(topic_name, f"k{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic_name, bootstrap_servers=kproxy.bootstrap, group_id=f"{topic_name}-g",
                             auto_offset_reset="earliest", consumer_timeout_ms=20000)
    values = []
    for message in consumer:
        values.append(message.value)
        if len(values) == 200:
            break
    consumer.close()
    assert sorted(values) == sorted(f"k{i}".encode() for i in range(200))


def test_transactions_through_the_proxy(kproxy, topic_name):
    """A transactional producer finds its transaction coordinator through the proxy's ports; read_committed
    consumers see the committed transaction and not the aborted one."""
    _create(kproxy.bootstrap, topic_name, partitions=2)
    producer = Producer({"bootstrap.servers": kproxy.bootstrap, "transactional.id": f"{topic_name}-tx"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(20):
        producer.produce(topic_name, f"committed-{i}".encode(), partition=i % 2)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic_name, f"aborted-{i}".encode(), partition=i % 2)
    producer.flush(30)
    producer.abort_transaction(30)
    consumer = Consumer({"bootstrap.servers": kproxy.bootstrap, "group.id": f"{topic_name}-rc",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic_name, p, 0) for p in range(2)])
    values = []
    deadline = time.monotonic() + 20
    while len(values) < 20 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    # The aborted records come after the committed ones: a little more polling shows none of them.
    end = time.monotonic() + 2
    while time.monotonic() < end:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    assert sorted(values) == sorted(f"committed-{i}".encode() for i in range(20))


def test_java_client_roundtrip(kproxy, tmp_path):
    from programs import java
    from records import assert_exact, expected_offsets, make_records, unique, write_spec

    records = make_records(200, 3, ("none", "lz4"))
    out = java("roundtrip", kproxy.bootstrap, unique("java-proxy"), "3", write_spec(tmp_path, "rt", records),
               "enable.idempotence=true", "acks=all")
    assert out.sent == expected_offsets(records)
    assert_exact(records, out.records)


def test_kafkajs_roundtrip(kproxy, tmp_path):
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    from programs import node
    from records import assert_exact, expected_offsets, make_records, unique, write_spec

    records = make_records(150, 3, ("none", "gzip"))
    out = node("roundtrip", kproxy.bootstrap, unique("js-proxy"), "3", write_spec(tmp_path, "rt", records))
    assert out.sent == expected_offsets(records)
    assert_exact(records, out.records)


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def test_clients_follow_the_new_leader_when_a_broker_stops_and_ports_follow_metadata(cluster, kproxy, topic_name):
    """Stop the leader of a partition by PID: producers and consumers keep working through the proxy's ports
    (the new leader is another proxy port), the stopped broker's port closes when it leaves Metadata, and
    opens again when it comes back."""
    _create(kproxy.bootstrap, topic_name, partitions=3, replication=3)
    producer = Producer({"bootstrap.servers": kproxy.bootstrap, "enable.idempotence": True, "linger.ms": 2})
    for i in range(100):
        producer.produce(topic_name, value=f"before-{i}".encode(), partition=i % 3)
    assert producer.flush(30) == 0
    leaders = {p.partition_index: p.leader_id for t in _metadata(kproxy.port).topics if t.name == topic_name
               for p in t.partitions}
    victim = next(n for n in cluster.nodes if n.node_id == leaders[0])
    victim.proc.terminate()  # by PID: a controlled shutdown
    victim.proc.wait(60)
    deadline = time.monotonic() + 30
    while _port_open(kproxy.node_port(victim.node_id)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _port_open(kproxy.node_port(victim.node_id)), "the stopped broker's port stayed open"
    for i in range(100):
        producer.produce(topic_name, value=f"after-{i}".encode(), partition=i % 3)
    assert producer.flush(60) == 0
    kp = KafkaProducer(bootstrap_servers=kproxy.bootstrap, acks="all")
    for i in range(30):
        kp.send(topic_name, f"kp-{i}".encode(), partition=0)
    kp.flush(30)
    kp.close()
    new_leader = {p.partition_index: p.leader_id for t in _metadata(kproxy.port).topics if t.name == topic_name
                  for p in t.partitions}[0]
    assert new_leader != victim.node_id
    want = [f"before-{i}".encode() for i in range(100)] + [f"after-{i}".encode() for i in range(100)] \
        + [f"kp-{i}".encode() for i in range(30)]
    assert sorted(_consume_confluent(kproxy.bootstrap, topic_name, len(want))) == sorted(want)
    cluster._launch(victim)  # back: it reappears in Metadata, and its port opens again
    kproxy.wait_node_port(victim.node_id, timeout=60)
    consumer = Consumer({"bootstrap.servers": kproxy.bootstrap, "group.id": f"{topic_name}-assign"})
    consumer.assign([TopicPartition(topic_name, 0, 0)])
    assert consumer.poll(15) is not None
    consumer.close()
