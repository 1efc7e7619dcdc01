"""The record-validation filter end to end: `logway proxy` with record-validation filters in front of a Logway
broker process, real clients (librdkafka, the Java client). A partition with an invalid record gets
INVALID_RECORD with the record's index, nothing of it reaches the upstream, and the other partitions of the
same request go through. Avro records are checked against a schema registry: no registry implementation is
installable here (Karapace is not on PyPI, Confluent's is not on Maven Central, Apicurio's Maven artifact is a
Quarkus app to be built), so the registry is a small HTTP server of the test's own answering Confluent's
GET /schemas/ids/{id}; the records are framed as Confluent's serializers frame them (fastavro's encoding)."""

from __future__ import annotations

import io
import json
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import fastavro
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "compat_tests" / "matrix"))

ORDER = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"},
                                                       {"name": "item", "type": "string"}]}
SCHEMA_ID = 7
JSON_SCHEMA = {"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}}


class _Registry(BaseHTTPRequestHandler):
    schemas = {SCHEMA_ID: {"schema": json.dumps(ORDER)}}
    asked: list[int] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        schema_id = int(self.path.rsplit("/", 1)[-1]) if self.path.startswith("/schemas/ids/") else -1
        self.asked.append(schema_id)
        body = self.schemas.get(schema_id)
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.end_headers()
        self.wfile.write(json.dumps(body or {"error_code": 40403, "message": "Schema not found"}).encode())

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def registry():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def checking_proxy(tmp_path_factory, logway_upstream, proxy_process_type, registry):
    work = tmp_path_factory.mktemp("validating")
    (work / "schema.json").write_text(json.dumps(JSON_SCHEMA))
    settings = {"proxy.filters": "json,avro",
                "proxy.filter.json.type": "record-validation", "proxy.filter.json.topics": "json-.*",
                "proxy.filter.json.check": "json-schema", "proxy.filter.json.schema.file": str(work / "schema.json"),
                "proxy.filter.avro.type": "record-validation", "proxy.filter.avro.topics": "avro-.*",
                "proxy.filter.avro.check": "avro", "proxy.filter.avro.schema.registry.url": registry}
    extra = tuple(arg for key, value in settings.items() for arg in ("--override", f"{key}={value}"))
    p = proxy_process_type(work, logway_upstream.bootstrap, extra).start()
    p.wait_node_port(1)
    try:
        yield p
    finally:
        p.stop()


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(15)


def _produce(bootstrap: str, topic: str, records: list[tuple[int, bytes | None]]) -> list[tuple]:
    """(partition, value, error code or None) of each record, produced in one go (one batch per partition)."""
    reports: list[tuple] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "enable.idempotence": False})
    for partition, value in records:
        producer.produce(topic, value=value, partition=partition,
                         on_delivery=lambda err, msg: reports.append(
                             (msg.partition(), msg.value(), None if err is None else err.code())))
    assert producer.flush(30) == 0
    return reports


def _stored(bootstrap: str, topic: str, partitions: int, count: int) -> list[tuple]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-check",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[tuple] = []
    deadline = time.monotonic() + 20
    while len(got) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append((message.partition(), message.value()))
    for message in consumer.consume(100, 1.0):  # nothing more than that
        got.append((message.partition(), message.value()))
    consumer.close()
    return sorted(got)


def _avro(value: dict, schema_id: int = SCHEMA_ID) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(ORDER), value)
    return struct.pack(">bI", 0, schema_id) + out.getvalue()


def test_librdkafka_json_schema_a_bad_record_fails_its_partition_only(checking_proxy, logway_upstream, topic_name):
    topic = f"json-{topic_name}"
    _create(checking_proxy.bootstrap, topic, 2)
    good = [(0, b'{"id": 1}'), (0, b'{"id": 2, "x": [1]}'), (1, b'{"id": 3}')]
    bad = [(1, b'{"id": "three"}'), (1, b"not json")]
    reports = _produce(checking_proxy.bootstrap, topic, good + bad)
    assert sorted(r for r in reports if r[2] is None) == sorted((p, v, None) for p, v in good[:2])
    # The whole batch of partition 1 fails: librdkafka reads record_errors, so the bad records get INVALID_RECORD
    # and the good one beside them "an invalid record in the same batch caused the failure of this message too".
    assert {r[1]: r[2] for r in reports if r[0] == 1} == {
        good[2][1]: KafkaError._INVALID_DIFFERENT_RECORD, bad[0][1]: KafkaError.INVALID_RECORD,
        bad[1][1]: KafkaError.INVALID_RECORD}
    assert _stored(logway_upstream.bootstrap, topic, 2, 2) == sorted(good[:2])  # nothing of partition 1 upstream
    assert sorted(r for r in _produce(checking_proxy.bootstrap, topic, [(1, b'{"id": 4}')]) if r[2] is None)


def test_librdkafka_avro_against_the_schema_registry(checking_proxy, logway_upstream, topic_name):
    topic = f"avro-{topic_name}"
    _create(checking_proxy.bootstrap, topic, 3)
    good = [(0, _avro({"id": 1, "item": "tea"})), (0, _avro({"id": 2, "item": "milk"}))]
    reports = _produce(checking_proxy.bootstrap, topic, good + [
        (1, _avro({"id": 1, "item": "x"})[:-2]),  # a datum cut short
        (2, _avro({"id": 5, "item": "y"}, schema_id=99))])  # no such schema
    assert sorted(r for r in reports if r[2] is None) == sorted((p, v, None) for p, v in good)
    assert sorted((r[0], r[2]) for r in reports if r[2] is not None) == [(1, KafkaError.INVALID_RECORD),
                                                                          (2, KafkaError.INVALID_RECORD)]
    assert _stored(logway_upstream.bootstrap, topic, 3, 2) == sorted(good)
    _produce(checking_proxy.bootstrap, topic, good)
    assert _Registry.asked.count(SCHEMA_ID) == 1  # cached


def test_java_client_gets_per_record_errors_and_valid_records_are_accepted(checking_proxy, logway_upstream,
                                                                          tmp_path):
    from programs import java
    from records import Rec, unique, write_spec

    topic = unique("json-java")
    _create(checking_proxy.bootstrap, topic, 1)
    values = [b'{"id": 1}', b'{"id": "one"}', b'{"id": 2}', b"[1, 2", b'{"id": 3}']
    out = java("each", checking_proxy.bootstrap, topic, write_spec(tmp_path, "each", [Rec(0, None, v) for v in values]))
    assert out.sent == [(0, 0), (0, 1), (0, 2)]
    assert set(out.facts) == {"failed.1", "failed.3"}
    assert out.facts["failed.1"].startswith("InvalidRecordException: record 0: does not match the schema at /id")
    assert out.facts["failed.3"].startswith("InvalidRecordException: record 0: not valid JSON")
    assert _stored(logway_upstream.bootstrap, topic, 1, 3) == [(0, values[0]), (0, values[2]), (0, values[4])]
