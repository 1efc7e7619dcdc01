"""Transactions (KIP-98/360/447/890) with real clients against the in-process gateway."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from logway.coordinator.partitioning import partition_for_group
from logway.coordinator.txn_metadata import TxnState
from logway.coordinator.txn_schema import decode_key, decode_value, encode_key, encode_value
from logway.gateway.in_process import InProcessGateway
from logway.storage.config import LogConfig
from logway.storage.partition_log import PartitionLog
from logway.wire.records import build_batch, decode_batches


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)


def txn_producer(bootstrap: str, transactional_id: str, **extra) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5, **extra})
    producer.init_transactions(10)
    return producer


def consume_values(bootstrap: str, topic: str, count: int, *, isolation: str = "read_committed",
                   partitions: int = 1, idle_s: float = 1.0, timeout_s: float = 15.0) -> list[bytes]:
    """Every value a consumer with this isolation level reads from the start, waiting ``idle_s`` after ``count``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{topic}-{isolation}",
                         "isolation.level": isolation, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    quiet_until = None
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
            if len(values) >= count:
                quiet_until = quiet_until or time.monotonic() + idle_s
                if time.monotonic() >= quiet_until:
                    break
    finally:
        consumer.close()
    return values


def test_commit_and_abort_read_committed_sees_only_committed_in_order(logway, topic_name):
    create_topic(logway.bootstrap, topic_name)
    producer = txn_producer(logway.bootstrap, "tx-commit-abort")
    for round_, commit in enumerate([True, False, True]):
        producer.begin_transaction()
        for i in range(20):
            producer.produce(topic_name, f"{round_}-{i}".encode())
        producer.flush(10)
        if commit:
            producer.commit_transaction(10)
        else:
            producer.abort_transaction(10)
    expected = [f"{r}-{i}".encode() for r in (0, 2) for i in range(20)]
    assert consume_values(logway.bootstrap, topic_name, 40) == expected
    # read_uncommitted sees the aborted records too (everything but the markers).
    assert len(consume_values(logway.bootstrap, topic_name, 60, isolation="read_uncommitted")) == 60


def test_read_committed_waits_for_an_open_transaction(logway, topic_name):
    create_topic(logway.bootstrap, topic_name)
    plain = Producer({"bootstrap.servers": logway.bootstrap})
    plain.produce(topic_name, b"before")
    plain.flush(10)
    producer = txn_producer(logway.bootstrap, "tx-open")
    producer.begin_transaction()
    producer.produce(topic_name, b"in-txn")
    producer.flush(10)
    plain.produce(topic_name, b"after")
    plain.flush(10)
    # The open transaction holds the last stable offset at its first record: "after" is not readable yet.
    assert consume_values(logway.bootstrap, topic_name, 1, idle_s=1.0) == [b"before"]
    # ListOffsets LATEST for read_committed is the last stable offset; for read_uncommitted the log end.
    for isolation, latest in (("read_committed", 1), ("read_uncommitted", 3)):
        watcher = Consumer({"bootstrap.servers": logway.bootstrap, "group.id": "wm", "isolation.level": isolation})
        assert watcher.get_watermark_offsets(TopicPartition(topic_name, 0), 5) == (0, latest)
        watcher.close()
    producer.commit_transaction(10)
    assert consume_values(logway.bootstrap, topic_name, 3) == [b"before", b"in-txn", b"after"]


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(logway, topic_name):
    create_topic(logway.bootstrap, topic_name)
    zombie = txn_producer(logway.bootstrap, "tx-zombie")
    zombie.begin_transaction()
    zombie.produce(topic_name, b"zombie")
    zombie.flush(10)
    # The new instance's InitProducerId aborts the zombie's open transaction and bumps the epoch.
    fresh = txn_producer(logway.bootstrap, "tx-zombie")
    fresh.begin_transaction()
    fresh.produce(topic_name, b"fresh")
    fresh.commit_transaction(10)
    with pytest.raises(KafkaException) as raised:
        zombie.produce(topic_name, b"zombie again")
        zombie.commit_transaction(10)
    assert raised.value.args[0].fatal() or "fenced" in str(raised.value).lower()
    assert consume_values(logway.bootstrap, topic_name, 1) == [b"fresh"]


def test_consume_transform_produce_commits_offsets_with_the_output(logway, topic_name):
    source, sink, group = f"{topic_name}-in", f"{topic_name}-out", f"{topic_name}-app"
    create_topic(logway.bootstrap, source)
    create_topic(logway.bootstrap, sink)
    plain = Producer({"bootstrap.servers": logway.bootstrap})
    for i in range(30):
        plain.produce(source, str(i).encode())
    plain.flush(10)

    def run_once(n: int, commit: bool) -> None:
        consumer = Consumer({"bootstrap.servers": logway.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False, "isolation.level": "read_committed"})
        consumer.subscribe([source])
        producer = txn_producer(logway.bootstrap, f"{group}-tx")
        producer.begin_transaction()
        taken = []
        deadline = time.monotonic() + 15
        while len(taken) < n and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                taken.append(msg)
                producer.produce(sink, msg.value() + b"!")
        producer.send_offsets_to_transaction(
            [TopicPartition(source, 0, taken[-1].offset() + 1)], consumer.consumer_group_metadata(), 10)
        if commit:
            producer.commit_transaction(10)
        else:
            producer.abort_transaction(10)
        consumer.close()

    run_once(10, commit=True)
    run_once(10, commit=False)  # aborted: neither its output nor its offsets count
    run_once(20, commit=True)  # so this run starts again at offset 10
    assert consume_values(logway.bootstrap, sink, 30) == [f"{i}!".encode() for i in range(30)]
    checker = Consumer({"bootstrap.servers": logway.bootstrap, "group.id": group})
    assert checker.committed([TopicPartition(source, 0)], 10)[0].offset == 30
    checker.close()


def test_an_open_transaction_survives_a_restart_and_commits(logway, topic_name):
    create_topic(logway.bootstrap, topic_name)
    producer = txn_producer(logway.bootstrap, "tx-restart")
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic_name, str(i).encode())
    producer.flush(10)
    logway.stop()
    logway.start()
    # The coordinator reloads the Ongoing transaction and the log its open state: the producer goes on.
    producer.produce(topic_name, b"5")
    producer.commit_transaction(15)
    assert consume_values(logway.bootstrap, topic_name, 6) == [str(i).encode() for i in range(6)]


def _prepare_commit_on_disk(data_dir: Path, transactional_id: str) -> None:
    """Write PrepareCommit for an Ongoing transaction straight into __transaction_state, as a coordinator that
    crashed between persisting it and writing the markers would have left it."""
    partition = partition_for_group(transactional_id, 50)
    plog = PartitionLog(data_dir / f"__transaction_state-{partition}", "__transaction_state", partition,
                        LogConfig.from_properties({"cleanup.policy": "compact"}), clean_shutdown=True)
    try:
        last = None
        for batch in decode_batches(plog.read_bytes(0, 1 << 20)):
            for record in batch.records:
                if decode_key(record.key) == transactional_id:
                    last = decode_value(record.value)
        assert last is not None and last.state == TxnState.ONGOING
        prepared = replace(last, state=TxnState.PREPARE_COMMIT)
        plog.append(bytearray(build_batch([(encode_key(transactional_id), encode_value(prepared), ())])),
                    now_ms=int(time.time() * 1000))
    finally:
        plog.close()


def test_a_restart_after_prepare_commit_completes_the_commit(logway, topic_name):
    create_topic(logway.bootstrap, topic_name, partitions=2)
    producer = txn_producer(logway.bootstrap, "tx-mid-commit")
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic_name, str(i).encode(), partition=i % 2)
    producer.flush(10)
    logway.stop()
    _prepare_commit_on_disk(logway.data_dir, "tx-mid-commit")
    logway.start()
    # Nobody calls commit: loading the PrepareCommit state writes the markers and CompleteCommit.
    got = consume_values(logway.bootstrap, topic_name, 10, partitions=2)
    assert sorted(got, key=int) == [str(i).encode() for i in range(10)]


def test_the_coordinator_aborts_a_transaction_past_its_timeout(tmp_path, topic_name):
    gateway = InProcessGateway(tmp_path / "data", {
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"}).start()
    try:
        create_topic(gateway.bootstrap, topic_name)
        with pytest.raises(KafkaException):
            txn_producer(gateway.bootstrap, "tx-too-long", **{"transaction.timeout.ms": 900_001})
        producer = txn_producer(gateway.bootstrap, "tx-slow", **{"transaction.timeout.ms": 1000})
        producer.begin_transaction()
        producer.produce(topic_name, b"never committed")
        producer.flush(10)
        time.sleep(2)
        plain = Producer({"bootstrap.servers": gateway.bootstrap})
        plain.produce(topic_name, b"after")
        plain.flush(10)
        # The abort moved the last stable offset past the transaction: a read_committed reader goes on.
        assert consume_values(gateway.bootstrap, topic_name, 1) == [b"after"]
        with pytest.raises(KafkaException):
            producer.commit_transaction(10)
    finally:
        gateway.stop()


def test_kafka_python_transactions(logway, topic_name):
    from kafka import KafkaConsumer, KafkaProducer

    create_topic(logway.bootstrap, topic_name)
    producer = KafkaProducer(bootstrap_servers=logway.bootstrap, transactional_id="tx-kafka-python")
    producer.init_transactions()
    for commit in (True, False, True):
        producer.begin_transaction()
        for i in range(5):
            producer.send(topic_name, f"{commit}-{i}".encode())
        if commit:
            producer.commit_transaction()
        else:
            producer.abort_transaction()
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=logway.bootstrap, isolation_level="read_committed",
                             auto_offset_reset="earliest", consumer_timeout_ms=2000)
    consumer.assign([kafka_tp(topic_name, 0)])
    assert [m.value for m in consumer] == [f"True-{i}".encode() for i in range(5)] * 2
    consumer.close()


def kafka_tp(topic: str, partition: int):
    from kafka import TopicPartition as KafkaTopicPartition

    return KafkaTopicPartition(topic, partition)


def test_offsets_sent_to_a_transaction_survive_a_restart_before_the_commit(logway, topic_name):
    create_topic(logway.bootstrap, topic_name)
    group = f"{topic_name}-g"
    producer = txn_producer(logway.bootstrap, "tx-offsets-restart")
    producer.begin_transaction()
    producer.produce(topic_name, b"out")
    consumer = Consumer({"bootstrap.servers": logway.bootstrap, "group.id": group})
    producer.send_offsets_to_transaction([TopicPartition(topic_name, 0, 42)], consumer.consumer_group_metadata(), 10)
    consumer.close()
    logway.stop()
    logway.start()  # the transactional offset commit is reloaded as pending, not as committed
    # A read_uncommitted consumer (no require_stable) sees no commit yet; a read_committed one would get
    # UNSTABLE_OFFSET_COMMIT and retry until the transaction ends.
    early = Consumer({"bootstrap.servers": logway.bootstrap, "group.id": group, "isolation.level": "read_uncommitted"})
    assert early.committed([TopicPartition(topic_name, 0)], 10)[0].offset < 0
    early.close()
    producer.commit_transaction(15)
    checker = Consumer({"bootstrap.servers": logway.bootstrap, "group.id": group, "isolation.level": "read_committed"})
    assert checker.committed([TopicPartition(topic_name, 0)], 10)[0].offset == 42
    checker.close()


def test_transactional_ids_need_their_acls(tmp_path, topic_name):
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    authorizer = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
    gateway = InProcessGateway(tmp_path / "data", {**authorizer, "super.users": "User:ANONYMOUS"}).start()
    try:
        create_topic(gateway.bootstrap, topic_name)
        allow = [AclBinding(rt, name, ResourcePatternType.LITERAL, "User:ANONYMOUS", "*", op, AclPermissionType.ALLOW)
                 for rt, name, op in ((ResourceType.TOPIC, topic_name, AclOperation.WRITE),
                                      (ResourceType.TOPIC, topic_name, AclOperation.READ),
                                      (ResourceType.TRANSACTIONAL_ID, "tx-allowed", AclOperation.WRITE))]
        admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
        for future in admin.create_acls(allow).values():
            future.result(10)
        gateway.stop()
        gateway.overrides = authorizer  # ANONYMOUS is no longer a super user: the ACLs decide
        gateway.start()
        producer = txn_producer(gateway.bootstrap, "tx-allowed")
        producer.begin_transaction()
        producer.produce(topic_name, b"allowed")
        producer.commit_transaction(10)
        with pytest.raises(KafkaException) as denied:
            txn_producer(gateway.bootstrap, "tx-denied")
        assert denied.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    finally:
        gateway.stop()


def test_a_sigkilled_gateway_process_keeps_the_open_transaction(gateway_process, topic_name):
    """kill -9 between the produce and the commit: the transaction state, the records and the open transaction
    in the partition's producer state all come back, and the producer commits after the restart."""
    gw = gateway_process.start()
    create_topic(gw.bootstrap, topic_name)
    producer = txn_producer(gw.bootstrap, "tx-sigkill")
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic_name, str(i).encode())
    producer.flush(10)
    gw.stop("KILL")
    gw.start()
    # Still open after recovery: the last stable offset stays at the transaction's first record.
    for isolation, latest in (("read_committed", 0), ("read_uncommitted", 10)):
        watcher = Consumer({"bootstrap.servers": gw.bootstrap, "group.id": "wm", "isolation.level": isolation})
        assert watcher.get_watermark_offsets(TopicPartition(topic_name, 0), 10) == (0, latest)
        watcher.close()
    producer.commit_transaction(20)
    assert consume_values(gw.bootstrap, topic_name, 10) == [str(i).encode() for i in range(10)]
