"""The proxy's per-client metrics: `metrics.port` serves Prometheus counters of what each client id produced
and fetched per topic, read from the frames as they pass (Produce and Fetch stay undecoded): small frames read
whole, and large ones (over 64 KiB) streamed, their record data spliced, counted from the fields around it."""

from __future__ import annotations

import datetime
import re
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from logway.wire.protocol import build, encode_body, read_uvarint, request_type, write_uvarint
from logway.wire.records import build_batch
from tests.proxy.prometheus_text import sample, scrape

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from compat_tests.kafka.wire_client import request_frame  # noqa: E402


@pytest.fixture(scope="module")
def metered_proxy(tmp_path_factory, logway_upstream, proxy_process_type) -> Iterator[tuple[object, int]]:
    from compat_tests.gateway_process import free_port  # noqa: PLC0415

    metrics_port = free_port()
    p = proxy_process_type(tmp_path_factory.mktemp("metered-proxy"), logway_upstream.bootstrap,
                           ("--override", f"metrics.port={metrics_port}"))
    p.start()
    p.wait_node_port(1)
    try:
        yield p, metrics_port
    finally:
        p.stop()


def test_bytes_in_and_out_per_topic_and_client_id(metered_proxy, topic_name):
    proxy, metrics_port = metered_proxy
    admin = AdminClient({"bootstrap.servers": proxy.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(15)
    producer = Producer({"bootstrap.servers": proxy.bootstrap, "client.id": "meter-producer", "linger.ms": 0})
    value = b"v" * 1000
    for _ in range(20):
        producer.produce(topic_name, value)
    assert producer.flush(15) == 0

    text = scrape(metrics_port)
    bytes_in = sample(text, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic_name,
                      client_id="meter-producer")
    assert bytes_in >= 20 * 1000  # the record batches, with their headers
    assert sample(text, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic_name,
                  client_id="meter-producer") == 20
    assert sample(text, "kafka_network_requestmetrics_requests_total", request="Produce",
                  version=_produce_version(text), client_id="meter-producer") >= 1
    assert sample(text, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic_name,
                  client_id="meter-consumer") == 0

    assert _consume(proxy, topic_name, "meter-consumer", 20) == 20
    bytes_out = sample(scrape(metrics_port), "kafka_server_brokertopicmetrics_bytesout_total", topic=topic_name,
                       client_id="meter-consumer")
    assert bytes_out >= 20 * 1000


def test_large_frames_streamed_are_counted_as_whole_ones(metered_proxy, topic_name):
    """Batches of 100 x 10 KB: every Produce request and Fetch response is about 1 MB, so the proxy streams them
    (splice), and still counts each record and each byte of record data (the batches' own headers included)."""
    proxy, metrics_port = metered_proxy
    admin = AdminClient({"bootstrap.servers": proxy.bootstrap})
    admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(15)
    producer = Producer({"bootstrap.servers": proxy.bootstrap, "client.id": "big-producer", "linger.ms": 200,
                         "batch.num.messages": 100, "compression.type": "none"})
    value = bytes(range(256)) * 40  # 10,240 bytes, as records in a batch take them (no compression)
    for i in range(400):
        producer.produce(topic_name, value, partition=i % 2)
    assert producer.flush(30) == 0

    text = scrape(metrics_port)
    labels = {"topic": topic_name, "client_id": "big-producer"}
    assert sample(text, "kafka_server_brokertopicmetrics_messagesin_total", **labels) == 400
    bytes_in = sample(text, "kafka_server_brokertopicmetrics_bytesin_total", **labels)
    assert 400 * len(value) < bytes_in < 400 * (len(value) + 100)  # + a few bytes per record, 61 per batch
    produce_requests = sample(text, "kafka_server_brokertopicmetrics_totalproducerequests_total", **labels)
    assert 2 <= produce_requests <= 40  # batched (at most 100 records each), not one request per record

    assert _consume(proxy, topic_name, "big-consumer", 400, {"fetch.min.bytes": 1 << 20, "fetch.wait.max.ms": 500}) == 400
    text = scrape(metrics_port)
    bytes_out = sample(text, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic_name,
                       client_id="big-consumer")
    assert bytes_out >= bytes_in  # every record fetched once at least, in the batches as the producer sent them
    outgoing = sample(text, "kafka_server_socket_server_metrics_outgoing_byte_total", client_id="big-consumer")
    assert outgoing > bytes_out  # the whole frames: record data and the fields around it


def test_a_streamed_produce_whose_records_run_past_its_end_costs_only_its_counts(metered_proxy, topic_name):
    """A 200 KB Produce whose record set claims more bytes than the frame holds: streamed all the same (the
    upstream refuses it), counted as a request without per-topic bytes; the proxy goes on serving."""
    proxy, metrics_port = metered_proxy
    records = build_batch([(None, b"r" * 1000, ())] * 200)
    body = encode_body(build(request_type(0, 9), {
        "transactional_id": None, "acks": 1, "timeout": datetime.timedelta(seconds=5),
        "topic_data": [{"name": topic_name, "partition_data": [{"index": 0, "records": records}]}]}))
    at = body.index(records) - 3  # the record set's compact length: 3 bytes for a size of about 200 KB
    assert read_uvarint(body, at) == (len(records) + 1, at + 3)
    lying = body[:at] + write_uvarint(len(records) + 1 + 10_000_000)[:3] + body[at + 3:]
    with socket.create_connection(("127.0.0.1", proxy.node_port(1)), timeout=10) as sock:
        sock.sendall(request_frame(0, 9, lying, 1, client_id="liar"))
        sock.settimeout(10)
        try:
            sock.recv(1 << 16)  # an error, or the connection closed by the upstream's refusal
        except OSError:
            pass
    text = scrape(metrics_port)
    assert sample(text, "kafka_network_requestmetrics_requests_total", request="Produce", version="9",
                  client_id="liar") == 1
    assert sample(text, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic_name, client_id="liar") == 0
    producer = Producer({"bootstrap.servers": proxy.bootstrap, "client.id": "honest", "linger.ms": 0})
    producer.produce(topic_name, b"after the liar")
    assert producer.flush(15) == 0
    assert sample(scrape(metrics_port), "kafka_server_brokertopicmetrics_messagesin_total", topic=topic_name,
                  client_id="honest") == 1


def _consume(proxy, topic: str, client_id: str, count: int, config: dict | None = None) -> int:
    """Read ``topic`` from the start as group ``topic`` until ``count`` records came (or 30 s): how many came."""
    consumer = Consumer({"bootstrap.servers": proxy.bootstrap, "client.id": client_id, "group.id": topic,
                         "auto.offset.reset": "earliest", **(config or {})})
    consumer.subscribe([topic])
    got, deadline = 0, time.monotonic() + 30
    while got < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        got += message is not None and message.error() is None
    consumer.close()
    return got


def _produce_version(text: str) -> str:
    match = re.search(r'kafka_network_requestmetrics_requests_total\{[^}]*request="Produce"[^}]*version="(\d+)"', text)
    assert match, "no Produce request counted"
    return match.group(1)
