"""Consumer groups with stock kafka-python clients against the in-process gateway."""

from __future__ import annotations

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
    a = KafkaConsumer(topic_name, bootstrap_servers=logway.bootstrap, group_id="g2", auto_offset_reset="earliest")
    b = KafkaConsumer(topic_name, bootstrap_servers=logway.bootstrap, group_id="g2", auto_offset_reset="earliest")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        a.poll(timeout_ms=100)
        b.poll(timeout_ms=100)
        # Between generations a member may still hold its old partitions: wait for the split.
        if a.assignment() and b.assignment() and len(a.assignment()) + len(b.assignment()) == 4:
            break
    assert not (a.assignment() & b.assignment())
    assert len(a.assignment() | b.assignment()) == 4

    description = admin.describe_groups(["g2"])["g2"]
    assert (description["group_state"], description["protocol_type"]) == ("Stable", "consumer")
    assigned = [set(m["member_assignment"]["assigned_partitions"][0]["partitions"]) for m in description["members"]]
    assert sorted(assigned, key=min) == [{tp.partition for tp in c.assignment()} for c in sorted((a, b), key=lambda c: min(tp.partition for tp in c.assignment()))]
    assert [g["group_id"] for g in admin.list_groups()] == ["g2"]
    a.close()
    b.close()
    assert admin.delete_groups(["g2"]) == {"g2": "OK"}
    assert admin.list_groups() == []
    admin.close()
