"""The clients compat_tests/kafka/test_quotas.py runs flat out, each in its own process: librdkafka, kafka-python
and the Java client (compat_tests/matrix/java/src/Quotas.java), each answering the bytes it moved within its time
and the longest throttle time the broker told it."""

from __future__ import annotations

import math
import subprocess
import time
from pathlib import Path

JAVA_DIR = Path(__file__).resolve().parents[1] / "matrix" / "java"
VALUE = 16 * 1024


def java_quotas(*args: str) -> dict[str, str]:
    """One scenario of Quotas.java (source-file mode): its KEY=VALUE lines."""
    cmd = ["java", "-XX:TieredStopAtLevel=1", "-cp", f"{JAVA_DIR / 'lib'}/*", str(JAVA_DIR / "src" / "Quotas.java"),
           *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise AssertionError(f"Quotas.java {' '.join(args)} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n"
                             f"{proc.stderr[-3000:]}")
    return dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)


def _timeline(seconds: float) -> tuple[list[int], dict]:
    """Bytes per second of a run, and its throttle figures (librdkafka's throttle_cb: each change once)."""
    return [0] * math.ceil(seconds), {"throttled": 0, "max_throttle_ms": 0}


def _on_throttle(totals: dict):
    def on_throttle(event) -> None:
        ms = int(event.throttle_time * 1000)
        if ms > 0:
            totals["throttled"] += 1
            totals["max_throttle_ms"] = max(totals["max_throttle_ms"], ms)
    return on_throttle


def rdkafka_produce(bootstrap: str, topic: str, client_id: str, seconds: float) -> dict:
    """librdkafka producing 16 KiB values flat out for ``seconds``: the bytes acknowledged in each second, how
    many throttle times the broker reported and the longest."""
    from confluent_kafka import Producer

    per_second, run = _timeline(seconds)
    start = time.monotonic()

    def delivered(err, msg) -> None:
        slot = int(time.monotonic() - start)
        if err is None and slot < len(per_second):
            per_second[slot] += len(msg.value())

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "acks": "1", "linger.ms": 5,
                         "on_delivery": delivered, "throttle_cb": _on_throttle(run),
                         "queue.buffering.max.kbytes": 64 * 1024, "message.timeout.ms": 300_000})
    producer.list_topics(topic, timeout=30)
    value = bytes(range(256)) * (VALUE // 256)
    start = time.monotonic()
    while time.monotonic() < start + seconds:
        try:
            producer.produce(topic, value, partition=0)
        except BufferError:
            producer.poll(0.01)
        else:
            producer.poll(0)
    producer.poll(0.2)
    producer.purge()
    return {**run, "per_second": per_second}


def rdkafka_consume(bootstrap: str, topic: str, client_id: str, seconds: float) -> dict:
    """librdkafka reading the topic from its start for ``seconds``: the bytes of each second, and the throttle
    times reported."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    per_second, run = _timeline(seconds)
    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id, "group.id": client_id,
                         "enable.auto.commit": False, "throttle_cb": _on_throttle(run)})
    consumer.list_topics(topic, timeout=30)
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    # The clock starts at the first records, not at assign(): on a loaded machine the offset lookup and the first
    # Fetch can take longer than the whole run (both clients then read nothing and the test says nothing).
    messages, waited = [], time.monotonic() + 60
    while not messages and time.monotonic() < waited:
        messages = [m for m in consumer.consume(1000, 0.1) if m.error() is None]
    start = time.monotonic()
    per_second[0] += sum(len(m.value() or b"") for m in messages)
    while time.monotonic() < start + seconds:
        messages = consumer.consume(1000, 0.1)
        slot = int(time.monotonic() - start)
        if slot < len(per_second):
            per_second[slot] += sum(len(m.value() or b"") for m in messages if m.error() is None)
    consumer.close()
    return {**run, "per_second": per_second}


def kafka_python_produce(bootstrap: str, topic: str, client_id: str, seconds: float) -> dict:
    """kafka-python producing 16 KiB values flat out: the bytes acknowledged, and its throttle-time-max metric."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError

    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id=client_id, acks=1, linger_ms=5)
    acked = [0]
    deadline = time.monotonic() + seconds

    def delivered(_meta) -> None:
        if time.monotonic() < deadline:
            acked[0] += VALUE

    value = b"v" * VALUE
    while time.monotonic() < deadline:
        producer.send(topic, value, partition=0).add_callback(delivered)
    throttle = producer.metrics()["producer-metrics"]["throttle-time-max"]
    try:
        producer.close(timeout=0)
    except KafkaTimeoutError:  # what is still queued is dropped
        pass
    return {"per_second": [acked[0]], "max_throttle_ms": int(throttle if throttle == throttle else 0)}  # (NaN: none)


