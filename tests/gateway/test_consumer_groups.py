"""Consumer groups with stock kafka-python clients against the in-process gateway."""

from __future__ import annotations

import threading
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata


def produce(bootstrap: str, topic: str, n: int, partitions: int = 1) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(n):
        producer.send(topic, str(i).encode(), partition=i % partitions)
    producer.flush()
    producer.close()


def poll_until(consumer: KafkaConsumer, count: int, timeout: float = 20.0) -> list:
    out: list = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            out.extend(records)
    return out


def test_subscribe_commit_and_resume(logway, topic_name):
    produce(logway.bootstrap, topic_name, 50)
    consumer = KafkaConsumer(topic_name, bootstrap_servers=logway.bootstrap, group_id="g1",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    got = poll_until(consumer, 30)
    assert [m.value for m in got[:30]] == [str(i).encode() for i in range(30)]
    consumer.commit({TopicPartition(topic_name, 0): OffsetAndMetadata(30, "my metadata", -1)})
    consumer.close()

    logway.stop()
    logway.start()

    consumer = KafkaConsumer(topic_name, bootstrap_servers=logway.bootstrap, group_id="g1",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    rest = poll_until(consumer, 20)
    assert [m.offset for m in rest] == list(range(30, 50))
    committed = consumer.committed(TopicPartition(topic_name, 0), metadata=True)
    assert (committed.offset, committed.metadata) == (30, "my metadata")
    consumer.close()


def test_two_members_split_partitions(logway, topic_name):
    admin = KafkaAdminClient(bootstrap_servers=logway.bootstrap)
    admin.create_topics([NewTopic(topic_name, num_partitions=4, replication_factor=1)])
    produce(logway.bootstrap, topic_name, 40, partitions=4)
    stop = threading.Event()

    def member() -> None:
        # Each member polls on its own thread, as an application would.
        consumer = KafkaConsumer(topic_name, bootstrap_servers=logway.bootstrap, group_id="g2",
                                 auto_offset_reset="earliest", heartbeat_interval_ms=500)
        while not stop.is_set():
            consumer.poll(timeout_ms=100)
        consumer.close()

    threads = [threading.Thread(target=member, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()

    def split() -> list[set[int]] | None:
        description = admin.describe_groups(["g2"])["g2"]
        if description["group_state"] != "Stable" or len(description["members"]) != 2:
            return None
        assert description["protocol_type"] == "consumer"
        parts = [{p for t in m["member_assignment"]["assigned_partitions"] for p in t["partitions"]}
                 for m in description["members"]]
        return parts if all(parts) else None  # a member may first be given nothing before metadata arrives

    deadline = time.monotonic() + 30
    parts = None
    while time.monotonic() < deadline and parts is None:
        time.sleep(0.1)
        parts = split()
    stop.set()
    for t in threads:
        t.join(15)
    assert parts is not None
    assert not (parts[0] & parts[1]) and parts[0] | parts[1] == {0, 1, 2, 3}
    assert [g["group_id"] for g in admin.list_groups()] == ["g2"]
    assert admin.delete_groups(["g2"]) == {"g2": "OK"}
    assert admin.list_groups() == []
    admin.close()
