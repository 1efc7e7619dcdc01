"""MirrorMaker 2 (Kafka 4.3.1, dedicated mode, one JVM) between Logway and Apache Kafka 4.3.1, both directions at
once: `orders` on Logway is mirrored to `logway.orders` on Kafka and `payments` on Kafka to `kafka.payments` on
Logway (DefaultReplicationPolicy), and each side's consumer group offsets are translated by
MirrorCheckpointConnector and written to the other side's group (sync.group.offsets.enabled).

Each direction runs its own Connect herder whose group and compacted internal topics live on its target, so the
Kafka->Logway herder keeps its state on Logway; the offset syncs of the Logway->Kafka flow are written to Logway
(offset-syncs.topic.location=source) and the translated offsets of the Kafka->Logway flow are committed to Logway
through the admin API (AlterConsumerGroupOffsets).

A group that read a topic to its end has committed the topic's end offset N; MM2 translates it to N on the other
side when it has an offset sync for the last record (offset.lag.max=0 makes every record a sync candidate), so the
test asserts the translated offset equals N: the group would resume on the other side with nothing to re-read.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # --import-mode=importlib: bench/ and compat_tests/ import from the repository root
    sys.path.insert(0, str(ROOT))

from compat_tests.ecosystem.connect_worker import (  # noqa: E402
    FAST_CLIENTS,
    PLUGIN_DISCOVERY,
    MirrorMakerProcess,
    require_connect_jars,
)
from compat_tests.ecosystem.harness import ENDPOINTS, start_logway  # noqa: E402
from compat_tests.kafka.cluster import KafkaCluster, KafkaUnavailable, ensure_jars  # noqa: E402

RECORDS = 200


@pytest.fixture(scope="module")
def reference_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One Apache Kafka node for this module's tests (each mirrors its own topics and groups): its bootstrap."""
    try:
        ensure_jars()
    except KafkaUnavailable as error:
        pytest.skip(str(error))
    require_connect_jars()
    with KafkaCluster(tmp_path_factory.mktemp("mm2-kafka"), nodes=1) as cluster:
        yield cluster.bootstrap


@pytest.fixture(params=ENDPOINTS)
def logway(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(the kind, the bootstrap) of a fresh Logway, direct or through `logway proxy`."""
    with ExitStack() as stack:
        yield request.param, start_logway(request.param, tmp_path, stack)


def fill(bootstrap: str, topic: str, group: str) -> list[bytes]:
    """Create ``topic`` (one partition), produce RECORDS values, and have ``group`` read them all and commit."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    values = [f"{topic}-{i:04d}".encode() for i in range(RECORDS)]
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    assert read_all(bootstrap, topic, RECORDS, group) == values
    return values


def read_all(bootstrap: str, topic: str, count: int, group: str | None = None) -> list[bytes]:
    """``count`` values of partition 0 of ``topic`` from offset 0; with ``group``, committed after reading."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group or "mm2-test-reader",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(message.value())
        if group is not None:
            consumer.commit(offsets=[TopicPartition(topic, 0, count)], asynchronous=False)
        return values
    finally:
        consumer.close()


def high_watermark(bootstrap: str, topic: str) -> int:
    """The end offset of partition 0 of ``topic`` (-1 while it does not exist)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mm2-test-watermarks"})
    try:
        if topic not in consumer.list_topics(topic, timeout=5).topics:
            return -1
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5, cached=False)[1]
    except Exception:  # KafkaException while the topic is being created: not there yet
        return -1
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str) -> int:
    """``group``'s committed offset for partition 0 of ``topic`` as the admin API lists it (-1 if none)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])
    try:
        result = admin.list_consumer_group_offsets([request])[group].result(10)
    except Exception:  # the group does not exist yet
        return -1
    return result.topic_partitions[0].offset


def mm2_config(alias: str, logway: str, kafka: str, topics: tuple[str, str], groups: str) -> dict[str, str]:
    """mm2.properties for the flows ``alias`` (Logway) -> kafka of ``topics[0]`` and kafka -> ``alias`` of
    ``topics[1]``, groups matching ``groups``; everything at one replica and one-second intervals."""
    config = {
        "clusters": f"{alias}, kafka",
        f"{alias}.bootstrap.servers": logway,
        "kafka.bootstrap.servers": kafka,
        f"{alias}->kafka.enabled": "true",
        f"{alias}->kafka.topics": topics[0],
        f"kafka->{alias}.enabled": "true",
        f"kafka->{alias}.topics": topics[1],
        "groups": groups,
        "sync.group.offsets.enabled": "true",
        "offset.lag.max": "0",
        "emit.checkpoints.interval.seconds": "1",
        "sync.group.offsets.interval.seconds": "1",
        "emit.heartbeats.interval.seconds": "1",
        "refresh.topics.interval.seconds": "1",
        "refresh.groups.interval.seconds": "1",
        "offset.flush.interval.ms": "1000",
        **PLUGIN_DISCOVERY,
    }
    for key in ("replication.factor", "offset-syncs.topic.replication.factor", "heartbeats.topic.replication.factor",
                "checkpoints.topic.replication.factor", "config.storage.replication.factor",
                "offset.storage.replication.factor", "status.storage.replication.factor"):
        config[key] = "1"
    # Each herder's worker config is its target's "<alias>." properties (MirrorMakerConfig.workerConfig), so the
    # plugin discovery setting goes there too; the top-level one covers only MirrorMaker's own config.
    for name in (alias, "kafka"):
        config.update({f"{name}.{key}": value for key, value in {**FAST_CLIENTS, **PLUGIN_DISCOVERY}.items()})
    return config


def test_mirror_maker_2_both_ways_with_translated_group_offsets(logway: tuple[str, str], reference_kafka: str,
                                                                 tmp_path: Path) -> None:
    kind, bootstrap = logway
    kafka = reference_kafka  # (not the conformance tests' shared `kafka`: this module runs beside them)
    kind = f"{kind}-{uuid.uuid4().hex[:8]}"  # names of this run's own, so `make compat` can run again
    # Names of this case's own (Kafka is shared by the cases): the Logway cluster's alias prefixes what MM2 mirrors
    # from it, and MM2's internal topics on Kafka are named after it.
    alias, orders, payments = f"logway-{kind}", f"orders-{kind}", f"payments-{kind}"
    orders_group, payments_group = f"mm2-{kind}-orders", f"mm2-{kind}-payments"
    orders_values = fill(bootstrap, orders, orders_group)
    payments_values = fill(kafka, payments, payments_group)
    mirrored_orders, mirrored_payments = f"{alias}.{orders}", f"kafka.{payments}"

    config = mm2_config(alias, bootstrap, kafka, (orders, payments), f"mm2-{kind}-.*")
    mm2 = MirrorMakerProcess(tmp_path / "mm2", config).start()
    try:
        mm2.wait_for(lambda: high_watermark(kafka, mirrored_orders) >= RECORDS, f"{mirrored_orders} filled on Kafka")
        mm2.wait_for(lambda: high_watermark(bootstrap, mirrored_payments) >= RECORDS,
                     f"{mirrored_payments} filled on Logway")
        assert read_all(kafka, mirrored_orders, RECORDS) == orders_values
        assert read_all(bootstrap, mirrored_payments, RECORDS) == payments_values

        mm2.wait_for(lambda: committed(kafka, orders_group, mirrored_orders) == RECORDS,
                     "the Logway group's offset translated onto Kafka")
        mm2.wait_for(lambda: committed(bootstrap, payments_group, mirrored_payments) == RECORDS,
                     "the Kafka group's offset translated onto Logway")
    finally:
        mm2.stop()
