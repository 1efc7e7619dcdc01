"""Driver-side admin calls through librdkafka: create topics, read high watermarks."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(bootstrap: str, name: str, partitions: int, timeout: float = 120.0,
                 config: dict[str, str] | None = None) -> None:
    """CreateTopics (with topic ``config``), then wait until metadata lists every partition with a leader."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(name, partitions, 1, config=config or {})
    admin.create_topics([new], operation_timeout=timeout)[name].result(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        topic = admin.list_topics(name, timeout=10).topics.get(name)
        if topic is not None and topic.error is None and len(topic.partitions) == partitions and all(
                p.leader >= 0 for p in topic.partitions.values()):
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {name} not ready with {partitions} partitions after {timeout:.0f} s")


def high_watermarks(bootstrap: str, topic: str, partitions: int = 1, timeout: float = 10.0) -> list[int]:
    """Each partition's high watermark (ListOffsets latest)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-admin", "enable.auto.commit": False})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1]
                for p in range(partitions)]
    finally:
        consumer.close()


def wait_high_watermark(bootstrap: str, topic: str, timeout: float) -> int:
    """Poll until the broker answers ListOffsets for the partition; return the watermark it reports."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            high = high_watermarks(bootstrap, topic, timeout=max(0.5, min(5.0, deadline - time.monotonic())))[0]
            if high >= 0:
                return high
        except KafkaException as exc:
            last_error = exc
        time.sleep(0.02)
    raise TimeoutError(f"no ListOffsets answer for {topic} in {timeout:.0f} s ({last_error})")
