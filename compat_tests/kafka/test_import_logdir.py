"""`logway import-kafka-logdir`: data written by a real Apache Kafka 4, served by Logway after the import.

Kafka is produced to with confluent-kafka (2 topics, several partitions, lz4 and uncompressed, explicit
timestamps, headers), a group commits offsets, Kafka stops cleanly; the log dir is imported (a copy) and a
Logway process started on it must return every record at its original offset with its key, value, timestamp
and headers, keep the topic ids, and show the group's committed offsets.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from compat_tests.gateway_process import GatewayProcess
from compat_tests.kafka.cluster import KafkaCluster
from compat_tests.kafka.conftest import _require_java

TOPICS = {"plain": (3, "none"), "packed": (2, "lz4")}  # name -> (partitions, producer compression)
# Topic configs live in Kafka's metadata log; retention.ms=-1 also keeps the 2023 timestamps below from expiring.
CONFIGS = {"plain": {"retention.ms": "-1"}, "packed": {"retention.ms": "-1", "max.message.bytes": "2000000"}}
PER_TOPIC = 1500
GROUP = "import-group"
BASE_TS = 1_700_000_000_000


def logway_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "logway.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).parents[2])


def produce(bootstrap: str) -> dict[tuple[str, int], list[tuple]]:
    """Every record written, by partition, as (offset, key, value, timestamp, headers) from the delivery reports."""
    written: dict[tuple[str, int], list[tuple]] = {}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(t, p, 1, config=CONFIGS[t]) for t, (p, _) in TOPICS.items()]).values():
        fut.result(60)
    for topic, (_, compression) in TOPICS.items():
        producer = Producer({"bootstrap.servers": bootstrap, "compression.type": compression, "linger.ms": 20,
                             "enable.idempotence": True})

        def delivered(err, msg, headers):  # a delivery report carries no headers: the ones sent are kept
            assert err is None, err
            written.setdefault((msg.topic(), msg.partition()), []).append(
                (msg.offset(), msg.key(), msg.value(), msg.timestamp()[1], headers))

        for i in range(PER_TOPIC):
            headers = [("h", str(i).encode())] if i % 3 else None
            producer.produce(topic, key=f"k{i % 97}".encode(), value=f"{topic} value {i} ".encode() * (1 + i % 7),
                             timestamp=BASE_TS + i * 1000, headers=headers,
                             on_delivery=lambda err, msg, h=headers: delivered(err, msg, h))
            if i % 500 == 0:
                producer.poll(0)
        assert producer.flush(60) == 0
    for records in written.values():
        records.sort()
    return written


def commit(bootstrap: str, offsets: dict[tuple[str, int], int]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def consume_all(bootstrap: str, ends: dict[tuple[str, int], int]) -> dict[tuple[str, int], list[tuple]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}",
                         "enable.auto.commit": False})
    got: dict[tuple[str, int], list[tuple]] = {tp: [] for tp in ends}
    try:
        consumer.assign([TopicPartition(t, p, 0) for (t, p) in ends])
        want = sum(ends.values())
        for _ in range(400):
            for msg in consumer.consume(1000, timeout=0.5):
                assert msg.error() is None, msg.error()
                got[(msg.topic(), msg.partition())].append(
                    (msg.offset(), msg.key(), msg.value(), msg.timestamp()[1], msg.headers()))
            if sum(map(len, got.values())) >= want:
                break
    finally:
        consumer.close()
    return got


def serve_and_check(data_dir: Path, written: dict, committed: dict, topic_ids: dict) -> None:
    """Start Logway on an imported dir: every record, the topic ids and the group's committed offsets."""
    logway = GatewayProcess(data_dir, extra_args=("--override", "offsets.topic.num.partitions=3")).start()
    try:
        ends = {tp: len(records) for tp, records in written.items()}
        assert consume_all(logway.bootstrap, ends) == written
        admin = AdminClient({"bootstrap.servers": logway.bootstrap})
        for name, d in admin.describe_topics(TopicCollection(list(TOPICS))).items():
            assert str(d.result(30).topic_id) == topic_ids[name]
        for resource, fut in admin.describe_configs([ConfigResource("TOPIC", t) for t in TOPICS]).items():
            entries = fut.result(30)
            assert {k: entries[k].value for k in CONFIGS[resource.name]} == CONFIGS[resource.name]
        group = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP)])[GROUP].result(30)
        assert {(tp.topic, tp.partition): tp.offset for tp in group.topic_partitions} == committed
    finally:
        logway.stop()


def test_logway_serves_a_stopped_kafka_log_dir(tmp_path: Path) -> None:
    _require_java()
    kafka = KafkaCluster(tmp_path / "kafka", nodes=1).start()
    try:
        written = produce(kafka.bootstrap)
        committed = {tp: len(records) // 2 for tp, records in written.items()}
        commit(kafka.bootstrap, committed)
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        described = admin.describe_topics(TopicCollection(list(TOPICS)))
        topic_ids = {name: str(fut.result(30).topic_id) for name, fut in described.items()}
    finally:
        kafka.stop()
    src, dest = kafka.nodes[0].data_dir, tmp_path / "logway-data"

    done = logway_cli("import-kafka-logdir", str(src), str(dest))
    assert done.returncode == 0, done.stderr
    assert "skipped __cluster_metadata-0" in done.stdout
    assert "topic packed: configs max.message.bytes=2000000, retention.ms=-1" in done.stdout
    assert "offsets.topic.num.partitions=3" in done.stdout  # the reference Kafka runs with 3 (COMMON_CONFIG)
    assert not (dest / "__cluster_metadata-0").exists() and (src / "__cluster_metadata-0").exists()

    serve_and_check(dest, written, committed, topic_ids)

    # In place: the Kafka dir itself becomes Logway's (a copy of it here, so the copy above stays comparable).
    adopted = tmp_path / "adopted"
    shutil.copytree(src, adopted)
    done = logway_cli("import-kafka-logdir", str(adopted), "--in-place")
    assert done.returncode == 0, done.stderr
    assert (adopted / ".kafka-only" / "__cluster_metadata-0").is_dir()
    assert not (adopted / "__cluster_metadata-0").exists() and not (adopted / "meta.properties").exists()
    serve_and_check(adopted, written, committed, topic_ids)


def test_a_directory_that_is_not_a_kafka_log_dir_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    done = logway_cli("import-kafka-logdir", str(tmp_path / "src"), str(tmp_path / "dest"))
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"logway: import-kafka-logdir: {tmp_path / 'src'}: not a Kafka log dir (no meta.properties)"]
    assert not (tmp_path / "dest").exists()


def test_a_kafka_log_dir_still_locked_by_its_broker_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "meta.properties").write_text("version=1\nnode.id=1\ncluster.id=abc\n")
    with open(src / ".lock", "w") as lock:
        fcntl.lockf(lock, fcntl.LOCK_EX)  # as a running Kafka holds it (FileChannel.tryLock)
        done = logway_cli("import-kafka-logdir", str(src), str(tmp_path / "dest"))
    assert done.returncode == 1
    assert done.stderr.strip() == f"logway: import-kafka-logdir: {src}: locked by a running broker; stop Kafka first"
    assert not (tmp_path / "dest").exists()
