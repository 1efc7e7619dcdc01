"""`logway topics|groups|configs` against Apache Kafka itself: they are Kafka clients, not Logway's private tools.

The group's offsets and lag are compared with what Kafka's own kafka-consumer-groups.sh --describe prints for
the same group on the same broker.
"""

from __future__ import annotations

import contextlib
import io
import json
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import CommitFailedError, RebalanceInProgressError
from kafka.structs import OffsetAndMetadata

from compat_tests.kafka.cluster import java
from logway.cli.main import main

GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


def _logway(*args: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    assert code == 0, f"logway {' '.join(args)}: {err.getvalue()}"
    return out.getvalue()


def _kafka_describe(bootstrap: str, group: str) -> dict[int, tuple[str, str, str]]:
    """partition -> (CURRENT-OFFSET, LOG-END-OFFSET, LAG) as kafka-consumer-groups.sh --describe prints them."""
    proc = java(GROUPS, "--bootstrap-server", bootstrap, "--describe", "--group", group)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line.split() for line in proc.stdout.splitlines() if line.startswith(group + " ")]
    return {int(r[2]): (r[3], r[4], r[5]) for r in rows}


def test_admin_tools_against_apache_kafka(kafka) -> None:
    server = ("--bootstrap-server", kafka.bootstrap)
    topic, group = "logway-cli-on-kafka", "logway-cli-group"
    assert _logway("topics", "create", *server, "--topic", topic, "--partitions", "3", "--replication-factor", "1",
                   "--config", "retention.ms=3600000").strip() == f"Created topic {topic}."
    [described] = json.loads(_logway("topics", "describe", *server, "--topic", topic, "--output", "json"))
    assert described["partition_count"] == 3 and described["configs"] == {"retention.ms": "3600000"}
    _logway("configs", "alter", *server, "--entity-type", "topics", "--entity-name", topic,
            "--add-config", "cleanup.policy=[compact,delete]", "--delete-config", "retention.ms")
    configs = json.loads(_logway("configs", "describe", *server, "--entity-type", "topics", "--entity-name", topic,
                                 "--output", "json"))["configs"]
    assert [(c["name"], c["value"]) for c in configs] == [("cleanup.policy", "compact,delete")]

    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap)
    for i in range(30):
        producer.send(topic, key=b"k%d" % i, value=b"v", partition=i % 3)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=group, enable_auto_commit=False)
    # The topic's partitions known before joining: kafka-python's assignor, run without them, can hand out an
    # empty assignment it keeps for longer than this test waits (seen with a topic created just before).
    consumer.partitions_for_topic(topic)
    consumer.subscribe([topic])
    deadline = time.monotonic() + 60
    while True:  # commit once the consumer holds its assignment (a rebalance still settling is waited out)
        consumer.poll(100)
        try:
            if consumer.assignment():
                consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(4, "", -1),
                                 TopicPartition(topic, 1): OffsetAndMetadata(10, "", -1)})
                break
        except (RebalanceInProgressError, CommitFailedError):
            pass
        assert time.monotonic() < deadline, "the consumer did not join its group within 60 s"
    consumer.close()

    ours = json.loads(_logway("groups", "describe", *server, "--group", group, "--output", "json"))[0]
    assert ours["state"] == "Empty"
    mine = {r["partition"]: tuple("-" if v is None else str(v) for v in (r["current_offset"], r["log_end_offset"],
                                                                          r["lag"])) for r in ours["rows"]}
    assert mine == _kafka_describe(kafka.bootstrap, group) == {0: ("4", "10", "6"), 1: ("10", "10", "0")}

    _logway("groups", "reset-offsets", *server, "--group", group, "--all-topics", "--to-earliest", "--execute")
    assert _kafka_describe(kafka.bootstrap, group) == {0: ("0", "10", "10"), 1: ("0", "10", "10")}
    _logway("groups", "delete", *server, "--group", group)
    _logway("topics", "delete", *server, "--topic", topic)
    assert topic not in _logway("topics", "list", *server).split()
