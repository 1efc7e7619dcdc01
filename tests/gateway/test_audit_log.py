"""The broker's audit log (audit.log.file) as real clients make it: confluent-kafka (librdkafka) over SASL/PLAIN
and mTLS against an in-process broker with ACLs. One line for each login (failed, or succeeded over mTLS),
each denied Produce, CreateTopics, AlterConfigs, CreateAcls and DeleteGroups, with its outcome; never the
record data."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
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

from logway.gateway.in_process import InProcessGateway

sys.path.insert(0, str(Path(__file__).parent))
from tls_certs import make_certs  # noqa: E402

PLAIN = ('org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret" '
         'user_bob="bob-secret";')
TOPIC, GROUP, SECRET_VALUE = "audited", "audited-group", b"the-record-data-never-in-the-audit-log"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    base = tmp_path_factory.mktemp("audit")
    certs = make_certs(base)
    audit = base / "audit.log"
    gateway = InProcessGateway(base / "data", {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,MTLS://127.0.0.1:0",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,MTLS:SSL",
        "sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": PLAIN,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": certs["server"],
        "ssl.truststore.type": "PEM", "ssl.truststore.location": certs["ca"],
        "listener.name.mtls.ssl.client.auth": "required",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin", "offsets.topic.num.partitions": "1",
        "audit.log.file": str(audit)}).start()
    try:
        yield gateway, audit, certs
    finally:
        gateway.stop()


def _conf(gateway: InProcessGateway, user: str, password: str, **extra) -> dict:
    return {"bootstrap.servers": gateway.bootstrap_for("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password, **extra}


def events(path: Path, wanted, count: int = 1, timeout: float = 15.0) -> list[dict]:
    """The audit lines ``wanted`` accepts, once there are ``count`` (the writer is a thread: wait for it)."""
    deadline = time.monotonic() + timeout
    while True:
        found = [e for e in map(json.loads, path.read_text().splitlines()) if wanted(e)] if path.exists() else []
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def _failed_login(conf: dict, code: int | None = KafkaError._AUTHENTICATION) -> None:
    """One connection attempt that fails (no reconnect for a minute), closed at its error."""
    errors: list[KafkaError] = []
    admin = AdminClient({**conf, "reconnect.backoff.ms": 60000, "reconnect.backoff.max.ms": 60000,
                         "error_cb": errors.append})
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        admin.poll(0.1)
    assert errors and (code is None or errors[0].code() == code), errors
    del admin


def test_every_audited_operation_is_one_line_with_its_outcome(broker):
    gateway, audit, _ = broker
    admin = AdminClient(_conf(gateway, "admin", "admin-secret"))
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(15)
    for future in admin.alter_configs([ConfigResource(ResourceType.TOPIC, TOPIC, {"retention.ms": "3600000"})]).values():
        future.result(15)
    for future in admin.create_acls([AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:bob",
                                                "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)]).values():
        future.result(15)
    producer = Producer(_conf(gateway, "admin", "admin-secret"))
    producer.produce(TOPIC, SECRET_VALUE, partition=0)
    assert producer.flush(15) == 0
    consumer = Consumer(_conf(gateway, "admin", "admin-secret", **{"group.id": GROUP, "auto.offset.reset": "earliest"}))
    consumer.subscribe([TOPIC])
    message = None
    while message is None or message.error() is not None:
        message = consumer.poll(1)
    consumer.commit(message, asynchronous=False)
    consumer.close()
    admin.delete_consumer_groups([GROUP])[GROUP].result(15)

    refused: list[KafkaError] = []
    bob = Producer(_conf(gateway, "bob", "bob-secret", on_delivery=lambda err, msg: refused.append(err)))
    bob.produce(TOPIC, b"not allowed", partition=0)
    bob.flush(15)
    assert refused[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    _failed_login(_conf(gateway, "bob", "wrong-password"))

    def change(action):
        return lambda e: e["event"] == "change" and e["action"] == action
    (created,) = events(audit, change("CreateTopics"))
    assert (created["outcome"], created["principal"], created["resource_type"], created["resource_name"]) == (
        "success", "User:admin", "TOPIC", TOPIC)
    assert created["details"]["partitions"] == 2 and created["client_address"].startswith("127.0.0.1:")
    (altered,) = events(audit, change("AlterConfigs"))
    assert (altered["resource_name"], altered["details"]["configs"]) == (
        TOPIC, [{"name": "retention.ms", "value": "3600000"}])
    (acl,) = events(audit, change("CreateAcls"))
    assert acl["outcome"] == "success" and acl["details"]["acl"] == {
        "resource_type": "TOPIC", "resource_name": TOPIC, "pattern_type": "LITERAL", "principal": "User:bob",
        "host": "*", "operation": "DESCRIBE", "permission": "ALLOW"}
    (deleted,) = events(audit, change("DeleteGroups"))
    assert (deleted["outcome"], deleted["resource_type"], deleted["resource_name"]) == ("success", "GROUP", GROUP)
    (denied,) = events(audit, lambda e: e["event"] == "authorization")
    assert {k: denied[k] for k in ("action", "outcome", "principal", "operation", "resource_type",
                                   "resource_name")} == {
        "action": "Produce", "outcome": "denied", "principal": "User:bob", "operation": "WRITE",
        "resource_type": "TOPIC", "resource_name": TOPIC}
    (failed,) = events(audit, lambda e: e["event"] == "authentication" and e["outcome"] == "failure")
    assert (failed["principal"], failed["mechanism"], failed["message"]) == (
        "User:bob", "PLAIN", "Authentication failed: Invalid username or password")
    logins = events(audit, lambda e: e["event"] == "authentication" and e["outcome"] == "success", count=4)
    assert {e["principal"] for e in logins} == {"User:admin", "User:bob"}
    text = audit.read_bytes()
    assert SECRET_VALUE not in text and b"admin-secret" not in text and b"wrong-password" not in text


def test_mtls_logins_are_audited_whether_they_succeed_or_not(broker):
    gateway, audit, certs = broker
    base = {"bootstrap.servers": gateway.bootstrap_for("MTLS"), "security.protocol": "SSL",
            "ssl.ca.location": certs["ca"], "ssl.endpoint.identification.algorithm": "none"}
    admin = AdminClient({**base, "ssl.certificate.location": certs["client"], "ssl.key.location": certs["client_key"]})
    admin.list_topics(timeout=15)
    (ok,) = events(audit, lambda e: e["event"] == "authentication" and e["mechanism"] == "SSL"
                   and e["outcome"] == "success")
    assert ok["principal"] == "User:CN=alice,OU=Eng,O=Acme,C=US" and ok["listener"] == "MTLS"
    _failed_login(base, None)  # no client certificate: the handshake fails
    failed = events(audit, lambda e: e["event"] == "authentication" and e["mechanism"] == "SSL"
                    and e["outcome"] == "failure")
    assert failed and failed[0]["principal"] is None and "SSL handshake failed" in failed[0]["message"]
