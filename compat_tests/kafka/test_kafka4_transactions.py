"""Transaction version 2 (KIP-890 part 2) with Kafka 4.3.1's own KafkaProducer, against Logway and against Apache
Kafka 4.3.1 itself (each test runs on both).

Both brokers finalize transaction.version 2, so the 4.3.1 producer adds partitions through Produce v12 and the
offsets partition through TxnOffsetCommit v5 (no AddPartitionsToTxn / AddOffsetsToTxn), and every EndTxn v5
bumps its epoch: after three transactions DescribeTransactions shows epoch 3 on both (transaction version 1
would leave it at 0). A read_committed consumer sees only the committed transactions' records, and the group's
offset is the one committed with the last committed transaction.
"""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, TopicPartition

from compat_tests.kafka.kafka4_client import Kafka4Client
from compat_tests.kafka.sides import Side


def _read_committed(bootstrap: str, topic: str, group: str) -> tuple[list[str], int]:
    """Every record a read_committed consumer sees in partition 0, and ``group``'s committed offset there."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{group}-reader", "isolation.level":
                         "read_committed", "enable.auto.commit": False, "enable.partition.eof": True,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values = []
        while True:
            message = consumer.poll(30)
            assert message is not None, "no end of partition in 30 s"
            if message.error():
                break  # the end of the partition (after the last stable offset)
            values.append(message.value().decode())
        offsets = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        try:
            committed = offsets.committed([TopicPartition(topic, 0)], timeout=30)[0].offset
        finally:
            offsets.close()
        return values, committed
    finally:
        consumer.close()


def test_transactions_bump_the_epoch_and_commit_offsets_without_add_requests(side, tmp_path) -> None:
    bootstrap, port = side
    topic, tid, group = (f"{p}-{uuid.uuid4().hex[:8]}" for p in ("tv2", "tv2-producer", "tv2-group"))
    broker = Side("broker", port)
    broker.create_topic(topic, 1)
    producer = Kafka4Client.start("txn", bootstrap, tid, topic, "plan=commit,abort,commit", f"offsets-group={group}",
                                  "count=3", log_dir=tmp_path)
    try:
        assert producer.proc.wait(120) == 0, producer.log_path.read_text()[-3000:]
    finally:
        producer.kill()
    assert [line for line in producer.snapshot() if line.split()[0] in ("COMMITTED", "ABORTED")] == [
        "COMMITTED 0", "ABORTED 1", "COMMITTED 2"]
    described = broker.call(65, 0, {"transactional_ids": [tid]}).transaction_states[0]
    assert (described.error_code.name, described.transaction_state, described.producer_epoch) == (
        "none", "CompleteCommit", 3)  # InitProducerId gave epoch 0; each of the three ends bumped it
    values, committed = _read_committed(bootstrap, topic, group)
    assert values == ["0-0", "0-1", "0-2", "2-0", "2-1", "2-2"]
    assert committed == 3  # the offset committed with step 2; step 1's was aborted with its records


def test_transaction_version_1_keeps_the_epoch(tmp_path) -> None:
    """With transaction.version=1 finalized the same producer runs transaction version 1 (AddPartitionsToTxn,
    AddOffsetsToTxn, EndTxn v4): the epoch stays where InitProducerId put it."""
    from compat_tests.gateway_process import GatewayProcess

    gw = GatewayProcess(tmp_path / "data", extra_args=("--override", "transaction.version=1")).start()
    try:
        topic, tid, group = "tv1", "tv1-producer", "tv1-group"
        broker = Side("broker", gw.port)
        broker.create_topic(topic, 1)
        producer = Kafka4Client.start("txn", gw.bootstrap, tid, topic, "plan=commit,abort,commit",
                                      f"offsets-group={group}", log_dir=tmp_path)
        try:
            assert producer.proc.wait(120) == 0, producer.log_path.read_text()[-3000:]
        finally:
            producer.kill()
        described = broker.call(65, 0, {"transactional_ids": [tid]}).transaction_states[0]
        assert (described.transaction_state, described.producer_epoch) == ("CompleteCommit", 0)
        assert _read_committed(gw.bootstrap, topic, group) == (["0-0", "0-1", "0-2", "2-0", "2-1", "2-2"], 3)
    finally:
        gw.stop()


_VOLATILE = ("producerId", "previousProducerId", "nextProducerId", "transactionLastUpdateTimestampMs",
             "transactionStartTimestampMs")


def _mask(value):
    if isinstance(value, dict) and "transactionPartitions" in value and value["transactionPartitions"]:
        value = {**value, "transactionPartitions": sorted(value["transactionPartitions"], key=lambda t: t["topic"])}
    if isinstance(value, dict):
        return {k: (f"<{k}>" if k in _VOLATILE and v != -1 else _mask(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v) for v in value]
    return value


def _transaction_log(files: list[str], tid: str) -> list[tuple]:
    """(key, value) of ``tid``'s __transaction_state records as Kafka's DumpLogSegments decodes them."""
    import json
    import re

    from compat_tests.kafka.cluster import java

    out = java("org.apache.kafka.tools.DumpLogSegments", "--transaction-log-decoder", "--files", ",".join(files))
    assert out.returncode == 0 and "Exception" not in out.stdout, out.stdout[-3000:] + out.stderr[-3000:]
    records = []
    for match in re.finditer(r"key: (\{.*?\}) payload: (\{.*\}|null)$", out.stdout, re.MULTILINE):
        key, payload = json.loads(match.group(1)), json.loads(match.group(2))
        if key.get("data", {}).get("transactionalId") == tid:
            records.append((key, _mask(payload)))
    return records


def test_kafka_dump_log_reads_transaction_version_2_records_as_kafka_writes_them(kafka, logway_ref, tmp_path):
    """The same producer run (commit with offsets, then abort) on both brokers: Kafka's own decoder prints the same
    __transaction_state records (schema version 1, ClientTransactionVersion 2, the epochs) for both."""
    decoded = {}
    topic = f"tv2-dump-{uuid.uuid4().hex[:6]}"
    tid = f"{topic}-producer"
    for name, broker, data_dirs in (("kafka", kafka, [n.data_dir for n in kafka.nodes]),
                                    ("logway", logway_ref, [logway_ref.data_dir])):
        Side(name, broker.port).create_topic(topic, 1)
        producer = Kafka4Client.start("txn", broker.bootstrap, tid, topic, "plan=commit,abort",
                                      f"offsets-group={topic}-g", log_dir=tmp_path)
        try:
            assert producer.proc.wait(120) == 0, producer.log_path.read_text()[-3000:]
        finally:
            producer.kill()
        files = sorted(str(f) for d in data_dirs for f in d.glob("__transaction_state-*/*.log"))
        decoded[name] = _transaction_log(files, tid)
    for got, expected in zip(decoded["logway"], decoded["kafka"], strict=False):
        assert got == expected
    assert len(decoded["logway"]) == len(decoded["kafka"]), (decoded["logway"], decoded["kafka"])
