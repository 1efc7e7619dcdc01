"""The proxy's ACL filter on kio requests and responses (sans-IO): per-topic denial in Produce and Fetch,
Metadata naming or listing topics, pipelined requests keeping their own denials."""

from __future__ import annotations

import pytest

from logway.gateway.security.authorizer import AclBinding, Authorizer, Operation, PatternType, Permission
from logway.proxy.filters.acl import AclFilter
from logway.proxy.filters.base import Answer, ClientInfo
from logway.wire.protocol import build, request_type, response_type

ALICE = ClientInfo(principal="User:alice", host="127.0.0.1")
DENIED = 29  # TOPIC_AUTHORIZATION_FAILED


@pytest.fixture
def acl() -> AclFilter:
    authorizer = Authorizer()
    for operation in (Operation.WRITE, Operation.READ):
        authorizer.add(AclBinding(2, "ok", PatternType.LITERAL, "User:alice", "*", operation, Permission.ALLOW))
    return AclFilter(authorizer, ALICE)


def _produce(topics):
    return build(request_type(0, 9), {"transactional_id": None, "acks": -1, "timeout": 1000, "topic_data": [
        {"name": t, "partition_data": [{"index": 0, "records": b""}, {"index": 1, "records": b""}]} for t in topics]})


def _produce_response(topics):
    return build(response_type(0, 9), {"throttle_time": 0, "responses": [
        {"name": t, "partition_responses": [{"index": 0, "error_code": 0, "base_offset": 5, "log_append_time": -1,
                                              "log_start_offset": 0, "error_message": None}]} for t in topics]})


def test_produce_mixed_topics_forwards_the_allowed_and_answers_the_denied(acl):
    first = acl.on_request(ALICE, 0, 9, _produce(["ok", "secret"]))
    second = acl.on_request(ALICE, 0, 9, _produce(["ok", "other"]))  # pipelined before the first's answer
    assert [t.name for t in first.topic_data] == ["ok"] and [t.name for t in second.topic_data] == ["ok"]
    answered = acl.on_response(ALICE, 0, 9, first, _produce_response(["ok"]))
    errors = {(t.name, p.index): p.error_code for t in answered.responses for p in t.partition_responses}
    assert errors == {("ok", 0): 0, ("secret", 0): DENIED, ("secret", 1): DENIED}
    assert {t.name for t in acl.on_response(ALICE, 0, 9, second, _produce_response(["ok"])).responses} == {"ok", "other"}


def test_produce_all_denied_is_answered_by_the_proxy(acl):
    with pytest.raises(Answer) as answer:
        acl.on_request(ALICE, 0, 9, _produce(["secret"]))
    assert [(t.name, [p.error_code for p in t.partition_responses]) for t in answer.value.response.responses] == [
        ("secret", [DENIED, DENIED])]


def test_fetch_denied_topic_gets_its_partitions_refused(acl):
    request = build(request_type(1, 12), {"replica_id": -1, "max_wait": 100, "min_bytes": 1, "max_bytes": 1 << 20,
                                           "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                                           "forgotten_topics_data": [], "rack_id": "", "topics": [
        {"topic": t, "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                     "last_fetched_epoch": -1, "log_start_offset": -1,
                                     "partition_max_bytes": 1 << 20}]} for t in ("ok", "secret")]})
    forwarded = acl.on_request(ALICE, 1, 12, request)
    assert [t.topic for t in forwarded.topics] == ["ok"]
    upstream = build(response_type(1, 12), {"throttle_time": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": "ok", "partitions": [{"partition_index": 0, "error_code": 0, "high_watermark": 3,
                                        "last_stable_offset": 3, "log_start_offset": 0, "aborted_transactions": None,
                                        "preferred_read_replica": -1, "records": b""}]}]})
    answered = acl.on_response(ALICE, 1, 12, forwarded, upstream)
    assert [(t.topic, t.partitions[0].error_code) for t in answered.responses] == [("ok", 0), ("secret", DENIED)]


def _metadata(topics):
    return build(request_type(3, 12), {"topics": None if topics is None else [{"name": t, "topic_id": None}
                                                                              for t in topics],
                                       "allow_auto_topic_creation": True, "include_topic_authorized_operations": False})


def _metadata_response(topics):
    return build(response_type(3, 12), {"throttle_time": 0, "brokers": [], "cluster_id": "c", "controller_id": 1,
                                         "topics": [{"error_code": 0, "name": t, "topic_id": None, "partitions": []}
                                                    for t in topics]})


def test_metadata_named_topic_is_refused_and_never_reaches_the_upstream(acl):
    forwarded = acl.on_request(ALICE, 3, 12, _metadata(["ok", "secret"]))
    assert [t.name for t in forwarded.topics] == ["ok"]  # not auto-created upstream
    answered = acl.on_response(ALICE, 3, 12, forwarded, _metadata_response(["ok"]))
    assert [(t.name, t.error_code) for t in answered.topics] == [("ok", 0), ("secret", DENIED)]


def test_metadata_for_all_topics_lists_only_describable_ones(acl):
    request = _metadata(None)
    assert acl.on_request(ALICE, 3, 12, request) is request
    answered = acl.on_response(ALICE, 3, 12, request, _metadata_response(["ok", "secret", "other"]))
    assert [t.name for t in answered.topics] == ["ok"]
