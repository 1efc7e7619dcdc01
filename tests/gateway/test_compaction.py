"""A compacted topic seen by a stock client: after the cleaner runs, the latest value of every key remains."""

from __future__ import annotations

import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaError

from logway.gateway.in_process import InProcessGateway


def read_all(bootstrap: str, topic: str) -> list:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=3000)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    out = [(m.offset, m.key, m.value) for m in consumer]
    consumer.close()
    return out


def test_cleaner_keeps_the_latest_value_per_key(tmp_path):
    gw = InProcessGateway(tmp_path / "d", {"log.cleaner.backoff.ms": "100"}).start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=gw.bootstrap)
        admin.create_topics([NewTopic("table", 1, 1, topic_configs={
            "cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "0"})])
        admin.close()
        producer = KafkaProducer(bootstrap_servers=gw.bootstrap, linger_ms=0)
        latest = {}
        for i in range(600):
            key = f"k{i % 20}".encode()
            value = None if i == 590 else f"v{i}".encode()  # one tombstone
            meta = producer.send("table", key=key, value=value).get(timeout=10)
            latest[key] = (meta.offset, value)
        producer.close()

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            records = read_all(gw.bootstrap, "table")
            if len(records) < 100:
                break
            time.sleep(0.5)
        # The active segment is never cleaned, so its records may still hold older values of a key;
        # below it, exactly the latest record per key remains, at its original offset.
        plog = gw.broker.partition("table", 0)
        active_base = plog.segment_base_offsets[-1]
        cleaned = [r for r in records if r[0] < active_base]
        assert len(records) < 100
        assert len({k for _, k, _ in cleaned}) == len(cleaned)
        in_active = {k for o, k, _ in records if o >= active_base}
        for offset, key, value in cleaned:
            if key not in in_active:
                assert latest[key] == (offset, value)
        # Every key's latest record is still readable (a tombstone may be gone once delete.retention.ms passed).
        readable = {(o, k, v) for o, k, v in records}
        for key, (offset, value) in latest.items():
            assert (offset, key, value) in readable or value is None

        producer = KafkaProducer(bootstrap_servers=gw.bootstrap)
        try:
            producer.send("table", value=b"no key").get(timeout=10)
            raise AssertionError("a record without a key was accepted on a compacted topic")
        except KafkaError as exc:
            assert "InvalidRecord" in type(exc).__name__ or "CorruptRecord" in type(exc).__name__, exc
        finally:
            producer.close()
    finally:
        gw.stop()
