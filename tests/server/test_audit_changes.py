"""The change events of each audited API from a kio request and its answer (server/audit_changes.py): one per
resource, with the outcome the answer gave it, and nothing secret."""

from __future__ import annotations

import json
import uuid

import pytest

from logway.server.audit import Client
from logway.server.audit_changes import change_events, transaction_timed_out
from logway.wire.protocol import build, request_type, response_type

ADMIN = Client("User:admin", "127.0.0.1:1", "PLAINTEXT", "tool")


def _events(api_key: int, version: int, request: dict, response: dict) -> list[dict]:
    return change_events(ADMIN, api_key, build(request_type(api_key, version), request),
                         build(response_type(api_key, version), response))


def _summary(events: list[dict]) -> list[tuple]:
    return [(e["action"], e["resource_type"], e["resource_name"], e.get("error")) for e in events]


def test_delete_topics_and_partitions_give_each_topics_outcome():
    events = _events(20, 6, {"topics": [{"name": "a"}, {"name": "b"}]},
                     {"responses": [{"name": "a", "topic_id": uuid.uuid4(), "error_code": 0},
                                    {"name": "b", "error_code": 3}]})
    assert _summary(events) == [("DeleteTopics", "TOPIC", "a", None),
                                ("DeleteTopics", "TOPIC", "b", "UNKNOWN_TOPIC_OR_PARTITION")]
    events = _events(37, 3, {"topics": [{"name": "a", "count": 6}]}, {"results": [{"name": "a", "error_code": 0}]})
    assert _summary(events) == [("CreatePartitions", "TOPIC", "a", None)] and events[0]["details"] == {"partitions": 6}


def test_a_validate_only_request_or_a_commit_changes_nothing():
    assert _events(19, 7, {"topics": [{"name": "a", "num_partitions": 1}], "validate_only": True},
                   {"topics": [{"name": "a", "error_code": 0}]}) == []
    assert _events(26, 3, {"transactional_id": "t", "producer_id": 1, "producer_epoch": 0, "committed": True},
                   {"error_code": 0}) == []
    (abort,) = _events(26, 3, {"transactional_id": "t", "producer_id": 1, "producer_epoch": 0, "committed": False},
                       {"error_code": 0})
    assert _summary([abort]) == [("EndTxn", "TRANSACTIONAL_ID", "t", None)] and abort["details"]["result"] == "ABORT"


def test_scram_changes_never_carry_the_salt_or_the_salted_password():
    events = _events(51, 0, {"deletions": [{"name": "old", "mechanism": 1}], "upsertions": [
        {"name": "new", "mechanism": 2, "iterations": 8192, "salt": b"SALTSALT", "salted_password": b"PROOFPROOF"}]},
        {"results": [{"user": "old", "error_code": 0}, {"user": "new", "error_code": 0}]})
    assert _summary(events) == [("AlterUserScramCredentials", "USER", "old", None),
                                ("AlterUserScramCredentials", "USER", "new", None)]
    assert events[1]["details"] == {"credentials": [{"upsert": "SCRAM-SHA-512", "iterations": 8192}]}
    assert "SALT" not in json.dumps(events) and "PROOF" not in json.dumps(events)


def test_delete_acls_lists_each_acl_deleted():
    acl = {"resource_type": 2, "resource_name": "t", "pattern_type": 3, "principal": "User:bob", "host": "*",
           "operation": 3, "permission_type": 3, "error_code": 0}
    events = _events(31, 3, {"filters": [{"resource_type_filter": 2, "pattern_type_filter": 1, "operation": 1,
                                          "permission_type": 1}]},
                     {"filter_results": [{"error_code": 0, "matching_acls": [acl, {**acl, "resource_name": "u"}]}]})
    assert [e["details"]["acl"]["resource_name"] for e in events] == ["t", "u"]
    assert events[0]["details"]["acl"]["operation"] == "READ"


@pytest.mark.parametrize("name", ["sasl.jaas.config", "ssl.keystore.password", "listener.name.x.ssl.key.password"])
def test_secret_config_values_are_hidden(name):
    (event,) = _events(44, 1, {"resources": [{"resource_type": 4, "resource_name": "1", "configs": [
        {"name": name, "config_operation": 0, "value": "hunter2"}]}]},
        {"responses": [{"resource_type": 4, "resource_name": "1", "error_code": 0}]})
    assert event["resource_type"] == "BROKER"
    assert event["details"]["configs"] == [{"name": name, "operation": "SET", "value": "[hidden]"}]


def test_offset_deletes_quotas_and_timeouts():
    events = _events(47, 0, {"group_id": "g", "topics": [{"name": "t", "partitions": [{"partition_index": 0},
                                                                                         {"partition_index": 1}]}]},
                     {"error_code": 0, "topics": [{"name": "t", "partitions": [
                         {"partition_index": 0, "error_code": 0}, {"partition_index": 1, "error_code": 86}]}]})
    assert [(e["resource_name"], e["details"]["partitions"], e.get("error")) for e in events] == [
        ("g", [0], None), ("g", [1], "GROUP_SUBSCRIBED_TO_TOPIC")]
    (quota,) = _events(49, 1, {"entries": [{"entity": [{"entity_type": "user", "entity_name": "bob"}],
                                            "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}]}]},
                       {"entries": [{"error_code": 0, "entity": [{"entity_type": "user", "entity_name": "bob"}]}]})
    assert (quota["resource_type"], quota["resource_name"], quota["details"]) == (
        "CLIENT_QUOTA", "user=bob", {"ops": [{"key": "producer_byte_rate", "value": 1024.0}]})
    timed_out = transaction_timed_out("t", 7, 1, 60000)
    assert "principal" not in timed_out and timed_out["details"]["result"] == "ABORT"


def test_share_group_offset_resets_and_deletes_give_each_topics_outcome():
    """KIP-932's AlterShareGroupOffsets (kafka-share-groups --reset-offsets) and DeleteShareGroupOffsets
    (--delete-offsets): per topic, with the offsets asked for; a group refused as a whole is one event."""
    events = _events(91, 0, {"group_id": "sg", "topics": [
        {"topic_name": "t", "partitions": [{"partition_index": 0, "start_offset": 5},
                                           {"partition_index": 1, "start_offset": 7}]}]},
                     {"error_code": 0, "responses": [{"topic_name": "t", "topic_id": uuid.uuid4(), "partitions": [
                         {"partition_index": 0, "error_code": 0}, {"partition_index": 1, "error_code": 3}]}]})
    assert [(e["action"], e["resource_type"], e["resource_name"], e["details"], e.get("error")) for e in events] == [
        ("AlterShareGroupOffsets", "GROUP", "sg", {"topic": "t", "partitions": [0], "start_offsets": [5]}, None),
        ("AlterShareGroupOffsets", "GROUP", "sg", {"topic": "t", "partitions": [1], "start_offsets": [7]},
         "UNKNOWN_TOPIC_OR_PARTITION")]
    events = _events(92, 0, {"group_id": "sg", "topics": [{"topic_name": "t"}, {"topic_name": "u"}]},
                     {"error_code": 0, "responses": [
                         {"topic_name": "t", "topic_id": uuid.uuid4(), "error_code": 0},
                         {"topic_name": "u", "topic_id": None, "error_code": 3, "error_message": "unknown"}]})
    assert [(e["action"], e["details"], e.get("error")) for e in events] == [
        ("DeleteShareGroupOffsets", {"topic": "t"}, None),
        ("DeleteShareGroupOffsets", {"topic": "u"}, "UNKNOWN_TOPIC_OR_PARTITION")]
    (refused,) = _events(92, 0, {"group_id": "sg", "topics": [{"topic_name": "t"}]},
                         {"error_code": 68, "error_message": "members", "responses": []})
    assert (refused["resource_name"], refused["details"], refused.get("error")) == (
        "sg", {"topics": ["t"]}, "NON_EMPTY_GROUP")
