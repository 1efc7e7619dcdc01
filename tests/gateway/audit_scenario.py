"""The audited operations and what the audit log must say of them, shared by the broker's test
(tests/gateway/test_audit_log.py) and the proxy's (tests/proxy/test_audit_filter.py): confluent-kafka clients
log in (one of them with a wrong password), create a topic, alter its config, create an ACL, produce, commit
and delete a group, and a principal without WRITE produces. One line for each, with its outcome; never the
record data or a password."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

SECRET_VALUE = b"the-record-data-never-in-the-audit-log"
BOB_DESCRIBES = AclBinding(ResourceType.TOPIC, "audited", ResourcePatternType.PREFIXED, "User:bob", "*",
                           AclOperation.DESCRIBE, AclPermissionType.ALLOW)
Conf = Callable[..., dict]  # (user, password, **extra) -> librdkafka properties


def events(path: Path, wanted: Callable[[dict], bool], count: int = 1, timeout: float = 15.0) -> list[dict]:
    """The audit lines ``wanted`` accepts, once there are ``count`` (the writer is a thread: wait for it)."""
    deadline = time.monotonic() + timeout
    while True:
        found = [e for e in map(json.loads, path.read_text().splitlines()) if wanted(e)] if path.exists() else []
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def failed_login(conf: dict, code: int | None = KafkaError._AUTHENTICATION) -> None:
    """One connection attempt that fails (no reconnect for a minute), given up at its error."""
    errors: list[KafkaError] = []
    admin = AdminClient({**conf, "reconnect.backoff.ms": 60000, "reconnect.backoff.max.ms": 60000,
                         "error_cb": errors.append})
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        admin.poll(0.1)
    assert errors and (code is None or errors[0].code() == code), errors


def perform(conf: Conf, topic: str, group: str) -> None:
    """The audited operations, as admin (allowed everything) and bob (DESCRIBE on the topic, no WRITE)."""
    admin = AdminClient(conf("admin", "admin-secret"))
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
    resource = ConfigResource(ResourceType.TOPIC, topic, {"retention.ms": "3600000"})
    for future in admin.alter_configs([resource]).values():
        future.result(15)
    for future in admin.create_acls([BOB_DESCRIBES]).values():
        future.result(15)
    producer = Producer(conf("admin", "admin-secret"))
    producer.produce(topic, SECRET_VALUE, partition=0)
    assert producer.flush(15) == 0
    consumer = Consumer(conf("admin", "admin-secret", **{"group.id": group, "auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    message = None
    while message is None or message.error() is not None:
        message = consumer.poll(1)
    consumer.commit(message, asynchronous=False)
    consumer.close()
    admin.delete_consumer_groups([group])[group].result(15)
    refused: list[KafkaError] = []
    bob = Producer(conf("bob", "bob-secret", on_delivery=lambda err, msg: refused.append(err)))
    bob.produce(topic, b"not allowed", partition=0)
    bob.flush(15)
    assert refused[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    failed_login(conf("bob", "wrong-password"))


def check(audit: Path, topic: str, group: str) -> None:
    """One line for each operation of ``perform``, with its outcome, and no record data or password."""
    def change(action: str) -> Callable[[dict], bool]:
        return lambda e: e["event"] == "change" and e["action"] == action
    (created,) = events(audit, change("CreateTopics"))
    assert (created["outcome"], created["principal"], created["resource_type"], created["resource_name"]) == (
        "success", "User:admin", "TOPIC", topic)
    assert created["details"]["partitions"] == 2 and created["client_address"].startswith("127.0.0.1:")
    (altered,) = events(audit, change("AlterConfigs"))
    assert (altered["outcome"], altered["resource_name"], altered["details"]["configs"]) == (
        "success", topic, [{"name": "retention.ms", "value": "3600000"}])
    (acl,) = events(audit, change("CreateAcls"))
    assert acl["outcome"] == "success" and acl["details"]["acl"] == {
        "resource_type": "TOPIC", "resource_name": "audited", "pattern_type": "PREFIXED", "principal": "User:bob",
        "host": "*", "operation": "DESCRIBE", "permission": "ALLOW"}
    (deleted,) = events(audit, change("DeleteGroups"))
    assert (deleted["outcome"], deleted["resource_type"], deleted["resource_name"]) == ("success", "GROUP", group)
    (denied,) = events(audit, lambda e: e["event"] == "authorization")
    assert {k: denied[k] for k in ("action", "outcome", "principal", "operation", "resource_type",
                                   "resource_name")} == {
        "action": "Produce", "outcome": "denied", "principal": "User:bob", "operation": "WRITE",
        "resource_type": "TOPIC", "resource_name": topic}
    (failed,) = events(audit, lambda e: e["event"] == "authentication" and e["outcome"] == "failure")
    assert (failed["principal"], failed["mechanism"], failed["message"]) == (
        "User:bob", "PLAIN", "Authentication failed: Invalid username or password")
    logins = events(audit, lambda e: e["event"] == "authentication" and e["outcome"] == "success", count=4)
    assert {e["principal"] for e in logins} == {"User:admin", "User:bob"}
    text = audit.read_bytes()
    assert SECRET_VALUE not in text and b"admin-secret" not in text and b"wrong-password" not in text
