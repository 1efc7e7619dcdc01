"""The clients compat_tests/kafka/test_quotas.py runs flat out, each in its own process: librdkafka, kafka-python
and the Java client (compat_tests/matrix/java/src/Quotas.java), each answering the bytes it moved within its time
and the longest throttle time the broker told it."""

from __future__ import annotations

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


def rdkafka_produce(bootstrap: str, topic: str, client_id: str, seconds: float) -> tuple[int, int]:
    """librdkafka producing 16 KiB values flat out: (bytes acknowledged within ``seconds``, largest throttle ms)."""
    from confluent_kafka import Producer

    acked, throttled = [0], [0]
    deadline = time.monotonic() + seconds

    def delivered(err, msg) -> None:
        if err is None and time.monotonic() < deadline:
            acked[0] += len(msg.value())

    def throttle(event) -> None:
        throttled[0] = max(throttled[0], int(event.throttle_time * 1000))

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "acks": "1", "linger.ms": 5,
                         "on_delivery": delivered, "throttle_cb": throttle, "queue.buffering.max.kbytes": 16384})
    producer.list_topics(topic, timeout=30)
    value = b"v" * VALUE
    while time.monotonic() < deadline:
        try:
            producer.produce(topic, value, partition=0)
        except BufferError:
            producer.poll(0.01)
        else:
            producer.poll(0)
    producer.poll(0.2)
    producer.purge()
    return acked[0], throttled[0]


def rdkafka_consume(bootstrap: str, topic: str, client_id: str, seconds: float) -> tuple[int, int]:
    """librdkafka reading the topic from its start: (bytes within ``seconds``, largest throttle ms)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    throttled = [0]

    def throttle(event) -> None:
        throttled[0] = max(throttled[0], int(event.throttle_time * 1000))

    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id, "group.id": client_id,
                         "enable.auto.commit": False, "throttle_cb": throttle})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got += sum(len(m.value()) for m in consumer.consume(1000, 0.1) if m.error() is None)
    consumer.close()
    return got, throttled[0]


def kafka_python_produce(bootstrap: str, topic: str, client_id: str, seconds: float) -> tuple[int, int]:
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
    return acked[0], int(throttle if throttle == throttle else 0)  # (NaN: never throttled)


