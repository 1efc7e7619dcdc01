"""DescribeLogDirs, DescribeTopicPartitions, ElectLeaders and the partition reassignment APIs through kafka-python's
KafkaAdminClient and confluent-kafka's AdminClient, checked against what the broker holds (the answers were
compared with Apache Kafka's by compat_tests/kafka)."""

from __future__ import annotations

import socket

import pytest
from confluent_kafka import ElectionType, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka.errors import InvalidReplicationAssignmentError
from kafka.structs import TopicPartition
from raw_requests import exchange

from logway.gateway.in_process import InProcessGateway


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    gw = InProcessGateway(tmp_path_factory.mktemp("admin-apis") / "data", {"node.id": "1"}).start()
    try:
        yield gw
    finally:
        gw.stop()


@pytest.fixture
def admin(gateway):
    client = KafkaAdminClient(bootstrap_servers=gateway.bootstrap, request_timeout_ms=10000)
    try:
        yield client
    finally:
        client.close()


def _topic(gateway, name: str, partitions: int, records: int = 0) -> None:
    confluent = AdminClient({"bootstrap.servers": gateway.bootstrap})
    confluent.create_topics([NewTopic(name, partitions, 1)])[name].result(10)
    producer = Producer({"bootstrap.servers": gateway.bootstrap, "linger.ms": 0})
    for i in range(records):
        producer.produce(name, value=b"x" * 100, partition=i % partitions)
    assert producer.flush(10) == 0


def test_describe_log_dirs_gives_each_partitions_bytes_on_disk(gateway, admin, topic_name):
    _topic(gateway, topic_name, 2, records=20)
    [broker] = admin.describe_log_dirs()
    [log_dir] = broker["log_dirs"]
    assert (broker["broker"], log_dir["error_code"], log_dir["log_dir"]) == (1, 0, str(gateway.data_dir.resolve()))
    [topic] = [t for t in log_dir["topics"] if t["name"] == topic_name]
    on_disk = {p: sum(f.stat().st_size for f in (gateway.data_dir / f"{topic_name}-{p}").glob("*.log")) for p in (0, 1)}
    assert {p["partition_index"]: p["partition_size"] for p in topic["partitions"]} == on_disk
    assert all(size > 10 * 100 for size in on_disk.values())
    assert all(p["offset_lag"] == 0 and not p["is_future_key"] for p in topic["partitions"])


def test_describe_topic_partitions_pages_by_partition_limit(gateway, admin, topic_name):
    _topic(gateway, topic_name + "-a", 3)
    _topic(gateway, topic_name + "-b", 2)
    names = [topic_name + "-b", topic_name + "-a"]
    seen, cursor = [], None
    for _ in range(5):
        page = admin.describe_topic_partitions(names, response_partition_limit=2, cursor=cursor)
        seen += [(t["name"], p["partition_index"], p["leader_id"]) for t in page["topics"] for p in t["partitions"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [(topic_name + "-a", 0, 1), (topic_name + "-a", 1, 1), (topic_name + "-a", 2, 1),
                    (topic_name + "-b", 0, 1), (topic_name + "-b", 1, 1)]
    [unknown] = admin.describe_topic_partitions([topic_name + "-none"])["topics"]
    assert unknown["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION


def test_leader_election_is_never_needed_and_no_reassignment_is_in_progress(gateway, admin, topic_name):
    _topic(gateway, topic_name, 2)
    response = admin.elect_leaders(0, {topic_name: [0, 1]}, raise_errors=False)
    assert sorted((p.partition_id, p.error_code) for r in response.replica_election_results
                  for p in r.partition_result) == [(0, 84), (1, 84)]  # ELECTION_NOT_NEEDED
    confluent = AdminClient({"bootstrap.servers": gateway.bootstrap})
    result = confluent.elect_leaders(ElectionType.PREFERRED, [CTopicPartition(topic_name, 0)]).result(10)
    assert [error.name() for error in result.values()] == ["ELECTION_NOT_NEEDED"]

    assert admin.list_partition_reassignments() == {}
    assert admin.alter_partition_reassignments({TopicPartition(topic_name, 0): [1]}) == {
        TopicPartition(topic_name, 0): None}
    refused = admin.alter_partition_reassignments({TopicPartition(topic_name, 1): [2]})
    assert refused[TopicPartition(topic_name, 1)] is InvalidReplicationAssignmentError
    assert admin.list_partition_reassignments() == {}


def test_confluent_describe_topics_lists_partitions_leader_and_isr(gateway, topic_name):
    """confluent-kafka's describe_topics: partitions, leader and ISR as the broker reports them."""
    _topic(gateway, topic_name, 3)
    from confluent_kafka import TopicCollection

    confluent = AdminClient({"bootstrap.servers": gateway.bootstrap})
    description = confluent.describe_topics(TopicCollection([topic_name]))[topic_name].result(10)
    assert [(p.id, p.leader.id, [r.id for r in p.isr]) for p in description.partitions] == [
        (0, 1, [1]), (1, 1, [1]), (2, 1, [1])]


def test_without_acls_the_admin_apis_answer_kafkas_authorization_errors(tmp_path):
    """StandardAuthorizer, no ACLs: CLUSTER DESCRIBE / ALTER are needed as KafkaApis checks them, and a topic the
    principal may not DESCRIBE is named with TOPIC_AUTHORIZATION_FAILED (whether it exists or not)."""
    gw = InProcessGateway(tmp_path / "data", {
        "node.id": "1", "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}).start()
    try:
        with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as s:
            log_dirs = exchange(s, 35, 4, {"topics": None})
            elect = exchange(s, 43, 2, {"election_type": 0, "timeout": 1000,
                                        "topic_partitions": [{"topic": "secret", "partitions": [0]}]})
            listed = exchange(s, 46, 0, {"timeout": 1000, "topics": None})
            altered = exchange(s, 45, 0, {"timeout": 1000, "topics": [
                {"name": "secret", "partitions": [{"partition_index": 0, "replicas": [1]}]}]})
            described = exchange(s, 75, 0, {"topics": [{"name": "secret"}], "response_partition_limit": 10,
                                            "cursor": None})
    finally:
        gw.stop()
    assert (log_dirs.error_code.name, log_dirs.results) == ("cluster_authorization_failed", ())
    assert elect.error_code.name == "cluster_authorization_failed"
    assert [p.error_code.name for r in elect.replica_election_results for p in r.partition_result] == [
        "cluster_authorization_failed"]
    assert listed.error_code.name == "cluster_authorization_failed"
    assert altered.error_code.name == "cluster_authorization_failed"
    assert [(t.name, t.error_code.name, t.partitions) for t in described.topics] == [
        ("secret", "topic_authorization_failed", ())]
