"""Dynamic broker configs (IncrementalAlterConfigs / AlterConfigs on BROKER resources) through confluent-kafka's
AdminClient, checked by effect: retention and segment size change without a restart, survive one, and
DescribeConfigs names where each value comes from."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic
from polling import wait_for
from raw_requests import exchange

from logway.gateway.in_process import InProcessGateway

# Maintenance every 100 ms and segment files unlinked at once, so retention shows within a second.
FAST = {"log.retention.check.interval.ms": "100", "log.segment.delete.delay.ms": "0", "node.id": "1"}
SET, DELETE, APPEND = AlterConfigOpType.SET, AlterConfigOpType.DELETE, AlterConfigOpType.APPEND


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    gw = InProcessGateway(tmp_path_factory.mktemp("dyn") / "data", FAST).start()
    try:
        yield gw
    finally:
        gw.stop()


def _admin(gw) -> AdminClient:
    return AdminClient({"bootstrap.servers": gw.bootstrap})


def _broker(name: str, *entries: tuple[str, str | None, AlterConfigOpType]) -> ConfigResource:
    return ConfigResource(ConfigResource.Type.BROKER, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=op) for key, value, op in entries])


def _alter(gw, resource: ConfigResource, validate_only: bool = False) -> None:
    admin = _admin(gw)  # referenced until the result is in: a dropped client cancels its requests
    admin.incremental_alter_configs([resource], validate_only=validate_only, request_timeout=10)[resource].result(10)


def _alter_cluster_default(gw, configs: dict[str, tuple[str, str | None]], validate_only: bool = False) -> None:
    """IncrementalAlterConfigs on the cluster default (resource ""), as `kafka-configs --entity-default` sends it
    (test_tools.py runs that tool); confluent-kafka and kafka-python cannot name it, so it goes raw here."""
    ops = {"SET": 0, "DELETE": 1, "APPEND": 2, "SUBTRACT": 3}
    entries = [{"name": k, "config_operation": ops[op], "value": v} for k, (op, v) in configs.items()]
    with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as s:
        resp = exchange(s, 44, 1, {"resources": [{"resource_type": 4, "resource_name": "", "configs": entries}],
                                   "validate_only": validate_only})
    assert [r.error_code.name for r in resp.responses] == ["none"], resp


def _describe_cluster_default(gw) -> dict:
    with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as s:
        resp = exchange(s, 32, 4, {"resources": [{"resource_type": 4, "resource_name": "", "configuration_keys": None}],
                                   "include_synonyms": True, "include_documentation": False})
    return {c.name: (c.value, c.config_source) for c in resp.results[0].configs}


def _describe(gw, kind: ConfigResource.Type, name: str) -> dict:
    resource = ConfigResource(kind, name)
    admin = _admin(gw)
    return admin.describe_configs([resource], request_timeout=10)[resource].result(timeout=10)


def _produce(gw, topic: str, count: int, size: int = 200) -> None:
    producer = Producer({"bootstrap.servers": gw.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(count):
        producer.produce(topic, value=b"x" * size, key=str(i).encode())
        producer.flush(10)  # one batch per record
    assert producer.flush(10) == 0


def _segments(gw, topic: str) -> list[Path]:
    return sorted((gw.data_dir / f"{topic}-0").glob("*.log"))



def test_cluster_default_retention_deletes_old_segments_of_topics_without_an_override(gateway, topic_name):
    admin = _admin(gateway)
    plain, kept = topic_name, topic_name + "-kept"
    admin.create_topics([NewTopic(plain, 1, 1, config={"segment.bytes": "1024"}),
                         NewTopic(kept, 1, 1, config={"segment.bytes": "1024", "retention.ms": "-1"})])[plain].result(10)
    time.sleep(0.2)
    _produce(gateway, plain, 20)
    _produce(gateway, kept, 20)
    before_plain, before_kept = len(_segments(gateway, plain)), len(_segments(gateway, kept))
    assert before_plain > 3 and before_kept > 3
    time.sleep(0.3)
    try:
        _alter_cluster_default(gateway, {"log.retention.ms": ("SET", "100")})
        wait_for(lambda: len(_segments(gateway, plain)) == 1)  # all but the active segment, no restart
        time.sleep(0.5)
        assert len(_segments(gateway, kept)) == before_kept  # its own retention.ms wins
        entry = _describe(gateway, ConfigResource.Type.TOPIC, plain)["retention.ms"]
        assert (entry.value, entry.source) == ("100", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
        assert [(s.name, s.value, s.source) for s in entry.synonyms.values()][0] == (
            "log.retention.ms", "100", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
        assert _describe_cluster_default(gateway) == {"log.retention.ms": ("100", 3)}  # DYNAMIC_DEFAULT_BROKER
    finally:
        _alter_cluster_default(gateway, {"log.retention.ms": ("DELETE", None)})
    assert _describe(gateway, ConfigResource.Type.TOPIC, plain)["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def test_per_broker_segment_size_rolls_segments_and_survives_a_restart(gateway, topic_name):
    admin = _admin(gateway)
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(10)
    time.sleep(0.2)
    _alter_cluster_default(gateway, {"log.segment.bytes": ("SET", "2097152")})
    _alter(gateway, _broker("1", ("log.segment.bytes", "1500", SET), ("log.cleanup.policy", "compact", APPEND)))
    try:
        _produce(gateway, topic_name, 20)
        assert len(_segments(gateway, topic_name)) >= 4  # ~1.5 KiB segments (5 records) instead of 1 GiB
        for _ in range(2):
            entry = _describe(gateway, ConfigResource.Type.BROKER, "1")["log.segment.bytes"]
            assert (entry.value, entry.source, entry.is_read_only) == ("1500", ConfigSource.DYNAMIC_BROKER_CONFIG.value,
                                                                       False)
            # (confluent-kafka keeps one synonym per name; their order is compared with Kafka's by the harness)
            policy = _describe(gateway, ConfigResource.Type.TOPIC, topic_name)["cleanup.policy"]
            assert (policy.value, policy.source) == ("delete,compact", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
            gateway.stop()  # persisted under the first log dir: the same after a restart
            gateway.start()
    finally:
        _alter(gateway, _broker("1", ("log.segment.bytes", None, DELETE), ("log.cleanup.policy", None, DELETE)))
        _alter_cluster_default(gateway, {"log.segment.bytes": ("DELETE", None)})
    assert _describe(gateway, ConfigResource.Type.BROKER, "1")["log.segment.bytes"].value == "1073741824"


@pytest.mark.parametrize(("name", "entry", "error"), [
    ("1", ("num.partitions", "3", SET), "Cannot update these configs dynamically"),
    ("1", ("log.retention.hours", "3", SET), "Cannot update these configs dynamically"),
    ("1", ("log.retention.ms", "soon", SET), "Not a number"),
    ("1", ("num.io.threads", "4", SET), "only at start-up"),
    ("1", ("max.connections", "40", SET), "only at start-up"),  # dynamic in Kafka: not "Cannot update"
])
def test_configs_that_cannot_change_get_kafkas_invalid_request(gateway, name, entry, error):
    with pytest.raises(KafkaException, match=error) as info:
        _alter(gateway, _broker(name, entry))
    assert info.value.args[0].name() == "INVALID_REQUEST"


def test_validate_only_changes_nothing(gateway):
    _alter_cluster_default(gateway, {"log.retention.ms": ("SET", "5")}, validate_only=True)
    assert _describe_cluster_default(gateway) == {}
    saved = gateway.data_dir / "dynamic-broker-default.json"
    assert not saved.exists() or "log.retention.ms" not in saved.read_text()


def test_stored_configs_that_no_longer_apply_are_skipped_and_a_corrupt_file_stops_start_up(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "dynamic-broker-default.json").write_text(json.dumps(
        {"log.retention.ms": "3600000", "num.partitions": "7", "log.segment.bytes": "lots", "x=y\nz": "odd"}))
    gw = InProcessGateway(data, {"node.id": "1"}).start()
    try:
        assert _describe_cluster_default(gw) == {"log.retention.ms": ("3600000", 3), "x=y\nz": (None, 3)}
        assert gw.broker.logs.default_config.retention_ms == 3600000
    finally:
        gw.stop()
    (data / "dynamic-broker-1.json").write_text("{not json")
    with pytest.raises(RuntimeError) as info:
        InProcessGateway(data, {"node.id": "1"}).start()
    assert "dynamic-broker-1.json" in str(info.value.__cause__)


def test_kafka_python_alters_and_describes_this_brokers_configs(gateway, topic_name):
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource as PyResource

    admin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap, request_timeout_ms=10000)
    try:
        admin.alter_configs([PyResource("BROKER", "1", {"message.max.bytes": ("SET", "300")})], incremental=True)
        described = admin.describe_configs([PyResource("BROKER", "1", ["message.max.bytes"])])
        entry = described["broker"]["1"]["message.max.bytes"]
        assert (entry["value"], entry["config_source"], entry["read_only"]) == ("300", "DYNAMIC_BROKER_CONFIG", False)
        # Topics without a max.message.bytes override now refuse larger batches.
        producer = Producer({"bootstrap.servers": gateway.bootstrap, "linger.ms": 0, "message.send.max.retries": 0})
        errors = []
        producer.produce(topic_name, value=b"z" * 500, on_delivery=lambda err, _msg: errors.append(err))
        producer.flush(10)
        assert [e.name() for e in errors] == ["MSG_SIZE_TOO_LARGE"]
    finally:
        admin.alter_configs([PyResource("BROKER", "1", {"message.max.bytes": ("DELETE", None)})], incremental=True)
        admin.close()
