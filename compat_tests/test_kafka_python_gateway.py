"""kafka-python against a gateway started as a separate process: codecs, SIGKILL restarts, torn log tails."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def produce(bootstrap: str, topic: str, values: list[bytes], **config) -> list[int]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, **config)
    try:
        return [producer.send(topic, v, key=b"k", headers=[("n", v)]).get(timeout=15).offset for v in values]
    finally:
        producer.close()


def consume(bootstrap: str, topic: str, expected: int, timeout_ms: int = 10000) -> list:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=timeout_ms)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    out = []
    for m in consumer:
        out.append(m)
        if len(out) >= expected:
            break
    consumer.close()
    return out


def last_segment(data_dir: Path, topic: str) -> Path:
    return sorted((data_dir / f"{topic}-0").glob("*.log"))[-1]


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_codecs_against_a_process(broker_bootstrap, codec):
    topic = f"proc-codec-{codec}"
    values = [f"{codec}-{i}".encode() * 20 for i in range(200)]
    offsets = produce(broker_bootstrap, topic, values, compression_type=codec, linger_ms=5)
    got = consume(broker_bootstrap, topic, len(values))
    assert [(m.offset, m.key, m.value, m.headers) for m in got] == [
        (o, b"k", v, [("n", v)]) for o, v in zip(offsets, values, strict=True)]


@pytest.mark.parametrize("sig", ["KILL", "TERM"])
def test_acknowledged_writes_survive_a_restart(gateway_process, sig):
    gw = gateway_process.start()
    values = [str(i).encode() for i in range(500)]
    assert produce(gw.bootstrap, "durable", values) == list(range(500))
    gw.stop(sig)
    gw.start()
    assert produce(gw.bootstrap, "durable", [b"more"]) == [500]
    assert [m.value for m in consume(gw.bootstrap, "durable", 501)] == values + [b"more"]


def test_recovers_from_a_truncated_tail(gateway_process):
    gw = gateway_process.start()
    values = [str(i).encode() * 50 for i in range(20)]
    produce(gw.bootstrap, "torn", values)
    gw.stop("KILL")
    segment = last_segment(gw.data_dir, "torn")
    size = segment.stat().st_size
    os.truncate(segment, size - 30)  # cut into the last batch: a write torn by a power loss
    gw.start()
    got = consume(gw.bootstrap, "torn", 19)
    assert [m.value for m in got] == values[:19]
    assert produce(gw.bootstrap, "torn", [b"after"]) == [19]
    assert [m.value for m in consume(gw.bootstrap, "torn", 20)] == values[:19] + [b"after"]


def test_recovers_from_a_garbage_tail(gateway_process):
    gw = gateway_process.start()
    values = [str(i).encode() * 50 for i in range(20)]
    produce(gw.bootstrap, "garbage", values)
    gw.stop("KILL")
    with open(last_segment(gw.data_dir, "garbage"), "ab") as f:
        f.write(os.urandom(777))  # blocks allocated but never written before a power loss
    gw.start()
    assert [m.value for m in consume(gw.bootstrap, "garbage", 20)] == values
    assert produce(gw.bootstrap, "garbage", [b"after"]) == [20]
