"""The share-group APIs under ACLs (server/security/share_group_acls.py, gateway/apis/share_fetch.py), request by
request against an in-process broker: User:ANONYMOUS may use group "g" (READ, DESCRIBE, DELETE), READ topic
"open", only DESCRIBE topic "closed", nothing on topic "hidden" or group "other"."""

from __future__ import annotations

import datetime
import socket
import uuid

import pytest
from raw_requests import exchange, share_join

from logway.gateway.in_process import InProcessGateway
from logway.server.security.authorizer import AclBinding, Operation, PatternType, Permission, ResourceType
from logway.wire.errors import ErrorCode as E

AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
ANON = "User:ANONYMOUS"


def acl(resource_type: ResourceType, name: str, operation: Operation) -> AclBinding:
    return AclBinding(resource_type, name, PatternType.LITERAL, ANON, "*", operation, Permission.ALLOW)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    gw = InProcessGateway(tmp_path_factory.mktemp("share-acls"), AUTHORIZER).start()
    for topic in ("open", "closed", "hidden"):
        gw.broker.logs.create_topic(topic, 1)
    for operation in (Operation.READ, Operation.DESCRIBE, Operation.DELETE):
        gw.broker.authorizer.add(acl(ResourceType.GROUP, "g", operation))
    gw.broker.authorizer.add(acl(ResourceType.TOPIC, "open", Operation.READ))
    gw.broker.authorizer.add(acl(ResourceType.TOPIC, "closed", Operation.DESCRIBE))
    yield gw
    gw.stop()


def call(gateway, api_key: int, version: int, data: dict):
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as s:
        return exchange(s, api_key, version, data)


def topic_id(gateway, name: str) -> uuid.UUID:
    return gateway.broker.logs.topics[name].topic_id


def offsets(gateway, group: str, topics: list[str] | None) -> dict:
    resp = call(gateway, 90, 1, {"groups": [{"group_id": group, "topics": None if topics is None else [
        {"topic_name": t, "partitions": [0]} for t in topics]}]})
    out = {}
    for g in resp.groups:
        out[g.group_id] = g.error_code if g.error_code != E.none else {
            t.topic_name: [(p.error_code, p.start_offset, p.lag) for p in t.partitions] for t in g.topics}
    return out


def test_offsets_admin_sees_and_changes_only_what_the_acls_allow(gateway):
    # While READ on "hidden" is granted, the empty group gets a start offset there; then it is taken away.
    hidden_read = acl(ResourceType.TOPIC, "hidden", Operation.READ)
    gateway.broker.authorizer.add(hidden_read)
    resp = call(gateway, 91, 0, {"group_id": "g", "topics": [
        {"topic_name": t, "partitions": [{"partition_index": 0, "start_offset": 0}]} for t in ("hidden", "open")]})
    assert (resp.error_code, [(t.topic_name, t.partitions[0].error_code) for t in resp.responses]) == (
        E.none, [("hidden", E.none), ("open", E.none)])
    gateway.broker.authorizer.remove(hidden_read)

    # AlterShareGroupOffsets: TOPIC READ per topic, the denied ones first.
    resp = call(gateway, 91, 0, {"group_id": "g", "topics": [
        {"topic_name": t, "partitions": [{"partition_index": 0, "start_offset": 0}]} for t in ("open", "closed")]})
    assert [(t.topic_name, t.topic_id, t.partitions[0].error_code) for t in resp.responses] == [  # kio: zero id None
        ("closed", None, E.topic_authorization_failed), ("open", topic_id(gateway, "open"), E.none)]
    assert resp.responses[0].partitions[0].error_message == "Topic authorization failed."

    # DescribeShareGroupOffsets: a named topic without DESCRIBE answers -1s; listing all leaves it out.
    assert offsets(gateway, "g", ["open", "hidden"]) == {"g": {
        "open": [(E.none, 0, 0)], "hidden": [(E.topic_authorization_failed, -1, -1)]}}
    assert offsets(gateway, "g", None) == {"g": {"open": [(E.none, 0, 0)]}}
    assert offsets(gateway, "other", None) == {"other": E.group_authorization_failed}

    # DeleteShareGroupOffsets: GROUP DELETE, then TOPIC READ per topic, the denied ones first.
    resp = call(gateway, 92, 0, {"group_id": "g", "topics": [{"topic_name": "open"}, {"topic_name": "closed"}]})
    assert [(t.topic_name, t.error_code) for t in resp.responses] == [
        ("closed", E.topic_authorization_failed), ("open", E.none)]
    resp = call(gateway, 92, 0, {"group_id": "other", "topics": [{"topic_name": "open"}]})
    assert (resp.error_code, resp.responses) == (E.group_authorization_failed, ())
    resp = call(gateway, 91, 0, {"group_id": "other", "topics": []})
    assert (resp.error_code, resp.error_message) == (E.group_authorization_failed, "Group authorization failed.")


def test_share_fetch_and_acknowledge_need_topic_read(gateway):
    member = uuid.uuid4().hex[:22]
    resp = call(gateway, 76, 1, {"group_id": "g2", "member_id": member, "member_epoch": 0, "rack_id": None,
                                 "subscribed_topic_names": ["open", "closed"]})
    assert resp.error_code == E.group_authorization_failed  # no ACL on group g2
    gateway.broker.authorizer.add(acl(ResourceType.GROUP, "g2", Operation.READ))
    resp = call(gateway, 76, 1, {"group_id": "g2", "member_id": member, "member_epoch": 0, "rack_id": None,
                                 "subscribed_topic_names": ["open", "closed", "hidden"]})
    assert resp.error_code == E.topic_authorization_failed  # DESCRIBE on every topic subscribed by name
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as s:
        resp = share_join(s, "g2", member, ["open", "closed"])
    assert resp.error_code == E.none

    ids = {topic_id(gateway, "open"): "open", topic_id(gateway, "closed"): "closed"}
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as s:
        resp = exchange(s, 78, 1, {
            "group_id": "g2", "member_id": member, "share_session_epoch": 0, "max_wait": datetime.timedelta(0),
            "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 100, "batch_size": 100,
            "topics": [{"topic_id": t, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}
                       for t in ids], "forgotten_topics_data": []})
        errors = {ids[t.topic_id]: t.partitions[0].error_code for t in resp.responses}
        assert (resp.error_code, errors.get("closed")) == (E.none, E.topic_authorization_failed)
        assert errors.get("open", E.none) == E.none
        resp = exchange(s, 79, 1, {"group_id": "g2", "member_id": member, "share_session_epoch": 1, "topics": [
            {"topic_id": t, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                {"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]}]} for t in ids]})
        acks = {ids[t.topic_id]: t.partitions[0].error_code for t in resp.responses}
        assert acks == {"closed": E.topic_authorization_failed, "open": E.invalid_request}  # nothing acquired
    resp = call(gateway, 78, 1, {
        "group_id": "other", "member_id": member, "share_session_epoch": 0, "max_wait": datetime.timedelta(0),
        "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 100, "batch_size": 100, "topics": [],
        "forgotten_topics_data": []})
    assert resp.error_code == E.group_authorization_failed
