"""What the exactly-once ecosystem tests share: their topics, their input, and the check a user would make of the
output. Each processor under test turns input record (key k, value "i") into output (k, "i:<count of k so far>").
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

KEYS = 7


def create_topics(bootstrap: str, *names: str, partitions: int = 3, config: dict[str, dict[str, str]] | None = None
                  ) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [NewTopic(name, partitions, 1, config=(config or {}).get(name, {})) for name in names]
    for future in admin.create_topics(new).values():
        future.result(30)


def produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    """Values start..start+count-1 over KEYS keys, written once each (an idempotent producer)."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(start, start + count):
        producer.produce(topic, key=f"k{i % KEYS}", value=str(i))
    assert producer.flush(30) == 0


def committed_output(bootstrap: str, topic: str, want: int, timeout: float = 60) -> list[tuple[str, str]]:
    """(key, value) of OUTPUT as a read_committed consumer sees it, in offset order per partition: until `want`
    arrived (or `timeout` seconds passed), then whatever else comes within a second (a duplicate shows)."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                       "isolation.level": "read_committed"})
    try:
        partitions = reader.list_topics(topic, timeout=30).topics[topic].partitions
        reader.assign([TopicPartition(topic, p, 0) for p in partitions])
        got: list[tuple[str, str]] = []
        deadline = time.monotonic() + timeout
        while len(got) < want and time.monotonic() < deadline:
            msg = reader.poll(0.2)
            if msg is not None and not msg.error():
                got.append((msg.key().decode(), msg.value().decode()))
        for _ in range(5):
            msg = reader.poll(0.2)
            if msg is not None and not msg.error():
                got.append((msg.key().decode(), msg.value().decode()))
        return got
    finally:
        reader.close()


def assert_exactly_once(out: list[tuple[str, str]], total: int) -> None:
    """Every input 0..total-1 once in the output, and each key's counts 1..n once: no record lost or repeated,
    and the counts (the processor's state) survived every restart."""
    inputs = sorted(int(value.split(":")[0]) for _, value in out)
    assert inputs == list(range(total)), f"{len(out)} outputs for {total} inputs (duplicates or gaps)"
    by_key: dict[str, list[int]] = {}
    for key, value in out:
        by_key.setdefault(key, []).append(int(value.split(":")[1]))
    for key, counts in by_key.items():
        assert sorted(counts) == list(range(1, len(counts) + 1)), (key, counts)
