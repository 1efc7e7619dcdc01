"""AlterConfigs, IncrementalAlterConfigs and DeleteRecords through real admin clients, checked by effect."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from polling import wait_for

from logway.gateway.in_process import InProcessGateway

# Maintenance every 100 ms and segment files unlinked at once, so retention shows within a second.
FAST = {"log.retention.check.interval.ms": "100", "log.segment.delete.delay.ms": "0"}


@pytest.fixture
def gateway(tmp_path: Path):
    gw = InProcessGateway(tmp_path / "data", FAST).start()
    try:
        yield gw
    finally:
        gw.stop()


def _admin(gw) -> AdminClient:
    return AdminClient({"bootstrap.servers": gw.bootstrap})


def _topic(admin: AdminClient, name: str, config: dict[str, str] | None = None) -> ConfigResource:
    admin.create_topics([NewTopic(name, 1, 1, config=config or {})])[name].result(10)
    return ConfigResource(ConfigResource.Type.TOPIC, name)


def _describe(admin: AdminClient, resource: ConfigResource) -> dict:
    return admin.describe_configs([resource], request_timeout=10)[resource].result(timeout=10)


def _incremental(admin: AdminClient, name: str, *entries: tuple[str, str | None, AlterConfigOpType],
                 validate_only: bool = False) -> None:
    resource = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=op) for key, value, op in entries])
    admin.incremental_alter_configs([resource], validate_only=validate_only, request_timeout=10)[resource].result(10)


def _produce(gw, topic: str, count: int, size: int = 200) -> None:
    producer = Producer({"bootstrap.servers": gw.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(count):
        producer.produce(topic, value=b"x" * size, key=str(i).encode())
        producer.flush(10)  # one batch per record: many small segments
    assert producer.flush(10) == 0


def _segments(gw, topic: str) -> list[Path]:
    return sorted((gw.data_dir / f"{topic}-0").glob("*.log"))


def _earliest(admin: AdminClient, topic: str) -> int:
    from confluent_kafka.admin import OffsetSpec
    tp = TopicPartition(topic, 0)
    return admin.list_offsets({tp: OffsetSpec.earliest()}, request_timeout=10)[tp].result(10).offset



def test_retention_change_deletes_old_segments_without_a_restart_and_survives_one(gateway, topic_name):
    admin = _admin(gateway)
    resource = _topic(admin, topic_name, {"segment.bytes": "1024"})
    _produce(gateway, topic_name, 30)
    before = len(_segments(gateway, topic_name))
    assert before >= 5 and _earliest(admin, topic_name) == 0

    _incremental(admin, topic_name, ("retention.bytes", "2048", AlterConfigOpType.SET))

    wait_for(lambda: _earliest(admin, topic_name) > 0)
    assert len(_segments(gateway, topic_name)) < before
    entry = _describe(admin, resource)["retention.bytes"]
    assert (entry.value, entry.source) == ("2048", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)

    gateway.stop()
    gateway.start()
    admin = _admin(gateway)
    entry = _describe(admin, resource)["retention.bytes"]
    assert (entry.value, entry.source) == ("2048", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    # DELETE puts the default back.
    _incremental(admin, topic_name, ("retention.bytes", None, AlterConfigOpType.DELETE))
    entry = _describe(admin, resource)["retention.bytes"]
    assert (entry.value, entry.source) == ("-1", ConfigSource.DEFAULT_CONFIG.value)


def test_append_and_subtract_change_list_configs_only(gateway, topic_name):
    admin = _admin(gateway)
    resource = _topic(admin, topic_name)
    _incremental(admin, topic_name, ("cleanup.policy", "compact", AlterConfigOpType.APPEND))
    assert _describe(admin, resource)["cleanup.policy"].value == "delete,compact"
    _incremental(admin, topic_name, ("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT))
    assert _describe(admin, resource)["cleanup.policy"].value == "compact"
    with pytest.raises(KafkaException, match="Config value append is not allowed for config key: retention.ms"):
        _incremental(admin, topic_name, ("retention.ms", "5", AlterConfigOpType.APPEND))


def test_validate_only_and_per_resource_errors(gateway, topic_name):
    admin = _admin(gateway)
    resource = _topic(admin, topic_name)
    _incremental(admin, topic_name, ("retention.ms", "1000", AlterConfigOpType.SET), validate_only=True)
    assert _describe(admin, resource)["retention.ms"].value == "604800000"

    def error(*entries) -> tuple[str, str]:
        with pytest.raises(KafkaException) as info:
            _incremental(admin, *entries)
        err = info.value.args[0]
        return err.name(), err.str()

    assert error(topic_name, ("retention.ms", "soon", AlterConfigOpType.SET)) == (
        "INVALID_CONFIG", "Invalid value soon for configuration retention.ms: Not a number of type LONG")
    assert error(topic_name, ("no.such.key", "1", AlterConfigOpType.SET)) == (
        "INVALID_CONFIG", "Unknown topic config name: no.such.key")
    assert error("missing-topic", ("retention.ms", "1", AlterConfigOpType.SET))[0] == "UNKNOWN_TOPIC_OR_PART"
    # Nothing half-applied after the errors.
    assert _describe(admin, resource)["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_alter_configs_replaces_the_whole_override_set(gateway, topic_name):
    admin = _admin(gateway)
    resource = _topic(admin, topic_name, {"retention.ms": "100000"})
    replace = ConfigResource(ConfigResource.Type.TOPIC, topic_name, set_config={"max.message.bytes": "2000"})
    admin.alter_configs([replace], request_timeout=10)[replace].result(10)
    configs = _describe(admin, resource)
    assert (configs["max.message.bytes"].value, configs["max.message.bytes"].source) == (
        "2000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value  # dropped: not in the request
    # The new limit applies at once: a record larger than max.message.bytes is refused.
    producer = Producer({"bootstrap.servers": gateway.bootstrap, "message.max.bytes": 100000})
    failures = []
    producer.produce(topic_name, value=b"y" * 5000, on_delivery=lambda err, _msg: failures.append(err))
    producer.flush(10)
    assert failures and failures[0] is not None and failures[0].name() == "MSG_SIZE_TOO_LARGE"


def test_kafka_python_alter_configs(gateway, topic_name):
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    admin = _admin(gateway)
    resource = _topic(admin, topic_name)
    client = KafkaAdminClient(bootstrap_servers=gateway.bootstrap, request_timeout_ms=10000)
    try:
        response = client.alter_configs([KConfigResource(ConfigResourceType.TOPIC, topic_name,
                                                         configs={"retention.ms": "3600000"})])
    finally:
        client.close()
    assert response == {"topic": {topic_name: "OK"}}
    assert _describe(admin, resource)["retention.ms"].value == "3600000"


def test_delete_records_moves_the_start_offset_and_drops_segments(gateway, topic_name):
    from confluent_kafka import Consumer

    admin = _admin(gateway)
    _topic(admin, topic_name, {"segment.bytes": "1024"})
    _produce(gateway, topic_name, 30)
    before = len(_segments(gateway, topic_name))
    tp = TopicPartition(topic_name, 0, 20)
    result = admin.delete_records([tp], request_timeout=10)[tp].result(10)
    assert result.low_watermark == 20 and _earliest(admin, topic_name) == 20
    assert len(_segments(gateway, topic_name)) < before

    # A consumer asking for an offset below it is out of range: with auto.offset.reset=error it is told so.
    consumer = Consumer({"bootstrap.servers": gateway.bootstrap, "group.id": topic_name,
                         "auto.offset.reset": "error", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic_name, 0, 5)])
        deadline = time.monotonic() + 10
        err = None
        while err is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is not None:
                err = msg.error()
        assert err is not None and "out of range" in err.str().lower()
    finally:
        consumer.close()

    too_far = TopicPartition(topic_name, 0, 31)
    with pytest.raises(KafkaException) as info:
        admin.delete_records([too_far], request_timeout=10)[too_far].result(10)
    assert info.value.args[0].name() == "OFFSET_OUT_OF_RANGE"

    gateway.stop()
    gateway.start()
    assert _earliest(_admin(gateway), topic_name) == 20


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_alter_configs_needs_alter_configs_and_delete_records_needs_delete(tmp_path):
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    authorizer = {**FAST, "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}

    def allow(name: str, op: AclOperation, pattern=ResourcePatternType.LITERAL) -> AclBinding:
        return AclBinding(ResourceType.TOPIC, name, pattern, "User:ANONYMOUS", "*", op, AclPermissionType.ALLOW)

    gw = InProcessGateway(tmp_path / "data", {**authorizer, "super.users": "User:ANONYMOUS"}).start()
    try:
        admin = _admin(gw)
        for topic in ("a-1", "b-1"):
            _topic(admin, topic)
            _produce(gw, topic, 3)
        # b-1 only describable: the clients reach the broker's own checks rather than stopping at Metadata.
        bindings = [allow("a-", AclOperation.ALTER_CONFIGS, ResourcePatternType.PREFIXED),
                    allow("a-", AclOperation.DELETE, ResourcePatternType.PREFIXED), allow("b-1", AclOperation.DESCRIBE)]
        for future in admin.create_acls(bindings, request_timeout=10).values():
            future.result()
    finally:
        gw.stop()
    gw = InProcessGateway(tmp_path / "data", authorizer).start()
    try:
        admin = _admin(gw)
        _incremental(admin, "a-1", ("retention.ms", "1000", AlterConfigOpType.SET))
        with pytest.raises(KafkaException) as info:
            _incremental(admin, "b-1", ("retention.ms", "1000", AlterConfigOpType.SET))
        assert info.value.args[0].name() == "TOPIC_AUTHORIZATION_FAILED"
        broker = ConfigResource(ConfigResource.Type.BROKER, "1", set_config={"log.retention.ms": "1000"})
        with pytest.raises(KafkaException) as info:
            admin.alter_configs([broker], request_timeout=10)[broker].result(10)
        assert info.value.args[0].name() == "CLUSTER_AUTHORIZATION_FAILED"

        allowed, denied = TopicPartition("a-1", 0, 2), TopicPartition("b-1", 0, 2)
        futures = admin.delete_records([allowed, denied], request_timeout=10)
        assert futures[allowed].result(10).low_watermark == 2
        with pytest.raises(KafkaException) as info:
            futures[denied].result(10)
        assert info.value.args[0].name() == "TOPIC_AUTHORIZATION_FAILED"
    finally:
        gw.stop()


def test_concurrent_incremental_changes_of_one_topic_all_stay(gateway, topic_name):
    import threading

    admin = _admin(gateway)
    resource = _topic(admin, topic_name)
    keys = {"retention.ms": "111111", "segment.ms": "222222", "flush.ms": "333333", "delete.retention.ms": "444444",
            "max.message.bytes": "55555", "segment.bytes": "6666666", "min.compaction.lag.ms": "777",
            "file.delete.delay.ms": "888", "index.interval.bytes": "999", "retention.bytes": "1234567"}
    errors: list[BaseException] = []

    def alter(items: list[tuple[str, str]]) -> None:
        client = _admin(gateway)
        try:
            for key, value in items:
                _incremental(client, topic_name, (key, value, AlterConfigOpType.SET))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    items = list(keys.items())
    threads = [threading.Thread(target=alter, args=(items[i::2],)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    configs = _describe(admin, resource)
    assert {k: configs[k].value for k in keys} == keys
    assert {configs[k].source for k in keys} == {ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def _stored_batches(gw, topic: str) -> list:
    from logway.wire.batch import iter_headers

    return [header for path in _segments(gw, topic) for _, header in iter_headers(path.read_bytes(), check_crc=False)]


def test_topic_config_changes_take_effect_without_a_restart(gateway, topic_name):
    """Segment size, compression, max message size, timestamp type, flush and cleanup policy, each by its effect."""
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer

    admin = _admin(gateway)
    _topic(admin, topic_name)
    _produce(gateway, topic_name, 3)
    assert len(_segments(gateway, topic_name)) == 1
    _incremental(admin, topic_name, ("segment.bytes", "300", AlterConfigOpType.SET),
                 ("compression.type", "gzip", AlterConfigOpType.SET),
                 ("message.timestamp.type", "LogAppendTime", AlterConfigOpType.SET),
                 ("flush.messages", "1", AlterConfigOpType.SET))
    _produce(gateway, topic_name, 12)
    assert len(_segments(gateway, topic_name)) > 3  # rolled at 300 bytes (a few small gzip batches each)
    codecs = [h.compression for h in _stored_batches(gateway, topic_name)]
    assert codecs[:3] == [0, 0, 0] and set(codecs[3:]) == {1}  # new batches stored gzip, as the topic now says
    plog = gateway.broker.partition(topic_name, 0)
    assert plog.recovery_point == plog.log_end_offset  # flush.messages=1: every append is flushed at once

    consumer = Consumer({"bootstrap.servers": gateway.bootstrap, "group.id": topic_name, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic_name])
        stamps = []
        while len(stamps) < 15:
            msg = consumer.poll(10)
            assert msg is not None and msg.error() is None
            stamps.append(msg.timestamp()[0])
    finally:
        consumer.close()
    assert stamps[3:] == [TIMESTAMP_LOG_APPEND_TIME] * 12  # the broker stamped the records after the change

    _incremental(admin, topic_name, ("max.message.bytes", "150", AlterConfigOpType.SET),
                 ("segment.bytes", None, AlterConfigOpType.DELETE))
    producer = Producer({"bootstrap.servers": gateway.bootstrap, "linger.ms": 0, "compression.type": "none",
                         "message.send.max.retries": 0})
    errors = []
    producer.produce(topic_name, value=b"y" * 400, on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(10)
    assert [e.name() for e in errors] == ["MSG_SIZE_TOO_LARGE"]

    _incremental(admin, topic_name, ("max.message.bytes", None, AlterConfigOpType.DELETE),
                 ("cleanup.policy", "compact", AlterConfigOpType.SET))
    keyless = Producer({"bootstrap.servers": gateway.bootstrap, "linger.ms": 0, "message.send.max.retries": 0})
    errors.clear()
    keyless.produce(topic_name, value=b"no key", on_delivery=lambda err, _msg: errors.append(err))
    keyless.flush(10)
    assert [e.name() for e in errors] == ["INVALID_RECORD"]  # a compacted topic refuses keyless records
