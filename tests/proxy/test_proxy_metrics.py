"""The proxy's per-client metrics: `metrics.port` serves Prometheus counters of what each client id produced
and fetched per topic, read from the frames as they pass (Produce and Fetch stay undecoded)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.proxy.prometheus_text import sample, scrape


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

    consumer = Consumer({"bootstrap.servers": proxy.bootstrap, "client.id": "meter-consumer", "group.id": topic_name,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic_name])
    got, deadline = 0, time.monotonic() + 20
    while got < 20 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        got += message is not None and message.error() is None
    consumer.close()
    assert got == 20
    bytes_out = sample(scrape(metrics_port), "kafka_server_brokertopicmetrics_bytesout_total", topic=topic_name,
                       client_id="meter-consumer")
    assert bytes_out >= 20 * 1000


def _produce_version(text: str) -> str:
    match = re.search(r'kafka_network_requestmetrics_requests_total\{[^}]*request="Produce"[^}]*version="(\d+)"', text)
    assert match, "no Produce request counted"
    return match.group(1)
