"""Start-up errors of a real `python -m logway.cli serve`: one line naming the setting and value, no traceback.

Also: unknown config keys are warned about (with a suggestion), Kafka settings Logway does not use are warned
as not applicable, and a stock Kafka 4 KRaft server.properties starts and serves on its PLAINTEXT listener.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

FIXTURE = Path(__file__).parent / "fixtures" / "kafka-4.0-kraft-server.properties"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    """Run `serve` expecting it to exit by itself (a start-up error)."""
    cmd = [sys.executable, "-m", "logway.cli", "serve", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def assert_one_line_error(result: subprocess.CompletedProcess, *needles: str) -> None:
    assert result.returncode != 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("logway: ")]
    assert len(errors) == 1, result.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]


def listener(port: int | None = None) -> str:
    return f"PLAINTEXT://127.0.0.1:{port or free_port()}"


def test_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = serve("--listeners", listener(port), "--log-dirs", str(tmp_path / "data"))
    assert_one_line_error(result, "listeners", str(port), "in use")
    assert not (tmp_path / "data" / "__consumer_offsets-0").exists()  # nothing written before the bind


def test_log_dirs_is_a_file(tmp_path: Path) -> None:
    file = tmp_path / "data"
    file.write_text("not a directory")
    result = serve("--listeners", listener(), "--log-dirs", str(file))
    assert_one_line_error(result, "log.dirs", str(file), "not a directory")


def test_log_dirs_cannot_be_created(tmp_path: Path) -> None:
    parent = tmp_path / "file"
    parent.write_text("x")
    result = serve("--listeners", listener(), "--log-dirs", str(parent / "data"))
    assert_one_line_error(result, "log.dirs", str(parent / "data"))


@pytest.mark.skipif(not Path("/sys").is_dir(), reason="needs a read-only /sys to have an unwritable dir as root")
def test_log_dirs_unwritable() -> None:
    result = serve("--listeners", listener(), "--log-dirs", "/sys/logway-unwritable-test")
    assert_one_line_error(result, "log.dirs", "/sys/logway-unwritable-test")


@pytest.mark.parametrize("value", ["PLAINTEXT://127.0.0.1:99999", "PLAINTEXT://127.0.0.1:nine", "localhost"])
def test_bad_listener(tmp_path: Path, value: str) -> None:
    result = serve("--listeners", value, "--log-dirs", str(tmp_path / "data"))
    assert_one_line_error(result, "listeners", value)


def test_bad_log_level(tmp_path: Path) -> None:
    """--log-level has argparse choices: a wrong one is a usage error listing them (a lower-case one is fine)."""
    result = serve("--listeners", listener(), "--log-dirs", str(tmp_path / "data"), "--log-level", "LOUD")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    error = result.stderr.strip().splitlines()[-1]
    assert "--log-level" in error and "'LOUD'" in error and "DEBUG" in error, result.stderr
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("key, value", [
    ("log.retention.ms", "a week"),
    ("log.segment.bytes", "10"),
    ("log.cleanup.policy", "shred"),
    ("log.cleaner.threads", "many"),
    ("offsets.retention.minutes", "later"),
    ("authorizer.class.name", "com.example.MyAuthorizer"),
    ("allow.everyone.if.no.acl.found", "maybe"),
    ("audit.log.file.max.bytes", "big"),
])
def test_bad_config_value(tmp_path: Path, key: str, value: str) -> None:
    props = tmp_path / "server.properties"
    props.write_text(f"{key}={value}\n")
    result = serve("--config", str(props), "--listeners", listener(), "--log-dirs", str(tmp_path / "data"))
    assert_one_line_error(result, key, value)


def test_audit_log_file_cannot_be_opened(tmp_path: Path) -> None:
    result = serve("--listeners", listener(), "--log-dirs", str(tmp_path / "data"), "--override",
                   f"audit.log.file={tmp_path / 'missing' / 'audit.log'}")
    assert_one_line_error(result, "audit.log.file=", "cannot open: No such file or directory")


def test_damaged_acl_file(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "logway-acls.json").write_text('{"version": 1, "acls": [{"resource_type": 2}]}')
    result = serve("--listeners", listener(), "--log-dirs", str(data), "--override",
                   "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer")
    assert_one_line_error(result, "logway-acls.json", "cannot read the ACLs")


@pytest.mark.parametrize(("content", "needle"), [
    (b"", "the file is empty"),  # what a power loss left of a meta.properties renamed into place before its fsync
    (b"version=1\nnode.id=1\n", "has no cluster.id"),
    (b"\xff\xfe\x00garbage", "Error while reading meta.properties file"),
])
def test_damaged_meta_properties_stops_the_start_instead_of_a_new_cluster_id(tmp_path: Path, content, needle) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "meta.properties").write_bytes(content)
    result = serve("--listeners", listener(), "--log-dirs", str(data))
    assert_one_line_error(result, str(data / "meta.properties"), needle)
    assert (data / "meta.properties").read_bytes() == content  # left as it was found


def test_log_dirs_of_two_clusters(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d, cluster in zip(dirs, ("AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB"), strict=True):
        d.mkdir()
        (d / "meta.properties").write_text(f"version=1\ncluster.id={cluster}\nnode.id=1\n")
    result = serve("--listeners", listener(), "--log-dirs", ",".join(map(str, dirs)))
    assert_one_line_error(result, "Invalid cluster.id in", str(dirs[1] / "meta.properties"), "AAAAAAAAAAAAAAAAAAAAAA")


def test_binary_config_file(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_bytes(Path(sys.executable).read_bytes()[:4096])
    result = serve("--config", str(props))
    assert_one_line_error(result, str(props), "not a properties file")


def test_missing_config_file(tmp_path: Path) -> None:
    result = serve("--config", str(tmp_path / "nope.properties"))
    assert_one_line_error(result, "nope.properties", "cannot read")


class Running:
    """A gateway process that is expected to start; stopped with SIGTERM."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        self.port = free_port()
        self.log = tmp_path / "gateway.log"
        cmd = [sys.executable, "-m", "logway.cli", "serve", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(self.log, "wb"))

    def wait_listening(self, port: int, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(self.log.read_text())

    def stop(self) -> str:
        self.proc.terminate()
        self.proc.wait(20)
        return self.log.read_text()


def test_unknown_keys_are_warned_with_a_suggestion(tmp_path: Path) -> None:
    port = free_port()
    gw = Running(tmp_path, "--listeners", listener(port), "--log-dirs", str(tmp_path / "data"),
                 "--override", "num.partition=3", "--override", "num.io.threads=8", "--override", "frobnicate=1")
    try:
        gw.wait_listening(port)
    finally:
        log = gw.stop()
    assert "unknown config num.partition (did you mean num.partitions?)" in log
    assert "unknown config frobnicate; ignored" in log
    assert "num.io.threads is a Kafka setting that does not apply" in log
    assert log.count("num.partition ") == 1  # warned once
    assert "Traceback" not in log


def test_stock_kafka_kraft_server_properties_starts(tmp_path: Path) -> None:
    """Kafka 4's config/kraft/server.properties as shipped; only ports and the data dir moved off the defaults."""
    port, controller = free_port(), free_port()
    gw = Running(
        tmp_path, "--config", str(FIXTURE), "--log-dirs", str(tmp_path / "data"),
        "--listeners", f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
        "--advertised-listeners", f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
    )
    try:
        gw.wait_listening(port)
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}")
        try:
            admin.create_topics([NewTopic("kraft-ok", 2, 1)])
            assert "kraft-ok" in admin.list_topics()
        finally:
            admin.close()
        producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}")
        try:
            assert producer.send("kraft-ok", b"v", partition=1).get(timeout=30).offset == 0
        finally:
            producer.close()
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", controller), timeout=0.5).close()
    finally:
        log = gw.stop()
    assert "Traceback" not in log
    for key in ("process.roles", "controller.quorum.voters", "num.network.threads", "offsets.topic.replication.factor"):
        assert f"config {key} is a Kafka setting that does not apply" in log
    assert "ignoring controller listener CONTROLLER://127.0.0.1" in log
    assert "unknown config" not in log
