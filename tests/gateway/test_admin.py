"""Topic administration through kafka-python's admin client: what a user sees of Kafka's rules."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import (
    InvalidReplicationFactorError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)


@pytest.fixture
def admin(logway):
    client = KafkaAdminClient(bootstrap_servers=logway.bootstrap)
    yield client
    client.close()


def test_create_describe_delete(logway, admin, topic_name):
    admin.create_topics([NewTopic(topic_name, num_partitions=3, replication_factor=1,
                                  topic_configs={"retention.ms": "1000000"})])
    assert topic_name in admin.list_topics()
    described = admin.describe_topics([topic_name])[0]
    assert described["error_code"] == 0
    assert sorted(p["partition_index"] for p in described["partitions"]) == [0, 1, 2]
    assert all(p["leader_id"] == 1 and p["replica_nodes"] == [1] for p in described["partitions"])
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic(topic_name, num_partitions=1, replication_factor=1)])
    admin.delete_topics([topic_name])
    assert topic_name not in admin.list_topics()
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_topics([topic_name])


def test_replication_factor_beyond_one_broker_is_refused(admin, topic_name):
    with pytest.raises(InvalidReplicationFactorError):
        admin.create_topics([NewTopic(topic_name, num_partitions=1, replication_factor=3)])


def test_auto_created_topic_has_num_partitions(tmp_path, topic_name):
    from logway.gateway.in_process import InProcessGateway

    gw = InProcessGateway(tmp_path / "d", {"num.partitions": "5"}).start()
    try:
        producer = KafkaProducer(bootstrap_servers=gw.bootstrap)
        producer.send(topic_name, b"x").get(timeout=10)
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=gw.bootstrap)
        assert consumer.partitions_for_topic(topic_name) == {0, 1, 2, 3, 4}
        consumer.close()
    finally:
        gw.stop()


def test_auto_creation_can_be_disabled(tmp_path, topic_name):
    from logway.gateway.in_process import InProcessGateway

    gw = InProcessGateway(tmp_path / "d", {"auto.create.topics.enable": "false"}).start()
    try:
        consumer = KafkaConsumer(bootstrap_servers=gw.bootstrap)
        assert not consumer.partitions_for_topic(topic_name)
        consumer.close()
        assert topic_name not in gw.broker.logs.topics
    finally:
        gw.stop()


def test_create_partitions_and_describe_configs(admin, topic_name):
    from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions

    admin.create_topics([NewTopic(topic_name, num_partitions=2, replication_factor=1,
                                  topic_configs={"cleanup.policy": "compact", "retention.ms": "12345"})])
    admin.create_partitions({topic_name: NewPartitions(total_count=5)})
    assert len(admin.describe_topics([topic_name])[0]["partitions"]) == 5

    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name)])
    configs = described["topic"][topic_name]  # kafka-python lists the non-default values
    assert configs["retention.ms"]["value"] == "12345"
    assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["cleanup.policy"]["value"] == "compact"
    assert "segment.bytes" not in configs


def test_describe_cluster(logway, admin):
    cluster = admin.describe_cluster()
    assert cluster["controller_id"] == 1
    assert cluster["brokers"] == [{"broker_id": 1, "host": "127.0.0.1", "port": logway.port, "rack": None}]
    assert len(cluster["cluster_id"]) == 22  # Kafka's base64 UUID format
