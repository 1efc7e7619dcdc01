"""MirrorMaker 2 (Kafka 4.3.1's dedicated mode, org.apache.kafka.connect.mirror.MirrorMaker) between Logway and
Apache Kafka in both directions, with Logway reached direct and through `logway proxy` (issue 30): a topic on
each cluster is replicated to the other under the source's alias (DefaultReplicationPolicy: "<alias>.<topic>"),
every record once and in order. MirrorMaker keeps its Connect state (configs, offsets, status) and its
heartbeats, checkpoints and offset syncs in topics on both clusters, so both serve its admin, producer and
consumer clients. With LOGWAY_TEST_BOOTSTRAP (`make compat`) it runs once, between that endpoint and Kafka.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from bench.procs import Logway
from compat_tests.ecosystem.exactly_once import create_topics, produce
from compat_tests.ecosystem.harness import ENDPOINTS, Child, endpoint, logway
from compat_tests.kafka.cluster import HERE, JVM_FLAGS, KafkaCluster, classpath

RECORDS = 50


@pytest.fixture(scope="module")
def logway_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Logway]:
    with logway(tmp_path_factory.mktemp("mm2-logway")) as broker:
        yield broker


@pytest.fixture(params=ENDPOINTS)
def logway_bootstrap(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Logway direct or through the proxy; with LOGWAY_TEST_BOOTSTRAP (`make compat`), that endpoint instead."""
    with endpoint(request.param, lambda: request.getfixturevalue("logway_broker"), tmp_path) as bootstrap:
        yield bootstrap


def _mm2_properties(path: Path, clusters: dict[str, str], topics: str) -> Path:
    a, b = clusters
    settings = {"clusters": f"{a}, {b}", **{f"{alias}.bootstrap.servers": bs for alias, bs in clusters.items()},
                f"{a}->{b}.enabled": "true", f"{a}->{b}.topics": topics,
                f"{b}->{a}.enabled": "true", f"{b}->{a}.topics": topics,
                "replication.factor": "1", "refresh.topics.interval.seconds": "5",
                "emit.heartbeats.interval.seconds": "1", "emit.checkpoints.interval.seconds": "1",
                "plugin.discovery": "service_load",
                **{f"{t}.replication.factor": "1" for t in (
                    "checkpoints.topic", "heartbeats.topic", "offset-syncs.topic", "offset.storage",
                    "status.storage", "config.storage")}}
    path.write_text("".join(f"{k} = {v}\n" for k, v in settings.items()))
    return path


def _values(bootstrap: str, topic: str, want: int, mm2: Child, timeout: float = 120) -> list[str]:
    """Partition 0 of ``topic`` from the start, once it exists, until ``want`` values came or the deadline; then
    whatever else comes within a second (a repeat shows)."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    deadline = time.monotonic() + timeout
    try:
        mm2.wait_for(f"{topic} on {bootstrap}", lambda: topic in reader.list_topics(timeout=10).topics, timeout,
                     every=0.5)
        reader.assign([TopicPartition(topic, 0, 0)])
        got: list[str] = []
        while len(got) < want and time.monotonic() < deadline:
            msg = reader.poll(0.2)
            if msg is not None and not msg.error():
                got.append(msg.value().decode())
        for _ in range(5):
            msg = reader.poll(0.2)
            if msg is not None and not msg.error():
                got.append(msg.value().decode())
        return got
    finally:
        reader.close()


def test_mirror_maker_2_both_ways(kafka: KafkaCluster, logway_bootstrap: str, tmp_path: Path) -> None:
    if shutil.which("java") is None:
        pytest.skip("MirrorMaker needs java on PATH")
    run = uuid.uuid4().hex[:8]
    aliases = {f"logway{run}": logway_bootstrap, f"kafka{run}": kafka.bootstrap}
    topic = f"mm-{run}"
    for bootstrap, first in ((logway_bootstrap, 0), (kafka.bootstrap, 1000)):
        create_topics(bootstrap, topic, partitions=1)
        produce(bootstrap, topic, first, RECORDS)
    mm2 = Child(["java", *JVM_FLAGS, f"-Dlog4j2.configurationFile={HERE / 'log4j2-tools.properties'}", "-cp",
                 classpath(), "org.apache.kafka.connect.mirror.MirrorMaker",
                 str(_mm2_properties(tmp_path / "mm2.properties", aliases, "mm-.*"))], tmp_path / "mm2.log")
    try:
        to_kafka = _values(kafka.bootstrap, f"logway{run}.{topic}", RECORDS, mm2)
        to_logway = _values(logway_bootstrap, f"kafka{run}.{topic}", RECORDS, mm2)
    finally:
        mm2.stop()
    assert to_kafka == [str(i) for i in range(RECORDS)]
    assert to_logway == [str(i) for i in range(1000, 1000 + RECORDS)]
