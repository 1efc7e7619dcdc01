"""One broker per log dir: a second `logway serve` on the same log.dirs refuses to start (Kafka's .lock)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

ROOT = Path(__file__).parent.parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_second(data_dir: Path) -> subprocess.CompletedProcess:
    listener = f"PLAINTEXT://127.0.0.1:{free_port()}"
    cmd = [sys.executable, "-m", "logway.cli", "serve", "--listeners", listener,
           "--advertised-listeners", listener, "--log-dirs", str(data_dir)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=ROOT)


def produce(bootstrap: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for v in values:
        producer.produce("locked", v, partition=0)
    assert producer.flush(15) == 0


def consume(bootstrap: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lock-test", "enable.auto.commit": False})
    consumer.assign([TopicPartition("locked", 0, 0)])
    got: list[bytes] = []
    try:
        for _ in range(100):
            got += [m.value() for m in consumer.consume(count, 0.2) if m.error() is None]
            if len(got) >= count:
                break
    finally:
        consumer.close()
    return got


def test_a_second_gateway_on_the_same_log_dir_refuses_to_start(gateway_process):
    gw = gateway_process.start()
    produce(gw.bootstrap, [b"a", b"b"])

    second = serve_second(gw.data_dir)
    assert second.returncode != 0
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in second.stderr, second.stderr
    assert ".lock" in lines[0] and str(gw.data_dir) in lines[0]

    produce(gw.bootstrap, [b"c"])  # the first one never noticed
    gw.stop()  # a clean shutdown releases the lock
    gw.start()
    assert consume(gw.bootstrap, 3) == [b"a", b"b", b"c"]
    gw.stop("KILL")  # the kernel drops the lock of a killed process: no stale lock
    gw.start()
    assert consume(gw.bootstrap, 3) == [b"a", b"b", b"c"]
