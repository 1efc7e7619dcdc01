"""The Prometheus endpoint (metrics.port) of a real `logway serve` process, read as Prometheus reads it.

kafka-python produces and consumes in a group; the scrape must show what a dashboard built for Kafka (JMX
exporter names) and kafka_exporter (lag) would show: traffic, offsets, requests per API, connections, lag.
"""

from __future__ import annotations

import math
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from raw_requests import exchange

from logway.gateway.metrics.collector import BrokerCollector, GroupRow, Snapshot, _quantile, render
from logway.server.stats import LATENCY_BOUNDS_MS

TOPIC = "metered"
GROUP = "metered-group"
N = 200
PARTITIONS = 2

Samples = dict[tuple[str, frozenset], float]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Gateway:
    """A `logway serve` process on a free port."""

    def __init__(self, data_dir: Path, *overrides: str) -> None:
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        listener = f"PLAINTEXT://{self.bootstrap}"
        cmd = [sys.executable, "-m", "logway.cli", "serve", "--listeners", listener, "--log-dirs", str(data_dir)]
        for override in overrides:
            cmd += ["--override", override]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            assert self.proc.poll() is None, "the gateway exited"
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the gateway does not listen"
                time.sleep(0.05)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def scrape(port: int) -> Samples:
    """Every sample of one scrape, by (name, labels)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def total(samples: Samples, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def wait_for(check, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.05)


def listening_ports(pid: int) -> set[int]:
    """TCP ports a process listens on (Linux /proc), to see which ports it opened."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # state LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


@pytest.fixture(scope="module")
def metered(tmp_path_factory) -> Iterator[tuple[Gateway, int]]:
    metrics_port = free_port()
    gw = Gateway(tmp_path_factory.mktemp("metered") / "data", f"metrics.port={metrics_port}",
                 "group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=4")
    try:
        yield gw, metrics_port
    finally:
        gw.stop()


def test_traffic_offsets_requests_and_group_lag(metered):
    gw, port = metered
    admin = KafkaAdminClient(bootstrap_servers=gw.bootstrap)
    admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=gw.bootstrap, linger_ms=5)
    for i in range(N):
        producer.send(TOPIC, f"value-{i}".encode(), partition=i % PARTITIONS)
    producer.flush()
    producer.close()

    consumer = KafkaConsumer(TOPIC, bootstrap_servers=gw.bootstrap, group_id=GROUP, auto_offset_reset="earliest",
                             enable_auto_commit=False)
    got = 0
    deadline = time.monotonic() + 30
    while got < N and time.monotonic() < deadline:
        got += sum(len(records) for records in consumer.poll(timeout_ms=500).values())
    assert got == N
    # Half of partition 0 committed: the lag is the other half of it plus all of partition 1.
    half = N // PARTITIONS // 2
    consumer.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(half, "", -1),
                     TopicPartition(TOPIC, 1): OffsetAndMetadata(0, "", -1)})
    before = scrape(port)
    consumer.commit()  # everything polled
    after = scrape(port)
    consumer.close()

    per_partition = N // PARTITIONS
    for p in range(PARTITIONS):
        assert value(after, "kafka_log_log_logendoffset", topic=TOPIC, partition=str(p)) == per_partition
        assert value(after, "kafka_log_log_logstartoffset", topic=TOPIC, partition=str(p)) == 0
    size = total(after, "kafka_log_log_size", topic=TOPIC)
    assert size > N * len("value-000")
    # What was appended is what is on disk; the consumer read all of it (at least once).
    assert value(after, "kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == N
    assert value(after, "kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC) == size
    assert value(after, "kafka_server_brokertopicmetrics_bytesout_total", topic=TOPIC) >= size
    assert total(after, "logway_partition_messages_in_total", topic=TOPIC) == N
    assert value(after, "kafka_server_brokertopicmetrics_messagesin_total") >= N  # all topics: no topic label

    assert value(before, "kafka_consumergroup_lag", consumergroup=GROUP, topic=TOPIC, partition="0") == per_partition - half
    assert value(before, "kafka_consumergroup_lag", consumergroup=GROUP, topic=TOPIC, partition="1") == per_partition
    assert value(before, "kafka_consumergroup_lag_sum", consumergroup=GROUP, topic=TOPIC) == N - half
    for p in range(PARTITIONS):
        assert value(after, "kafka_consumergroup_lag", consumergroup=GROUP, topic=TOPIC, partition=str(p)) == 0
        assert value(after, "kafka_consumergroup_current_offset", consumergroup=GROUP, topic=TOPIC,
                     partition=str(p)) == per_partition
    assert value(after, "kafka_coordinator_group_groupmetadatamanager_numgroups") >= 1

    requests = {dict(labels)["request"] for (name, labels) in after if name == "kafka_network_requestmetrics_requests_total"}
    assert {"ApiVersions", "Metadata", "CreateTopics", "Produce", "Fetch", "FindCoordinator", "JoinGroup",
            "SyncGroup", "OffsetCommit", "OffsetFetch"} <= requests
    assert total(after, "kafka_network_requestmetrics_requests_total", request="OffsetCommit") == 2
    for request in ("Produce", "Fetch"):
        count = total(after, "kafka_network_requestmetrics_requests_total", request=request)
        # Every request is timed once: in the Kafka-style summary and in the Prometheus histogram.
        assert value(after, "kafka_network_requestmetrics_totaltimems_count", request=request) == count
        assert value(after, "logway_request_duration_seconds_count", request=request) == count
        assert value(after, "kafka_network_requestmetrics_totaltimems", request=request, quantile="0.99") > 0


def test_client_quota_metrics_show_each_budgets_rate_and_throttle_time(metered):
    """Kafka's quota metrics as the JMX exporter names them: a client id's byte rate and the throttle time it was
    given (the quota set with AlterClientQuotas), beside a client id without a quota."""
    gw, port = metered
    host, kafka_port = gw.bootstrap.split(":")
    with socket.create_connection((host, int(kafka_port))) as s:
        set_quota = {"entries": [{"entity": [{"entity_type": "client-id", "entity_name": "metered-slow"}],
                                  "ops": [{"key": "producer_byte_rate", "value": 10240.0, "remove": False}]}],
                     "validate_only": False}
        assert exchange(s, 49, 1, set_quota).entries[0].error_code == 0
    for client_id in ("metered-slow", "metered-fast"):
        producer = KafkaProducer(bootstrap_servers=gw.bootstrap, client_id=client_id, linger_ms=5)
        for _ in range(11):  # 11 x 10 KiB: more than a fresh client may send at once (10 windows of the quota)
            producer.send(TOPIC + "-quota", b"q" * 10240)
        producer.flush()
        producer.close()
    after = scrape(port)
    slow = {"resource": "Produce", "clientId": "metered-slow"}
    assert value(after, "kafka_server_quota_byte_rate", **slow) > 0
    assert value(after, "kafka_server_quota_throttle_time", **slow) > 0
    fast = {"resource": "Produce", "clientId": "metered-fast"}
    assert value(after, "kafka_server_quota_byte_rate", **fast) > 0
    assert math.isnan(value(after, "kafka_server_quota_throttle_time", **fast))  # never throttled (Kafka: NaN)


def test_connection_count_follows_open_connections(metered):
    gw, port = metered

    def connections() -> float:
        return value(scrape(port), "kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT",
                     networkProcessor="0")

    host, kafka_port = gw.bootstrap.split(":")
    assert wait_for(lambda: connections() == 0)  # the clients of the other tests have gone
    base = 0
    socks = [socket.create_connection((host, int(kafka_port))) for _ in range(3)]
    try:
        assert wait_for(lambda: connections() == base + 3)
    finally:
        for s in socks:
            s.close()
    assert wait_for(lambda: connections() == base)


def test_the_endpoint_answers_only_metrics_and_survives_bad_requests(metered):
    _, port = metered
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/secrets", timeout=10)
    assert info.value.code == 404
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nX-Junk: " + b"a" * 20000 + b"\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 431")
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"\x00\xff garbage\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 405")
    assert "kafka_log_log_logendoffset" in {name for name, _ in scrape(port)}


def test_metrics_are_off_by_default(tmp_path: Path):
    gw = Gateway(tmp_path / "data")
    try:
        assert listening_ports(gw.proc.pid) == {gw.port}
    finally:
        gw.stop()


def test_a_metrics_port_in_use_is_a_one_line_start_up_error(tmp_path: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cmd = [sys.executable, "-m", "logway.cli", "serve", "--listeners", f"PLAINTEXT://127.0.0.1:{free_port()}",
               "--log-dirs", str(tmp_path / "data"), "--override", f"metrics.port={port}"]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"logway: start-up error: metrics.port={port}: cannot listen" in result.stderr


def test_quantiles_interpolate_within_the_bucket():
    buckets = [0] * (len(LATENCY_BOUNDS_MS) + 1)
    assert _quantile(buckets, 0.99) == 0
    i = LATENCY_BOUNDS_MS.index(10)  # the (5, 10] ms bucket
    buckets[i] = 100
    assert _quantile(buckets, 0.5) == 7.5
    assert _quantile(buckets, 0.99) == pytest.approx(9.95)


def snapshot_with_awkward_values() -> Snapshot:
    """Two partitions with large numbers and a group whose id needs escaping in the text format."""
    return Snapshot(
        partitions=[("t.a_b-c", 0, 12_345_678_901, 7, 2**40, 3, 10**9, 123, 0, 5, 6, 1, 100),
                    ("t.a_b-c", 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0)],
        offline_partitions=0, log_dirs=["/data"], offline_dirs=set(), uncleanable={}, deleted=(0,) * 7,
        requests=[("Produce", [0] * 9 + [3], [1] * 18, [1] * 18, 3, 4.5)], connections={"PLAINTEXT": 2},
        connections_created={"PLAINTEXT": 9}, memory_used=0, memory_available=100, fetches_waiting=1,
        failed_produce=0, failed_fetch=0, storage_errors={}, recovery=(0, 0, 0, 0), cleaner=(0, 0, 0, 0),
        retention_runs=0,
        groups=[GroupRow('we"ird\\group\nid ü', "Stable", 2, [("t.a_b-c", 0, 12_345_678_000), ("gone", 3, 1)])],
    )


class _One:
    def __init__(self, metric) -> None:
        self.metric = metric

    def collect(self):
        yield self.metric


def test_the_fast_tables_write_exactly_what_prometheus_client_writes():
    tables = BrokerCollector(snapshot_with_awkward_values()).tables()
    assert {t.name for t in tables} >= {"kafka_log_log_logendoffset", "kafka_consumergroup_lag"}
    for table in tables:
        assert table.text({}).encode() == generate_latest(_One(table.family())), table.name


def test_a_rendered_scrape_parses_with_each_family_once():
    text = render(snapshot_with_awkward_values()).decode()
    families = [f.name for f in text_string_to_metric_families(text)]
    assert len(families) == len(set(families))
    samples = {(s.name, frozenset(s.labels.items())): s.value
               for f in text_string_to_metric_families(text) for s in f.samples}
    group = 'we"ird\\group\nid ü'
    assert samples[("kafka_consumergroup_lag", frozenset({"consumergroup": group, "topic": "t.a_b-c",
                                                           "partition": "0"}.items()))] == 901
    assert ("kafka_consumergroup_lag", frozenset({"consumergroup": group, "topic": "gone",
                                                   "partition": "3"}.items())) not in samples
    assert samples[("kafka_log_log_logendoffset", frozenset({"topic": "t.a_b-c", "partition": "0"}.items()))] == 12_345_678_901
    assert samples[("kafka_server_brokertopicmetrics_bytesin_total", frozenset())] == 10**9


def test_retention_and_compaction_show_in_the_metrics(tmp_path: Path):
    """Retention moves the log start offset and counts what it deleted; the cleaner counts its runs and bytes."""
    from logway.gateway.in_process import InProcessGateway

    port = free_port()
    gw = InProcessGateway(tmp_path / "d", {"metrics.port": str(port), "log.cleaner.backoff.ms": "100",
                                           "log.retention.check.interval.ms": "100",
                                           "offsets.topic.num.partitions": "1"}).start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=gw.bootstrap)
        admin.create_topics([
            NewTopic("kept-small", 1, 1, topic_configs={"segment.bytes": "4096", "retention.bytes": "8192",
                                                        "file.delete.delay.ms": "0"}),
            NewTopic("table", 1, 1, topic_configs={"cleanup.policy": "compact", "segment.bytes": "4096",
                                                   "min.cleanable.dirty.ratio": "0.01"}),
        ])
        admin.close()
        producer = KafkaProducer(bootstrap_servers=gw.bootstrap, batch_size=1024)  # batches fit a 4 KiB segment
        for i in range(300):
            producer.send("kept-small", b"r" * 100)
            producer.send("table", key=b"k%d" % (i % 10), value=b"v" * 100)
        producer.flush()
        producer.close()

        def cleaned() -> Samples | None:
            samples = scrape(port)
            done = (value(samples, "logway_log_cleaner_runs_total") >= 1
                    and value(samples, "logway_log_retention_deleted_segments_total") >= 1)
            return samples if done else None

        samples = wait_for(cleaned, timeout=20)
        assert samples, "neither retention nor the cleaner showed up in the metrics"
        start = value(samples, "kafka_log_log_logstartoffset", topic="kept-small", partition="0")
        assert 0 < start < 300
        assert value(samples, "logway_log_retention_deleted_bytes_total") > 0
        assert value(samples, "logway_log_retention_runs_total") >= 1
        assert value(samples, "logway_log_cleaner_removed_bytes_total") > 0
        assert value(samples, "logway_log_cleaner_cleaned_segments_total") >= 1
        assert value(samples, "kafka_log_log_size", topic="table", partition="0") < 300 * 100
        assert value(samples, "kafka_log_logmanager_offlinelogdirectorycount") == 0
    finally:
        gw.stop()
