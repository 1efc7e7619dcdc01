"""A real `logway serve` process configured only by LOGWAY_* variables: `logway health` sees it, the settings
take effect (auto-created topic's partition count, retention in DescribeConfigs), and SIGTERM ends it cleanly
(exit 0, clean-shutdown marker, data read back by the next start). `logway health` on a closed port fails
with one line."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

CLEAN_MARKER = ".kafka_cleanshutdown"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def health(bootstrap: str, timeout: float = 2.0) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "logway.cli", "health", "--bootstrap", bootstrap, "--timeout", str(timeout)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def start(data: Path, port: int, log: Path) -> subprocess.Popen:
    env = {**os.environ, "LOGWAY_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}", "LOGWAY_LOG_DIRS": str(data),
           "LOGWAY_NUM_PARTITIONS": "3", "LOGWAY_LOG_RETENTION_MS": "3600000"}
    with log.open("a") as out:
        proc = subprocess.Popen([sys.executable, "-m", "logway.cli", "serve"], env=env, stdout=out,
                                stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while health(f"127.0.0.1:{port}").returncode != 0:
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)
    return proc


def sigterm(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=60)


def test_health_fails_with_one_line_on_a_closed_port():
    result = health(f"127.0.0.1:{free_port()}")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and "refused" in result.stderr, result.stderr


def test_env_settings_health_and_sigterm(tmp_path: Path):
    data, log, port = tmp_path / "data", tmp_path / "serve.log", free_port()
    bootstrap = f"127.0.0.1:{port}"
    proc = start(data, port, log)
    try:
        ok = health(bootstrap)
        assert ok.returncode == 0 and "healthy" in ok.stdout, ok.stderr
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        for i in range(30):
            producer.send("env-topic", key=b"k%d" % i, value=b"v%d" % i)
        producer.flush()
        assert len(producer.partitions_for("env-topic")) == 3  # LOGWAY_NUM_PARTITIONS
        producer.close()
        resource = ConfigResource(ResourceType.TOPIC, "env-topic")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        described = admin.describe_configs([resource], request_timeout=10)[resource].result(timeout=10)
        retention = described["retention.ms"]
        assert (retention.value, retention.source) == ("3600000", ConfigSource.STATIC_BROKER_CONFIG.value)
        assert sigterm(proc) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "shut down cleanly" in log.read_text()
    assert (data / CLEAN_MARKER).exists()

    proc = start(data, port, log)
    try:
        assert not (data / CLEAN_MARKER).exists()  # consumed by the start, written again by the next stop
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
        consumer.assign([TopicPartition("env-topic", p) for p in range(3)])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < 30 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values += [r.value for r in records]
        consumer.close()
        assert sorted(values) == sorted(b"v%d" % i for i in range(30))
        assert sigterm(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (data / CLEAN_MARKER).exists()
