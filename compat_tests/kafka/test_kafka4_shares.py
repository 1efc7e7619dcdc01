"""KIP-932 share groups end to end with Kafka 4.3.1's KafkaShareConsumer and `kafka-share-groups`, against Logway
and against Apache Kafka 4.3.1 itself (each test runs on both).

Two share consumers on one partition both receive records, every record is accepted exactly once, and a record
one of them releases is delivered again; the tool lists, describes, resets and deletes the group's offsets.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from compat_tests.kafka.cases import _find_coordinator
from compat_tests.kafka.kafka4_client import Kafka4Client
from compat_tests.kafka.sides import Side
from compat_tests.kafka.test_tools import tool

SHARE_GROUPS = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"


@pytest.fixture
def clients() -> Iterator[list[Kafka4Client]]:
    started: list[Kafka4Client] = []
    yield started
    for client in started:
        client.kill()


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _earliest(port: int, group: str) -> None:
    """share.auto.offset.reset=earliest for the group (a GROUP config resource), as kafka-configs sets it."""
    resp = Side("broker", port).call(44, 1, {"resources": [{"resource_type": 32, "resource_name": group, "configs": [
        {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]}], "validate_only": False})
    assert resp.responses[0].error_code.name == "none", resp


def _wait_assigned(port: int, group: str, members: int) -> None:
    """Until ShareGroupDescribe shows ``members`` members, each with every partition of the group's topic and
    at the group's epoch (a new member's assignment waits for group.share.assignment.interval.ms and its next
    heartbeat, on Kafka as on Logway)."""
    def settled(resp) -> bool:
        group_ = resp.groups[0]
        return group_.error_code.name == "none" and len(group_.members) == members and all(
            m.member_epoch == group_.group_epoch and m.assignment.topic_partitions for m in group_.members)

    resp = Side("broker", port).retry(77, 1, {"group_ids": [group], "include_authorized_operations": False},
                                      settled, timeout=60)
    assert settled(resp), resp


def _produce(bootstrap: str, topic: str, values: list[str], partitions: int = 1) -> None:
    """The values round-robin over the topic's first ``partitions`` partitions."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=i % partitions)
    assert producer.flush(30) == 0


def test_two_share_consumers_on_one_partition(side, clients, tmp_path) -> None:
    bootstrap, port = side
    topic, group = _name("share"), _name("share-group")
    Side("broker", port).create_topic(topic, 1)
    _earliest(port, group)

    def start(ack: str) -> Kafka4Client:
        client = Kafka4Client.start("share", bootstrap, group, topic, f"ack={ack}", log_dir=tmp_path)
        clients.append(client)
        return client

    a = start("release-first")
    _wait_assigned(port, group, 1)
    b = start("accept")
    _wait_assigned(port, group, 2)

    def delivered() -> set[str]:
        return {r.value for c in (a, b) for r in c.records()}

    def accepted() -> Counter:
        return Counter(r.value for c in (a, b) for r in c.records() if r.ack == "accept")

    produced: list[str] = []
    for round_ in range(200):  # batches of 10 until both members have received some, and at least 20 batches
        batch = [f"r{round_}-{i}" for i in range(10)]
        _produce(bootstrap, topic, batch)
        produced += batch
        a.wait_for(lambda batch=batch: delivered() >= set(batch), "the batch delivered")
        if a.records() and b.records() and round_ >= 19:
            break
    try:
        a.wait_for(lambda: set(accepted()) == set(produced), "every record accepted")
    except AssertionError as e:
        missing = sorted(set(produced) - set(accepted()))
        raise AssertionError(f"not accepted: {missing}; delivered to A: "
                             f"{[r for r in a.records() if r.value in missing]}, to B: "
                             f"{[r for r in b.records() if r.value in missing]}\nB: {b.snapshot()[-15:]}") from e
    assert a.records() and b.records(), f"both members received records; B: {b.snapshot()[-10:]} {b.log_path.read_text()[-2000:]}"
    assert max(accepted().values()) == 1, "a record was accepted twice"
    released = next(r for r in a.records() if r.ack == "release")
    again = [r for c in (a, b) for r in c.records() if r.value == released.value and r.ack == "accept"]
    assert again and again[0].delivery_count == 2  # the released record came back, delivered a second time
    a.stop()
    b.stop()


def test_kafka_share_groups_tool(side, clients, tmp_path) -> None:
    bootstrap, port = side
    topic, group = _name("share-tool"), _name("share-tool-group")
    broker = Side("broker", port)
    broker.create_topic(topic, 2)
    _earliest(port, group)
    _produce(bootstrap, topic, [f"v{i}" for i in range(10)], partitions=2)
    member = Kafka4Client.start("share", bootstrap, group, topic, log_dir=tmp_path)
    clients.append(member)
    member.wait_for(lambda: len(member.committed()) == 10, "all ten records accepted")
    listed = tool(SHARE_GROUPS, "--bootstrap-server", bootstrap, "--list").stdout
    assert group in listed.split(), listed
    members = tool(SHARE_GROUPS, "--bootstrap-server", bootstrap, "--describe", "--group", group, "--members").stdout
    assert f"{topic}:0,1" in members.replace(f"{topic}:0,{topic}:1", f"{topic}:0,1"), members
    state = tool(SHARE_GROUPS, "--bootstrap-server", bootstrap, "--describe", "--group", group, "--state").stdout
    assert "Stable" in state, state
    member.stop()
    _find_coordinator(broker, 4, group)
    offsets = tool(SHARE_GROUPS, "--bootstrap-server", bootstrap, "--describe", "--group", group).stdout
    lags = [int(line.split()[4]) for line in offsets.splitlines() if line.startswith(group)]
    assert lags == [0, 0], offsets  # everything accepted (Kafka's start offset may stay behind: KIP-1226's lag)
    tool(SHARE_GROUPS, "--bootstrap-server", bootstrap, "--reset-offsets", "--group", group, "--topic", topic,
         "--to-earliest", "--execute")
    offsets = tool(SHARE_GROUPS, "--bootstrap-server", bootstrap, "--describe", "--group", group).stdout
    rows = [line.split() for line in offsets.splitlines() if line.startswith(group)]
    assert [(r[3], r[4]) for r in rows] == [("0", "5"), ("0", "5")], offsets
    again = Kafka4Client.start("share", bootstrap, group, topic, log_dir=tmp_path)
    clients.append(again)
    again.wait_for(lambda: len(again.committed()) == 10, "the ten records again, after the reset")
    again.stop()
    tool(SHARE_GROUPS, "--bootstrap-server", bootstrap, "--delete", "--group", group)
    assert group not in tool(SHARE_GROUPS, "--bootstrap-server", bootstrap, "--list").stdout.split()
