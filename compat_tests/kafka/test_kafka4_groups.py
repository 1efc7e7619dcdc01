"""KIP-848 consumer groups end to end, with Kafka 4.3.1's Java client and librdkafka, against Logway and against
Apache Kafka 4.3.1 itself (each test runs on both: what passes on Kafka must pass on Logway).

Two ``group.protocol=consumer`` consumers split a 4-partition topic and read every record once; a third resumes
at their committed offsets; a regex subscription picks up a topic created after it joined; Kafka's
``kafka-consumer-groups`` describes the group.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer

from compat_tests.kafka.cases import _find_coordinator
from compat_tests.kafka.cluster import java
from compat_tests.kafka.kafka4_client import Kafka4Client
from compat_tests.kafka.sides import Side
from compat_tests.kafka.test_tools import GROUPS, tool

CONSUMER_PROTOCOL = "group.protocol=consumer"


@pytest.fixture
def clients(tmp_path) -> Iterator[list[Kafka4Client]]:
    started: list[Kafka4Client] = []
    yield started
    for client in started:
        client.kill()


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _produce(bootstrap: str, topic: str, values: list[str], partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=i % partitions)
    assert producer.flush(30) == 0


def _start(clients: list, bootstrap: str, group: str, topic: str, tmp_path, *config: str) -> Kafka4Client:
    client = Kafka4Client.start("consume", bootstrap, group, topic, CONSUMER_PROTOCOL, *config, log_dir=tmp_path)
    clients.append(client)
    return client


def test_two_java_consumers_split_a_topic_and_a_third_resumes(side, clients, tmp_path) -> None:
    bootstrap, port = side
    topic, group = _name("kip848"), _name("kip848-group")
    Side("broker", port).create_topic(topic, 4)
    all_partitions = {f"{topic}-{p}" for p in range(4)}
    a = _start(clients, bootstrap, group, topic, tmp_path)
    b = _start(clients, bootstrap, group, topic, tmp_path)
    a.wait_for(lambda: a.assignment() | b.assignment() == all_partitions and len(a.assignment()) == 2
               and len(b.assignment()) == 2, "the two members own two partitions each")
    assert not a.assignment() & b.assignment()
    first = [f"first-{i}" for i in range(200)]
    _produce(bootstrap, topic, first, 4)
    a.wait_for(lambda: len(a.records()) + len(b.records()) >= 200, "200 records read between the two")
    got = a.records() + b.records()
    assert sorted(r.value for r in got) == sorted(first)  # every record once
    assert {f"{r.topic}-{r.partition}" for r in a.records()} <= a.assignment()
    a.stop()
    b.stop()
    second = [f"second-{i}" for i in range(40)]
    _produce(bootstrap, topic, second, 4)
    c = _start(clients, bootstrap, group, topic, tmp_path)
    c.wait_for(lambda: len(c.records()) >= 40, "the third member read the 40 new records")
    assert sorted(r.value for r in c.records()) == sorted(second)  # it resumed at the committed offsets
    c.stop()


def test_regex_subscription_picks_up_a_new_topic(side, clients, tmp_path) -> None:
    bootstrap, port = side
    stem = _name("kip848re")
    broker = Side("broker", port)
    broker.create_topic(f"{stem}-a", 2)
    consumer = _start(clients, bootstrap, _name("kip848re-group"), f"/{stem}-.*/", tmp_path)
    consumer.wait_for(lambda: consumer.assignment() == {f"{stem}-a-0", f"{stem}-a-1"}, "the regex matched topic a")
    broker.create_topic(f"{stem}-b", 1)
    _produce(bootstrap, f"{stem}-b", ["in-b"], 1)
    consumer.wait_for(lambda: any(r.value == "in-b" for r in consumer.records()), "topic b, created later, is read",
                      timeout=120)
    consumer.stop()


def test_librdkafka_consumer_protocol(side, tmp_path) -> None:
    """confluent-kafka (librdkafka) with group.protocol=consumer: two consumers split the topic, commits stick."""
    bootstrap, port = side
    topic, group = _name("kip848rd"), _name("kip848rd-group")
    Side("broker", port).create_topic(topic, 4)
    values = [f"v{i}" for i in range(100)]
    _produce(bootstrap, topic, values, 4)
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": False}
    consumers = [Consumer(conf), Consumer(conf)]
    seen: list[str] = []
    try:
        for c in consumers:
            c.subscribe([topic])
        deadline = time.monotonic() + 90
        while len(seen) < 100 and time.monotonic() < deadline:
            for c in consumers:
                for message in c.consume(50, timeout=0.2):
                    assert message.error() is None, message.error()
                    seen.append(message.value().decode())
                    c.commit(message=message, asynchronous=False)
        assert sorted(seen) == sorted(values)
    finally:
        for c in consumers:
            c.close()
    third = Consumer(conf)
    try:
        third.subscribe([topic])
        _produce(bootstrap, topic, ["late"], 4)
        late: list[str] = []
        deadline = time.monotonic() + 60
        while not late and time.monotonic() < deadline:
            late += [m.value().decode() for m in third.consume(10, timeout=0.5) if m.error() is None]
        assert late == ["late"]  # nothing of the first 100 again: the commits were kept
    finally:
        third.close()


def test_kafka_consumer_groups_describes_a_consumer_protocol_group(side, clients, tmp_path) -> None:
    bootstrap, port = side
    topic, group = _name("kip848cli"), _name("kip848cli-group")
    Side("broker", port).create_topic(topic, 2)
    member = _start(clients, bootstrap, group, topic, tmp_path)
    member.wait_for(lambda: len(member.assignment()) == 2, "the member owns both partitions")
    members = tool(GROUPS, "--bootstrap-server", bootstrap, "--describe", "--group", group, "--members",
                   "--verbose").stdout
    # KIP-848 columns: the member's epoch, its assignment and its target (both partitions, at epoch 2).
    row = next(line.split() for line in members.splitlines() if line.startswith(group))
    assert row[-4:] == ["2", f"{topic}:0,1", "2", f"{topic}:0,1"], members
    listed = tool(GROUPS, "--bootstrap-server", bootstrap, "--list", "--type").stdout
    assert any(group in line and "Consumer" in line for line in listed.splitlines()), listed
    state = tool(GROUPS, "--bootstrap-server", bootstrap, "--describe", "--group", group, "--state").stdout
    assert "uniform" in state and "Stable" in state, state  # the server assignor and the group state
    member.stop()


DUMP_LOG = "org.apache.kafka.tools.DumpLogSegments"
# Values that differ between any two brokers: when something happened, where the client was, the topic's id.
_VOLATILE = ("assignmentTimestamp", "timestamp", "metadataHash", "clientHost", "topicId", "memberId")


def _decoded_records(log_files: list[str], group: str) -> list[tuple]:
    """(record type, key, value) of ``group``'s records as Kafka's DumpLogSegments --offsets-decoder prints them."""
    out = java(DUMP_LOG, "--offsets-decoder", "--files", ",".join(log_files))
    assert out.returncode == 0 and "Exception" not in out.stdout, out.stdout[-3000:] + out.stderr[-3000:]
    records = []
    for match in re.finditer(r"key: (\{.*?\}) payload: (\{.*\}|null)$", out.stdout, re.MULTILINE):
        key, payload = json.loads(match.group(1)), json.loads(match.group(2))
        if key.get("data", {}).get("groupId") != group:
            continue
        records.append((key["type"], _mask(key["data"]), _mask(payload)))
    return records


def _mask(value):
    if isinstance(value, dict):
        return {k: ("<set>" if k in _VOLATILE else _mask(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v) for v in value]
    return value


def test_kafka_dump_log_reads_consumer_group_records_as_kafka_writes_them(kafka, logway_ref) -> None:
    """The same join, heartbeat and leave on both brokers; Kafka's own decoder prints the same records for both."""
    group = _name("kip848dump")
    decoded = {}
    for name, broker, data_dirs in (("kafka", kafka, [n.data_dir for n in kafka.nodes]),
                                    ("logway", logway_ref, [logway_ref.data_dir])):
        side = Side(name, broker.port)
        side.create_topic(group, 2)
        _find_coordinator(side, 4, group)
        member = "member-1"
        joined = side.call(68, 1, {"group_id": group, "member_id": member, "member_epoch": 0, "rebalance_timeout": 30_000,
                                   "subscribed_topic_names": [group], "topic_partitions": []})
        assert joined.error_code.name == "none"
        side.call(68, 1, {"group_id": group, "member_id": member, "member_epoch": -1, "topic_partitions": None})
        files = sorted(str(f) for d in data_dirs for f in d.glob("__consumer_offsets-*/*.log"))
        decoded[name] = _decoded_records(files, group)
    for got, expected in zip(decoded["logway"], decoded["kafka"], strict=False):
        assert got == expected
    assert len(decoded["logway"]) == len(decoded["kafka"]), (decoded["logway"], decoded["kafka"])
    assert [r[0] for r in decoded["logway"]][:5] == ["5", "3", "7", "6", "8"]


def _covered(clients_: list[Kafka4Client], partitions: set[str]) -> bool:
    owned = [c.assignment() for c in clients_]
    union = set().union(*owned)
    return union == partitions and sum(len(o) for o in owned) == len(partitions) and all(owned)


def test_rolling_upgrade_to_the_consumer_protocol_and_back(side, clients, tmp_path) -> None:
    """Classic members are replaced one by one by KIP-848 members (the group converts when the first arrives), then
    back: the group stays whole, every record is read once, and it ends a classic group."""
    bootstrap, port = side
    topic, group = _name("kip848mig"), _name("kip848mig-group")
    Side("broker", port).create_topic(topic, 4)
    partitions = {f"{topic}-{p}" for p in range(4)}
    classic = ("group.protocol=classic", "heartbeat.interval.ms=500")

    def start(*config: str) -> Kafka4Client:
        client = Kafka4Client.start("consume", bootstrap, group, topic, *config, log_dir=tmp_path)
        clients.append(client)
        return client

    a, b = start(*classic), start(*classic)
    a.wait_for(lambda: _covered([a, b], partitions), "two classic members share the topic")
    a.stop()
    c = start(CONSUMER_PROTOCOL)  # the upgrade
    c.wait_for(lambda: _covered([b, c], partitions), "a classic and a consumer-protocol member share the topic")
    b.stop()
    d = start(CONSUMER_PROTOCOL)
    d.wait_for(lambda: _covered([c, d], partitions), "two consumer-protocol members share the topic")
    values = [f"m{i}" for i in range(80)]
    _produce(bootstrap, topic, values, 4)
    d.wait_for(lambda: len(c.records()) + len(d.records()) >= 80, "the records read")
    e = start(*classic)
    e.wait_for(lambda: _covered([c, d, e], partitions) or _covered([c, e], partitions) or _covered([d, e], partitions),
               "a classic member joins the consumer group")
    c.stop()
    d.stop()  # the last consumer-protocol member leaves: the downgrade
    e.wait_for(lambda: e.assignment() == partitions, "the classic member owns every partition")
    more = [f"n{i}" for i in range(20)]
    _produce(bootstrap, topic, more, 4)
    e.wait_for(lambda: sum(r.value.startswith("n") for r in e.records()) >= 20, "the new records read")
    everything = [r.value for client in (a, b, c, d, e) for r in client.records()]
    assert sorted(everything) == sorted(values + more)  # every record once, across all the changes
    listed = tool(GROUPS, "--bootstrap-server", bootstrap, "--list", "--type").stdout
    assert any(group in line and "Classic" in line for line in listed.splitlines()), listed
    e.stop()
