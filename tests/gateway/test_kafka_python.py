"""A stock kafka-python producer and consumer against the in-process gateway: the foundation's user story."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout_ms: int = 15000) -> list:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=timeout_ms)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out = []
        for message in consumer:
            out.append(message)
            if len(out) >= expected:
                break
        return out
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_every_codec(logway, topic_name, codec):
    producer = KafkaProducer(bootstrap_servers=logway.bootstrap, compression_type=codec, linger_ms=5)
    sent = []
    for i in range(300):
        key = None if i % 7 == 0 else f"key-{i % 13}".encode()
        value = f"value-{i}-".encode() * (i % 5 + 1)
        headers = [("h", f"{i}".encode()), ("empty", b"")] if i % 2 else []
        meta = producer.send(topic_name, key=key, value=value, headers=headers).get(timeout=15)
        sent.append((meta.partition, meta.offset, key, value, headers))
    producer.close()

    got = consume_all(logway.bootstrap, topic_name, 1, len(sent))
    assert [(m.partition, m.offset, m.key, m.value, list(m.headers)) for m in got] == sent
    assert [s[1] for s in sent] == list(range(len(sent)))  # auto-created with num.partitions=1: dense offsets


def test_many_partitions_keep_order_per_partition(logway, topic_name):
    admin = KafkaAdminClient(bootstrap_servers=logway.bootstrap)
    admin.create_topics([NewTopic(topic_name, num_partitions=4, replication_factor=1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=logway.bootstrap, compression_type="lz4", batch_size=4096, linger_ms=2)
    futures = [producer.send(topic_name, key=f"k{i % 10}".encode(), value=str(i).encode()) for i in range(2000)]
    producer.flush()
    metas = [f.get(timeout=10) for f in futures]
    producer.close()
    by_partition: dict[int, list[bytes]] = {}
    for i, meta in enumerate(metas):
        by_partition.setdefault(meta.partition, []).append(str(i).encode())
    assert len(by_partition) > 1
    got = consume_all(logway.bootstrap, topic_name, 4, len(metas))
    seen: dict[int, list[bytes]] = {}
    for m in got:
        seen.setdefault(m.partition, []).append(m.value)
    assert seen == by_partition


def test_large_messages_and_partial_fetches(logway, topic_name):
    producer = KafkaProducer(bootstrap_servers=logway.bootstrap, max_request_size=2_000_000)
    values = [bytes([i]) * 900_000 for i in range(5)]
    for v in values:
        producer.send(topic_name, v).get(timeout=15)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=logway.bootstrap, consumer_timeout_ms=15000,
                             max_partition_fetch_bytes=100_000, fetch_max_bytes=100_000)
    tp = TopicPartition(topic_name, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got = []
    for m in consumer:
        got.append(m.value)
        if len(got) == len(values):
            break
    consumer.close()
    assert got == values  # KIP-74: a batch larger than the fetch limits still comes through


def test_consumer_waits_for_new_data(logway, topic_name):
    producer = KafkaProducer(bootstrap_servers=logway.bootstrap)
    producer.send(topic_name, b"first").get(timeout=10)
    consumer = KafkaConsumer(bootstrap_servers=logway.bootstrap, consumer_timeout_ms=10000, fetch_max_wait_ms=2000)
    tp = TopicPartition(topic_name, 0)
    consumer.assign([tp])
    consumer.seek_to_end(tp)
    assert consumer.position(tp) == 1  # the end offset: the next offset to be written
    producer.send(topic_name, b"second").get(timeout=10)
    message = next(consumer)
    assert (message.offset, message.value) == (1, b"second")
    consumer.close()
    producer.close()


def test_offsets_for_times_and_end_offsets(logway, topic_name):
    producer = KafkaProducer(bootstrap_servers=logway.bootstrap)
    for i, ts in enumerate([1000, 2000, 3000, 4000]):
        producer.send(topic_name, str(i).encode(), timestamp_ms=ts).get(timeout=10)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=logway.bootstrap)
    tp = TopicPartition(topic_name, 0)
    assert consumer.beginning_offsets([tp]) == {tp: 0}
    assert consumer.end_offsets([tp]) == {tp: 4}
    found = consumer.offsets_for_times({tp: 2500})[tp]
    assert (found.offset, found.timestamp) == (2, 3000)
    assert consumer.offsets_for_times({tp: 5000})[tp] is None
    consumer.close()


def test_restart_keeps_every_acknowledged_message(logway, topic_name):
    producer = KafkaProducer(bootstrap_servers=logway.bootstrap)
    for i in range(100):
        producer.send(topic_name, str(i).encode()).get(timeout=10)
    producer.close()
    logway.stop()
    logway.start()
    producer = KafkaProducer(bootstrap_servers=logway.bootstrap)
    meta = producer.send(topic_name, b"after restart").get(timeout=10)
    producer.close()
    assert meta.offset == 100
    got = consume_all(logway.bootstrap, topic_name, 1, 101)
    assert [m.value for m in got] == [str(i).encode() for i in range(100)] + [b"after restart"]


def test_flush_interval_messages_fsyncs_before_the_ack(tmp_path, topic_name):
    from logway.gateway.in_process import InProcessGateway

    gw = InProcessGateway(tmp_path / "d", {"log.flush.interval.messages": "1"}).start()
    try:
        producer = KafkaProducer(bootstrap_servers=gw.bootstrap)
        for i in range(20):
            producer.send(topic_name, str(i).encode()).get(timeout=10)
            plog = gw.broker.partition(topic_name, 0)
            assert plog.recovery_point == plog.log_end_offset == i + 1  # flushed before it was acknowledged
        producer.close()
    finally:
        gw.stop()
