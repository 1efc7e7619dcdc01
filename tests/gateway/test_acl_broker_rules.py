"""The broker under ACLs where Kafka's answer needs what only the broker knows (its topics, ids, partitions and
auto-creation), the ACL rules being server/security/request_acls.py's, shared with the proxy: per-topic
auto-creation in Metadata, DeleteTopics by id, AddPartitionsToTxn's unknown partitions beside a denied topic,
DescribeTopicPartitions listings paged over what the principal may see, a follower's Fetch."""

from __future__ import annotations

import datetime
import socket
import uuid

import pytest
from raw_requests import exchange

from logway.gateway.in_process import InProcessGateway
from logway.server.security.authorizer import AclBinding, Operation, PatternType, Permission, ResourceType
from logway.wire.errors import ErrorCode as E

AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
ANON = "User:ANONYMOUS"
S = datetime.timedelta(seconds=10)


def grant(gateway: InProcessGateway, resource: ResourceType, name: str, *operations: Operation,
          pattern: PatternType = PatternType.PREFIXED) -> None:
    for operation in operations:
        gateway.broker.realm.authorizer.add(AclBinding(int(resource), name, int(pattern), ANON, "*", int(operation),
                                                       int(Permission.ALLOW)))


@pytest.fixture
def gateway(tmp_path):
    gw = InProcessGateway(tmp_path / "data", AUTHORIZER).start()
    yield gw
    gw.stop()


def ask(gateway: InProcessGateway, api_key: int, version: int, data: dict):
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as s:
        return exchange(s, api_key, version, data)


def test_metadata_creates_the_topics_it_may_create_and_refuses_the_others(gateway):
    grant(gateway, ResourceType.TOPIC, "mk-", Operation.DESCRIBE)
    grant(gateway, ResourceType.TOPIC, "mk-ok", Operation.CREATE)
    for version in (3, 12):  # v3 cannot turn auto-creation off: the broker still creates per topic
        names = [f"mk-ok-{version}", f"mk-no-{version}"]
        response = ask(gateway, 3, version, {"topics": [{"name": n, "topic_id": None} for n in names],
                                             "allow_auto_topic_creation": True,
                                             "include_topic_authorized_operations": False})
        assert {t.name: t.error_code for t in response.topics} == {names[0]: E.none,
                                                                   names[1]: E.topic_authorization_failed}
        assert names[0] in gateway.broker.logs.topics and names[1] not in gateway.broker.logs.topics


def test_delete_topics_by_id_needs_describe_and_delete_on_the_topic(gateway):
    grant(gateway, ResourceType.TOPIC, "del-", Operation.DESCRIBE, Operation.DELETE)
    grant(gateway, ResourceType.TOPIC, "seen-", Operation.DESCRIBE)
    mine = gateway.broker.logs.create_topic("del-me", 1)
    seen = gateway.broker.logs.create_topic("seen-only", 1)
    hidden = gateway.broker.logs.create_topic("hidden", 1)
    ids = [mine.topic_id, seen.topic_id, hidden.topic_id, uuid.UUID(int=12345)]  # the last: no topic has it
    response = ask(gateway, 20, 6, {"topics": [{"name": None, "topic_id": i} for i in ids], "timeout": S})
    answers = {r.topic_id: (r.name, r.error_code) for r in response.responses}
    assert answers == {ids[0]: ("del-me", E.none),
                       ids[1]: ("seen-only", E.topic_authorization_failed),  # described, not deletable
                       ids[2]: (None, E.topic_authorization_failed),  # its name is not revealed
                       ids[3]: (None, E.unknown_topic_id)}
    assert set(gateway.broker.logs.topics) >= {"seen-only", "hidden"} and "del-me" not in gateway.broker.logs.topics


def test_add_partitions_to_txn_refused_for_a_topic_answers_the_others_as_kafka(gateway):
    grant(gateway, ResourceType.TRANSACTIONAL_ID, "tx", Operation.WRITE)
    grant(gateway, ResourceType.TOPIC, "apt-ok", Operation.WRITE)
    gateway.broker.logs.create_topic("apt-ok", 1)
    gateway.broker.logs.create_topic("apt-no", 1)
    response = ask(gateway, 24, 3, {"v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": 1,
                                    "v3_and_below_producer_epoch": 0, "v3_and_below_topics": [
                                        {"name": "apt-ok", "partitions": [0, 5]}, {"name": "apt-no", "partitions": [0]}]})
    errors = {(t.name, p.partition_index): p.partition_error_code for t in response.results_by_topic_v3_and_below
              for p in t.results_by_partition}
    assert errors == {("apt-ok", 0): E.operation_not_attempted, ("apt-ok", 5): E.unknown_topic_or_partition,
                      ("apt-no", 0): E.topic_authorization_failed}


def test_describe_topic_partitions_pages_only_the_topics_it_may_describe(gateway):
    grant(gateway, ResourceType.TOPIC, "b-seen", Operation.DESCRIBE)
    for name in ("a-hidden", "b-seen", "c-hidden"):
        gateway.broker.logs.create_topic(name, 2)
    pages, cursor = [], None
    for _ in range(5):
        response = ask(gateway, 75, 0, {"topics": [], "response_partition_limit": 1, "cursor": cursor})
        pages.append([(t.name, [p.partition_index for p in t.partitions]) for t in response.topics])
        cursor = response.next_cursor
        assert cursor is None or cursor.topic_name == "b-seen"  # a hidden name is never a cursor
        if cursor is None:
            break
        cursor = {"topic_name": cursor.topic_name, "partition_index": cursor.partition_index}
    assert pages == [[("b-seen", [0])], [("b-seen", [1])]]


def test_a_follower_fetch_needs_cluster_action(gateway):
    grant(gateway, ResourceType.TOPIC, "f-", Operation.READ)
    gateway.broker.logs.create_topic("f-data", 1)
    fetch = {"max_wait": datetime.timedelta(0), "min_bytes": 1, "max_bytes": 1 << 20, "forgotten_topics_data": [],
             "topics": [{"topic": "f-data", "partitions": [{"partition": 0, "fetch_offset": 0,
                                                            "partition_max_bytes": 1 << 20}]}]}
    for replica, expected in ((-1, E.none), (1, E.topic_authorization_failed)):
        response = ask(gateway, 1, 12, {**fetch, "replica_id": replica})
        assert response.responses[0].partitions[0].error_code == expected
