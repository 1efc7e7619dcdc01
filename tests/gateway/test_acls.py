"""ACLs through real clients: confluent-kafka's AdminClient manages them, kafka-python and confluent-kafka
producers/consumers meet them. Until authentication exists every client is User:ANONYMOUS, so the ACLs are
made with User:ANONYMOUS a super user, and the gateway is restarted without it to see them enforced."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import (
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    NewTopic,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KResourceType
from kafka.errors import (
    CoordinatorLoadInProgressError,
    GroupAuthorizationFailedError,
    SecurityDisabledError,
    TopicAuthorizationFailedError,
)
from kafka.structs import OffsetAndMetadata

from logway.gateway.in_process import InProcessGateway

AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
ANON = "User:ANONYMOUS"
EVERYTHING = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                              AclPermissionType.ANY)


def binding(rt, name, pattern, op, perm=AclPermissionType.ALLOW, principal=ANON) -> AclBinding:
    return AclBinding(rt, name, pattern, principal, "*", op, perm)


def admin(gateway: InProcessGateway) -> AdminClient:
    return AdminClient({"bootstrap.servers": gateway.bootstrap})


def create(client: AdminClient, bindings: list[AclBinding]) -> None:
    for future in client.create_acls(bindings, request_timeout=10).values():
        future.result()


def list_groups(kadmin: KafkaAdminClient) -> list:
    """ListGroups, retried while the restarted coordinator loads its groups (COORDINATOR_LOAD_IN_PROGRESS)."""
    for _ in range(50):
        try:
            return kadmin.list_groups()
        except CoordinatorLoadInProgressError:
            time.sleep(0.1)
    return kadmin.list_groups()


@pytest.fixture
def data_dir(tmp_path):
    return tmp_path / "data"


def start(data_dir, **overrides) -> InProcessGateway:
    return InProcessGateway(data_dir, {**AUTHORIZER, **overrides}).start()


def test_create_describe_delete_acls_and_they_persist(data_dir):
    gateway = start(data_dir, **{"super.users": ANON})
    try:
        client = admin(gateway)
        wanted = [binding(ResourceType.TOPIC, "pay-", ResourcePatternType.PREFIXED, AclOperation.READ),
                  binding(ResourceType.GROUP, "app", ResourcePatternType.LITERAL, AclOperation.READ),
                  binding(ResourceType.TOPIC, "*", ResourcePatternType.LITERAL, AclOperation.WRITE,
                          AclPermissionType.DENY, "User:mallory")]
        create(client, wanted)
        assert sorted(map(str, client.describe_acls(EVERYTHING).result())) == sorted(map(str, wanted))
        # MATCH: the ACLs that apply to topic pay-in (the prefix and the '*' ACL), not the group's.
        match = AclBindingFilter(ResourceType.TOPIC, "pay-in", ResourcePatternType.MATCH, None, None,
                                 AclOperation.ANY, AclPermissionType.ANY)
        assert sorted(map(str, client.describe_acls(match).result())) == sorted(map(str, [wanted[0], wanted[2]]))
        bad = binding(ResourceType.BROKER, "not-kafka-cluster", ResourcePatternType.LITERAL, AclOperation.ALTER)
        with pytest.raises(KafkaException, match="INVALID_REQUEST|only valid name"):
            create(client, [bad])
        deny_filter = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, "User:mallory", None,
                                       AclOperation.ANY, AclPermissionType.ANY)
        deleted = [f.result() for f in client.delete_acls([deny_filter]).values()]
        assert list(map(str, deleted[0])) == [str(wanted[2])]
    finally:
        gateway.stop()
    gateway = start(data_dir, **{"super.users": ANON})
    try:
        client = admin(gateway)
        assert sorted(map(str, client.describe_acls(EVERYTHING).result())) == sorted(map(str, wanted[:2]))
    finally:
        gateway.stop()


def test_without_an_authorizer_acl_requests_answer_security_disabled(tmp_path):
    gateway = InProcessGateway(tmp_path / "data").start()
    try:
        # kafka-python surfaces DescribeAcls' top-level error (librdkafka answers an empty list instead).
        client = KafkaAdminClient(bootstrap_servers=gateway.bootstrap)
        everything = ACLFilter(None, "*", ACLOperation.ANY, ACLPermissionType.ANY,
                               ResourcePatternFilter(KResourceType.ANY, None, ACLResourcePatternType.ANY))
        with pytest.raises(SecurityDisabledError, match="No Authorizer"):
            client.describe_acls(everything)
        client.close()
    finally:
        gateway.stop()


def test_acl_changes_need_cluster_alter(data_dir):
    gateway = start(data_dir)
    try:
        client = admin(gateway)
        with pytest.raises(KafkaException, match="CLUSTER_AUTHORIZATION_FAILED|[Cc]luster authorization"):
            create(client, [binding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, AclOperation.READ)])
    finally:
        gateway.stop()


def test_read_only_principal_consumes_but_cannot_produce_or_see_other_topics(data_dir):
    """User:ANONYMOUS may READ topics prefixed 'ro-' and join group 'readers'; DENY on ro-secret wins."""
    gateway = start(data_dir, **{"super.users": ANON})
    try:
        kadmin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap)
        kadmin.create_topics([NewTopic(t, 1, 1) for t in ("ro-data", "ro-secret", "other")])
        kadmin.close()
        producer = KafkaProducer(bootstrap_servers=gateway.bootstrap)
        for topic in ("ro-data", "ro-secret"):
            producer.send(topic, b"hello").get(10)
        producer.close()
        client = admin(gateway)
        create(client, [
            binding(ResourceType.TOPIC, "ro-", ResourcePatternType.PREFIXED, AclOperation.READ),
            binding(ResourceType.TOPIC, "ro-secret", ResourcePatternType.LITERAL, AclOperation.ALL,
                    AclPermissionType.DENY),
            binding(ResourceType.GROUP, "readers", ResourcePatternType.LITERAL, AclOperation.READ),
        ])
    finally:
        gateway.stop()

    gateway = start(data_dir)  # the same ACLs, read back from disk; no super user now
    try:
        consumer = KafkaConsumer("ro-data", bootstrap_servers=gateway.bootstrap, group_id="readers",
                                 auto_offset_reset="earliest")
        records = []
        for _ in range(50):
            records += [r.value for rs in consumer.poll(timeout_ms=200).values() for r in rs]
            if records:
                break
        assert records == [b"hello"]
        assert consumer.topics() == {"ro-data"}  # Metadata leaves out 'other' and the denied 'ro-secret'
        consumer.commit()
        consumer.close()

        producer = KafkaProducer(bootstrap_servers=gateway.bootstrap, max_block_ms=5000, retries=0)
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send("ro-data", b"nope").get(10)
        producer.close()

        with pytest.raises(GroupAuthorizationFailedError):
            intruder = KafkaConsumer("ro-data", bootstrap_servers=gateway.bootstrap, group_id="writers",
                                     auto_offset_reset="earliest", consumer_timeout_ms=3000)
            try:
                list(intruder)
            finally:
                intruder.close()

        # DENY ALL on ro-secret beats the prefix's READ: librdkafka reports TOPIC_AUTHORIZATION_FAILED for it.
        denied = Consumer({"bootstrap.servers": gateway.bootstrap, "group.id": "readers",
                           "auto.offset.reset": "earliest"})
        denied.subscribe(["ro-secret"])
        errors = []
        for _ in range(20):
            msg = denied.poll(0.25)
            if msg is not None:
                assert msg.error() is not None, "a message was read from a denied topic"
                errors.append(msg.error().code())
                break
        denied.close()
        assert errors == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    finally:
        gateway.stop()


def test_admin_apis_are_checked_as_kafka_checks_them(data_dir):
    """TOPIC CREATE/DELETE/DESCRIBE_CONFIGS on 'a-' topics only; groups listed only when describable."""
    gateway = start(data_dir, **{"super.users": ANON})
    try:
        kadmin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap)
        kadmin.create_topics([NewTopic(t, 1, 1) for t in ("a-1", "a-2", "b-1")])
        for group in ("a-g", "b-g"):
            committer = KafkaConsumer(bootstrap_servers=gateway.bootstrap, group_id=group)
            committer.assign([TopicPartition("a-1", 0)])
            committer.commit({TopicPartition("a-1", 0): OffsetAndMetadata(0, "", -1)})
            committer.close()
        kadmin.close()
        client = admin(gateway)
        create(client, [
            binding(ResourceType.TOPIC, "a-", ResourcePatternType.PREFIXED, AclOperation.CREATE),
            binding(ResourceType.TOPIC, "a-", ResourcePatternType.PREFIXED, AclOperation.DELETE),
            binding(ResourceType.TOPIC, "a-", ResourcePatternType.PREFIXED, AclOperation.ALTER_CONFIGS),
            binding(ResourceType.GROUP, "a-", ResourcePatternType.PREFIXED, AclOperation.DESCRIBE),
        ])
    finally:
        gateway.stop()

    gateway = start(data_dir)
    try:
        kadmin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap)
        kadmin.create_topics([NewTopic("a-new", 1, 1)])
        with pytest.raises(TopicAuthorizationFailedError):
            kadmin.create_topics([NewTopic("b-new", 1, 1)])
        with pytest.raises(TopicAuthorizationFailedError):
            kadmin.delete_topics(["b-1"])
        kadmin.delete_topics(["a-2"])
        client = admin(gateway)
        allowed, denied = ConfigResource(ConfigResource.Type.TOPIC, "a-1"), ConfigResource(ConfigResource.Type.TOPIC, "b-1")
        futures = client.describe_configs([allowed, denied], request_timeout=10)
        assert "retention.ms" in futures[allowed].result(10)  # ALTER_CONFIGS implies DESCRIBE_CONFIGS
        with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED|[Aa]uthoriz"):
            futures[denied].result(10)
        assert [g["group_id"] for g in list_groups(kadmin)] == ["a-g"]
        kadmin.close()
        # Metadata auto-creates a topic only with CREATE on it (CLUSTER CREATE would do too).
        probe = Producer({"bootstrap.servers": gateway.bootstrap, "allow.auto.create.topics": True})
        assert probe.list_topics("a-auto", timeout=10).topics["a-auto"].error is None
        refused = probe.list_topics("b-auto", timeout=10).topics["b-auto"].error
        assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        # An idempotent producer needs CLUSTER IDEMPOTENT_WRITE or WRITE on some topic (InitProducerId).
        producer = Producer({"bootstrap.servers": gateway.bootstrap, "enable.idempotence": True})
        producer.produce("a-1", b"x")
        with pytest.raises(KafkaException, match="CLUSTER_AUTHORIZATION_FAILED"):
            producer.flush(5)
    finally:
        gateway.stop()
    gateway = start(data_dir, **{"super.users": ANON})
    try:
        kadmin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap)
        assert set(kadmin.list_topics()) - {"__consumer_offsets"} == {"a-1", "a-auto", "a-new", "b-1"}  # denied: left alone
        kadmin.close()
    finally:
        gateway.stop()


def test_acl_changes_apply_at_once_hosts_match_and_the_no_acl_default_stops_at_the_first_acl(data_dir):
    """allow.everyone.if.no.acl.found=true: a topic without ACLs is open; an ACL for another host closes it
    (an ACL now applies to it and none allows); an ALLOW for this host opens it; a DENY for it wins."""
    gateway = start(data_dir, **{"allow.everyone.if.no.acl.found": "true"})
    try:
        client = admin(gateway)

        def produce_error() -> type[Exception] | None:
            producer = KafkaProducer(bootstrap_servers=gateway.bootstrap, max_block_ms=3000, retries=0)
            try:
                producer.send("open", b"x").get(10)
                return None
            except TopicAuthorizationFailedError as exc:
                return type(exc)
            finally:
                producer.close()

        def write(permission, host: str) -> AclBinding:
            return AclBinding(ResourceType.TOPIC, "open", ResourcePatternType.LITERAL, ANON, host,
                              AclOperation.WRITE, permission)

        assert produce_error() is None
        create(client, [write(AclPermissionType.DENY, "10.9.9.9")])
        assert produce_error() is TopicAuthorizationFailedError
        create(client, [write(AclPermissionType.ALLOW, "127.0.0.1")])
        assert produce_error() is None
        create(client, [write(AclPermissionType.DENY, "127.0.0.1")])
        assert produce_error() is TopicAuthorizationFailedError
        for future in client.delete_acls([EVERYTHING]).values():
            assert len(future.result()) == 3
        assert produce_error() is None
    finally:
        gateway.stop()
