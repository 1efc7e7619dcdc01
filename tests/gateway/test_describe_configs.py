"""DescribeConfigs and FindCoordinator answers shaped as Apache Kafka 4's (found by compat_tests/kafka)."""

from __future__ import annotations

import socket
import struct

from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

from logway.wire.protocol import build, encode_body, request_type, response_type
from logway.wire.protocol import reader_for as reader


def _describe(admin: AdminClient, resource: ConfigResource) -> dict:
    return admin.describe_configs([resource], request_timeout=10)[resource].result(timeout=10)


def _synonyms(entry) -> list[tuple[str, str, ConfigSource]]:
    return sorted((s.name, s.value, ConfigSource(s.source)) for s in entry.synonyms.values())


def test_topic_config_synonyms_are_the_override_and_the_primary_broker_config(logway, topic_name):
    admin = AdminClient({"bootstrap.servers": logway.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, 1, config={"segment.bytes": "1048576"})])[topic_name].result(10)
    configs = _describe(admin, ConfigResource(ConfigResource.Type.TOPIC, topic_name))
    assert _synonyms(configs["segment.bytes"]) == [
        ("log.segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG),
        ("segment.bytes", "1048576", ConfigSource.DYNAMIC_TOPIC_CONFIG)]
    assert _synonyms(configs["cleanup.policy"]) == [("log.cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG)]
    # log.retention.ms, Kafka's primary synonym of retention.ms, has no default: no synonym at all.
    assert _synonyms(configs["retention.ms"]) == []


def test_broker_configs_carry_kafkas_flags_and_defaults(logway):
    admin = AdminClient({"bootstrap.servers": logway.bootstrap})
    configs = _describe(admin, ConfigResource(ConfigResource.Type.BROKER, "1"))
    assert configs["message.max.bytes"].value == "1048588" and not configs["message.max.bytes"].is_read_only
    assert configs["num.partitions"].is_read_only
    assert configs["log.retention.hours"].value == "168"
    assert configs["broker.id"].value == "1"
    assert "cluster.id" not in configs


def test_find_coordinator_for_an_unknown_key_type_is_an_invalid_request(logway):
    body = encode_body(build(request_type(10, 3), {"key": "g", "key_type": 7}))
    header = struct.pack(">hhih", 10, 3, 1, 1) + b"t" + b"\x00"
    with socket.create_connection(("127.0.0.1", logway.port), timeout=5) as s:
        s.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        (size,) = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))
        frame = s.recv(size, socket.MSG_WAITALL)
    resp, _ = reader(response_type(10, 3))(frame, 5)  # after the correlation id and the header's tagged fields
    assert resp.error_code.name == "invalid_request"
    assert resp.node_id == -1
