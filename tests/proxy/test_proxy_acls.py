"""ACLs at the proxy on groups, transactional ids and admin APIs, end to end: confluent-kafka clients
authenticate to the proxy as alice (granted) or mallory (topics only) in front of a Logway broker; the
proxy's authorizer decides with Kafka's rules and error codes, the upstream sees only the proxy's user."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from logway.server.security.authorizer import AclBinding, Authorizer, Operation, PatternType, Permission, ResourceType

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule required"


PREFIX = "acl-e2e"


@pytest.fixture(scope="module")
def secured(tmp_path_factory, logway_upstream, proxy_process_type):
    """A SASL/PLAIN proxy with an authorizer in front of the module's upstream: alice may do everything under
    PREFIX; mallory may read, write and describe its topics and describe its groups and transactional ids (so
    FindCoordinator answers her), nothing else."""
    proxy = proxy_process_type(tmp_path_factory.mktemp("proxy-acls"), logway_upstream.bootstrap, (
        "--override", "listener.security.protocol.map=PLAINTEXT:SASL_PLAINTEXT",
        "--override", "sasl.enabled.mechanisms=PLAIN",
        "--override", f'listener.name.plaintext.plain.sasl.jaas.config={PLAIN} user_alice="a" user_mallory="m";',
        "--override", "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer"))
    acls = Authorizer()
    for resource in (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID):
        acls.add(AclBinding(resource, PREFIX, PatternType.PREFIXED, "User:alice", "*", Operation.ALL,
                            Permission.ALLOW))
    for operation in (Operation.READ, Operation.WRITE, Operation.DESCRIBE):
        acls.add(AclBinding(ResourceType.TOPIC, PREFIX, PatternType.PREFIXED, "User:mallory", "*", operation,
                            Permission.ALLOW))
    for resource in (ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID):
        acls.add(AclBinding(resource, PREFIX, PatternType.PREFIXED, "User:mallory", "*", Operation.DESCRIBE,
                            Permission.ALLOW))
    (proxy.workdir / "state").mkdir(parents=True)
    acls.save(proxy.workdir / "state" / "logway-acls.json")
    proxy.start().wait_node_port(1)

    def client(user: str, **extra) -> dict:
        return {"bootstrap.servers": proxy.bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                "sasl.username": user, "sasl.password": user[0], **extra}
    try:
        yield client
    finally:
        proxy.stop()


@pytest.fixture
def topic(topic_name) -> str:
    return f"{PREFIX}-{topic_name}"


def _create(admin: AdminClient, topic: str) -> KafkaError | None:
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    except KafkaException as exc:
        return exc.args[0]
    return None


def _group_error(consumer: Consumer, seconds: float = 15) -> KafkaError | None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        message = consumer.poll(0.3)
        if message is not None and message.error() is not None:
            return message.error()
    return None


def test_a_principal_without_group_transactional_id_or_create_acls_is_refused(secured, topic):
    mallory = secured("mallory")
    error = _create(AdminClient(secured("alice")), topic)
    assert error is None
    error = _create(AdminClient(mallory), f"{topic}-m")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    producer = Producer({**mallory, "enable.idempotence": True})  # WRITE on a topic is enough (KIP-679)
    for i in range(5):
        producer.produce(topic, f"m{i}".encode())
    assert producer.flush(15) == 0

    consumer = Consumer({**mallory, "group.id": f"{topic}-g", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])  # JoinGroup needs GROUP READ
    error = _group_error(consumer)
    assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, error
    consumer.close()
    consumer = Consumer({**mallory, "group.id": f"{topic}-g", "enable.auto.commit": False})
    with pytest.raises(KafkaException) as refused:  # OffsetCommit needs GROUP READ
        consumer.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
    assert refused.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    consumer.close()

    transactional = Producer({**mallory, "transactional.id": f"{topic}-tx"})
    with pytest.raises(KafkaException) as refused:  # InitProducerId needs TRANSACTIONAL_ID WRITE
        transactional.init_transactions(15)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_with_the_acls_granted_groups_transactions_and_admin_work(secured, topic):
    alice = secured("alice")
    assert _create(AdminClient(alice), topic) is None
    producer = Producer({**alice, "transactional.id": f"{topic}-tx"})
    producer.init_transactions(15)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, f"t{i}".encode())
    producer.commit_transaction(15)

    consumer = Consumer({**alice, "group.id": f"{topic}-g", "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.subscribe([topic])
    values = []
    deadline = time.monotonic() + 20
    while len(values) < 10 and time.monotonic() < deadline:
        message = consumer.poll(0.3)
        if message is not None:
            assert message.error() is None, message.error()
            values.append(message.value())
    consumer.commit(asynchronous=False)
    committed = consumer.committed([TopicPartition(topic, 0)], timeout=10)
    consumer.close()
    assert sorted(values) == sorted(f"t{i}".encode() for i in range(10))
    assert committed[0].offset >= 10  # the records and the commit marker
