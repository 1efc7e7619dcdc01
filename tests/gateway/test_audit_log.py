"""The broker's audit log (audit.log.file) as real clients make it: confluent-kafka (librdkafka) over SASL/PLAIN
and mTLS against an in-process broker with ACLs. One line for each login (failed or not, SASL or mTLS), the
denied Produce, CreateTopics, AlterConfigs, CreateAcls and DeleteGroups, with its outcome; never the record
data (tests/gateway/audit_scenario.py)."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from logway.gateway.in_process import InProcessGateway
from logway.server.security.authorizer import AclBinding, Operation, PatternType, Permission, ResourceType

sys.path.insert(0, str(Path(__file__).parent))
from audit_scenario import check, events, failed_login, perform  # noqa: E402
from raw_requests import exchange  # noqa: E402
from tls_certs import make_certs  # noqa: E402

PLAIN = ('org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret" '
         'user_bob="bob-secret";')


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


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_every_audited_operation_is_one_line_with_its_outcome(broker):
    gateway, audit, _ = broker

    def conf(user: str, password: str, **extra) -> dict:
        return {"bootstrap.servers": gateway.bootstrap_for("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password, **extra}
    perform(conf, "audited", "audited-group")
    check(audit, "audited", "audited-group")


def test_mtls_logins_are_audited_whether_they_succeed_or_not(broker):
    gateway, audit, certs = broker
    base = {"bootstrap.servers": gateway.bootstrap_for("MTLS"), "security.protocol": "SSL",
            "ssl.ca.location": certs["ca"], "ssl.endpoint.identification.algorithm": "none"}
    admin = AdminClient({**base, "ssl.certificate.location": certs["client"], "ssl.key.location": certs["client_key"]})
    admin.list_topics(timeout=15)
    ok = events(audit, lambda e: e["event"] == "authentication" and e["mechanism"] == "SSL"
                and e["outcome"] == "success")  # (one per connection: the bootstrap's and the broker's)
    assert ok and {(e["principal"], e["listener"]) for e in ok} == {("User:CN=alice,OU=Eng,O=Acme,C=US", "MTLS")}
    failed_login(base, None)  # no client certificate: the handshake fails
    failed = events(audit, lambda e: e["event"] == "authentication" and e["mechanism"] == "SSL"
                    and e["outcome"] == "failure")
    assert failed and failed[0]["principal"] is None and "SSL handshake failed" in failed[0]["message"]


def test_aborted_transactions_are_audited_whether_the_client_or_the_timeout_aborted(tmp_path):
    audit = tmp_path / "audit.log"
    gateway = InProcessGateway(tmp_path / "data", {
        "audit.log.file": str(audit), "transaction.abort.timed.out.transaction.cleanup.interval.ms": "100",
        "transaction.state.log.num.partitions": "1", "offsets.topic.num.partitions": "1"}).start()
    try:
        aborting = Producer({"bootstrap.servers": gateway.bootstrap, "transactional.id": "tx-aborted"})
        aborting.init_transactions(15)
        aborting.begin_transaction()
        aborting.produce("txn-audited", b"never committed")
        aborting.flush(15)
        aborting.abort_transaction(15)
        stuck = Producer({"bootstrap.servers": gateway.bootstrap, "transactional.id": "tx-timed-out",
                          "transaction.timeout.ms": 1000, "socket.timeout.ms": 1000})
        stuck.init_transactions(15)
        stuck.begin_transaction()
        stuck.produce("txn-audited", b"never committed either")
        stuck.flush(15)  # and never ended: the coordinator aborts it after a second
        (aborted,) = events(audit, lambda e: e.get("action") == "EndTxn" and e["resource_name"] == "tx-aborted")
        assert (aborted["outcome"], aborted["principal"], aborted["details"]["result"]) == (
            "success", "User:ANONYMOUS", "ABORT")
        (timed_out,) = events(audit, lambda e: e.get("action") == "EndTxn" and e["resource_name"] == "tx-timed-out")
        assert "principal" not in timed_out  # no client asked for it
        assert timed_out["details"]["reason"] == "timed out after transaction.timeout.ms=1000"
        assert b"never committed" not in audit.read_bytes()
    finally:
        gateway.stop()


def test_share_group_offset_resets_and_deletes_are_audited_and_a_denied_topic_too(tmp_path):
    """KIP-932's admin changes (kafka-share-groups --reset-offsets / --delete-offsets) under ACLs: User:ANONYMOUS
    may READ and DELETE group "sg" and READ topic "open", not "closed"."""
    audit = tmp_path / "audit.log"
    gateway = InProcessGateway(tmp_path / "data", {
        "audit.log.file": str(audit), "offsets.topic.num.partitions": "1",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}).start()
    try:
        for topic in ("open", "closed"):
            gateway.broker.logs.create_topic(topic, 2)
        for kind, name, operation in ((ResourceType.GROUP, "sg", Operation.READ),
                                      (ResourceType.GROUP, "sg", Operation.DELETE),
                                      (ResourceType.TOPIC, "open", Operation.READ)):
            gateway.broker.authorizer.add(AclBinding(kind, name, PatternType.LITERAL, "User:ANONYMOUS", "*",
                                                     operation, Permission.ALLOW))
        with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as s:
            exchange(s, 91, 0, {"group_id": "sg", "topics": [
                {"topic_name": t, "partitions": [{"partition_index": 1, "start_offset": 0}]} for t in ("open", "closed")]})
            exchange(s, 92, 0, {"group_id": "sg", "topics": [{"topic_name": "open"}]})
        (reset,) = events(audit, lambda e: e.get("action") == "AlterShareGroupOffsets" and e["event"] == "change")
        assert (reset["outcome"], reset["principal"], reset["resource_type"], reset["resource_name"],
                reset["details"]) == ("success", "User:ANONYMOUS", "GROUP", "sg",
                                      {"topic": "open", "partitions": [1], "start_offsets": [0]})
        (denied,) = events(audit, lambda e: e["event"] == "authorization")
        assert (denied["action"], denied["operation"], denied["resource_type"], denied["resource_name"]) == (
            "AlterShareGroupOffsets", "READ", "TOPIC", "closed")
        (deleted,) = events(audit, lambda e: e.get("action") == "DeleteShareGroupOffsets")
        assert (deleted["outcome"], deleted["resource_name"], deleted["details"]) == ("success", "sg", {"topic": "open"})
    finally:
        gateway.stop()
