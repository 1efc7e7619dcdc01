"""Client metrics (proxy/filters/client_metrics.py): per-client, per-topic counters from undecoded frames, and
the walks that find each topic's record bytes in them (proxy/produce_walk.py, proxy/fetch_walk.py).

Frames are kio-encoded Produce requests and Fetch responses carrying real v2 record batches, at every
version, walked whole and fed in pieces of any size (as they arrive when streamed); the counters are read
back from a Prometheus registry as a scrape would see them.
"""

from __future__ import annotations

import datetime
import uuid

import pytest
from kio.schema.index import schema_name_map
from prometheus_client import CollectorRegistry, generate_latest

from logway.proxy.chain import FilterChain
from logway.proxy.fetch_walk import FetchWalk, fetch_record_sets
from logway.proxy.filters.base import REQUEST, RESPONSE, ClientInfo, Frame
from logway.proxy.filters.client_metrics import OTHER, ClientMetrics, request_name
from logway.proxy.filters.tenant import TopicIdDirectory
from logway.proxy.produce_walk import ProduceWalk, produce_record_sets
from logway.proxy.walk import Walk
from logway.wire.errors import ErrorCode, MalformedRequest
from logway.wire.protocol import build, encode_body, request_type, response_header_bytes, response_type
from logway.wire.records import build_batch

ORDERS_ID, CLICKS_ID = uuid.uuid4(), uuid.uuid4()
THREE = build_batch([(b"k", b"v" * 100, ()), (None, b"w", ()), (b"k2", None, ())])
ONE = build_batch([(None, b"x" * 10, ())])


def produce_body(version: int) -> bytes:
    def topic(name, topic_id, parts):
        ident = {"topic_id": topic_id} if version >= 13 else {"name": name}
        return {**ident, "partition_data": [{"index": i, "records": r} for i, r in parts]}

    data = {
        "transactional_id": "tx" if version >= 3 else None,
        "acks": -1,
        "timeout": datetime.timedelta(seconds=1),
        "topic_data": [
            topic("orders", ORDERS_ID, [(0, THREE), (1, THREE + ONE)]),
            topic("clicks", CLICKS_ID, [(0, None)]),
        ],
    }
    return encode_body(build(request_type(0, version), data))


def fetch_frame(version: int) -> bytes:
    """A Fetch response frame (no size prefix): correlation id, header tags (v12+), body."""
    return response_header_bytes(1, version, 7) + fetch_body(version)


def fetch_body(version: int) -> bytes:
    def partition(index, records):
        return {
            "partition_index": index,
            "error_code": ErrorCode.none,
            "high_watermark": 10,
            "aborted_transactions": [{"producer_id": 7, "first_offset": 3}],
            "diverging_epoch": {"epoch": 4, "end_offset": 9},  # a tagged field from v12
            "records": records,
        }

    def topic(name, topic_id, parts):
        ident = {"topic_id": topic_id} if version >= 13 else {"topic": name}
        return {**ident, "partitions": parts}

    data = {
        "throttle_time": datetime.timedelta(0),
        "error_code": ErrorCode.none,
        "responses": [
            topic("orders", ORDERS_ID, [partition(0, THREE), partition(1, ONE)]),
            topic("clicks", CLICKS_ID, [partition(0, None)]),
        ],
        "node_endpoints": [{"node_id": 1, "host": "kafka1", "port": 9092}],  # tagged, v16+
    }
    return encode_body(build(response_type(1, version), data))


def key(version: int, name: str, topic_id: uuid.UUID):
    return topic_id if version >= 13 else name


def walk_in_pieces(walk: Walk, data: bytes, piece: int) -> bytes:
    """Feed ``data`` to ``walk`` ``piece`` bytes at a time as they would arrive; the bytes it walked over."""
    out, pos, have = [], 0, 0
    while not walk.at_tail:
        have = min(len(data), max(have, pos) + piece)
        fields, opaque = walk.step(memoryview(data)[pos:have])
        assert fields or opaque or walk.at_tail or have < len(data)
        out.append(data[pos : pos + fields + opaque])
        pos += fields + opaque
    return b"".join(out) + data[pos:]


@pytest.mark.parametrize("version", sorted(schema_name_map["produce"]))
def test_produce_request_walk_finds_each_topics_record_bytes(version: int) -> None:
    expected = {
        key(version, "orders", ORDERS_ID): (2 * len(THREE) + len(ONE), 7),
        key(version, "clicks", CLICKS_ID): (0, 0),
    }
    assert produce_record_sets(version, produce_body(version)) == expected
    for piece in (1, 7, 61, 1000):
        walk = ProduceWalk(version)
        assert walk_in_pieces(walk, produce_body(version), piece) == produce_body(version)
        assert walk.record_sets == expected


@pytest.mark.parametrize("version", sorted(schema_name_map["fetch"]))
def test_fetch_response_walk_finds_each_topics_record_bytes(version: int) -> None:
    expected = {key(version, "orders", ORDERS_ID): len(THREE) + len(ONE), key(version, "clicks", CLICKS_ID): 0}
    assert {topic: nbytes for topic, (nbytes, _) in fetch_record_sets(version, fetch_frame(version)).items()} == expected
    for piece in (1, 13, 1000):
        walk = FetchWalk(version)
        assert walk_in_pieces(walk, fetch_frame(version)[4:], piece) == fetch_frame(version)[4:]
        assert {topic: nbytes for topic, (nbytes, _) in walk.record_sets.items()} == expected


def test_batches_are_counted_from_valid_v2_headers_only() -> None:
    """Records come from each v2 batch header's recordsCount; a record set that is not v2, or whose next header
    is torn or invalid (batchLength under 49, as Kafka's DefaultRecordBatch refuses), counts no further."""
    version = 9

    def sets(*record_sets: bytes) -> dict:
        body = encode_body(build(request_type(0, version), {
            "transactional_id": None, "acks": 1, "timeout": datetime.timedelta(seconds=1),
            "topic_data": [{"name": "t", "partition_data": [{"index": i, "records": r}
                                                           for i, r in enumerate(record_sets)]}]}))
        return produce_record_sets(version, body)

    v1 = bytearray(THREE)
    v1[16] = 1
    short_length = bytearray(ONE)
    short_length[8:12] = (48).to_bytes(4, "big")
    assert sets(THREE, bytes(v1), THREE[:60], bytes(short_length) + THREE) == {
        "t": (2 * len(THREE) + 60 + len(ONE) + len(THREE), 3)}


def test_bytes_that_do_not_walk_are_refused() -> None:
    body = produce_body(9)
    for cut in (0, 3, 10, len(body) // 2, len(body) - 2):  # (the last byte, the top-level tags: not walked)
        with pytest.raises(MalformedRequest):
            produce_record_sets(9, body[:cut])
    with pytest.raises(MalformedRequest):
        produce_record_sets(9, b"\xff" * 8)  # a varint longer than 5 bytes
    with pytest.raises(MalformedRequest):
        fetch_record_sets(12, b"\x00" * 14 + b"\xff\xff\xff\xff\x0f")  # a record set past the end


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def learn_ids(metrics: ClientMetrics, client: ClientInfo) -> None:
    response = build(
        response_type(3, 12),
        {
            "throttle_time": 0,
            "topics": [
                {"name": n, "topic_id": i, "error_code": ErrorCode.none}
                for n, i in (("orders", ORDERS_ID), ("clicks", CLICKS_ID))
            ],
        },
    )
    assert metrics.on_response(client, 3, 12, None, response) is response


@pytest.mark.parametrize(("produce_v", "fetch_v"), [(9, 12), (13, 18), (3, 4)])
def test_counters_per_client_and_topic_as_prometheus_sees_them(produce_v: int, fetch_v: int) -> None:
    registry = CollectorRegistry()
    metrics = ClientMetrics(registry)
    app, other = ClientInfo(client_id="app"), ClientInfo(client_id="batch-job")
    learn_ids(metrics, app)

    produce = produce_body(produce_v)
    metrics.on_frame(app, Frame(REQUEST, 0, produce_v, len(produce) + 30, produce_record_sets(produce_v, produce)))
    metrics.on_frame(app, Frame(RESPONSE, 0, produce_v, 50))
    fetch = fetch_frame(fetch_v)
    metrics.on_frame(other, Frame(REQUEST, 1, fetch_v, 80))
    for _ in range(2):
        metrics.on_frame(other, Frame(RESPONSE, 1, fetch_v, len(fetch) + 4, fetch_record_sets(fetch_v, fetch)))

    orders_app = {"topic": "orders", "client_id": "app"}
    assert sample(registry, "kafka_server_brokertopicmetrics_bytesin_total", **orders_app) == 2 * len(THREE) + len(ONE)
    assert sample(registry, "kafka_server_brokertopicmetrics_messagesin_total", **orders_app) == 7
    assert sample(registry, "kafka_server_brokertopicmetrics_totalproducerequests_total", **orders_app) == 1
    orders_job = {"topic": "orders", "client_id": "batch-job"}
    assert sample(registry, "kafka_server_brokertopicmetrics_bytesout_total", **orders_job) == 2 * (
        len(THREE) + len(ONE)
    )
    assert sample(registry, "kafka_server_brokertopicmetrics_totalfetchrequests_total", **orders_job) == 2
    assert sample(registry, "kafka_server_brokertopicmetrics_bytesout_total", **orders_app) == 0
    requests = "kafka_network_requestmetrics_requests_total"
    assert sample(registry, requests, request="Produce", version=str(produce_v), client_id="app") == 1
    assert sample(registry, requests, request="Fetch", version=str(fetch_v), client_id="batch-job") == 1
    assert (
        sample(registry, "kafka_server_socket_server_metrics_incoming_byte_total", client_id="app") == len(produce) + 30
    )
    assert sample(registry, "kafka_server_socket_server_metrics_outgoing_byte_total", client_id="batch-job") == 2 * (
        len(fetch) + 4
    )
    assert b'kafka_server_brokertopicmetrics_bytesin_total{client_id="app",topic="orders"}' in generate_latest(registry)


def test_topic_ids_resolve_through_a_shared_directory() -> None:
    directory = TopicIdDirectory()
    directory.learn(ORDERS_ID, "tenant-a.orders")
    registry = CollectorRegistry()
    metrics = ClientMetrics(registry, topic_ids=directory)
    fetch = fetch_frame(13)
    metrics.on_frame(ClientInfo(client_id="c"), Frame(RESPONSE, 1, 13, len(fetch) + 4, fetch_record_sets(13, fetch)))
    assert sample(
        registry, "kafka_server_brokertopicmetrics_bytesout_total", topic="tenant-a.orders", client_id="c"
    ) == len(THREE) + len(ONE)
    # an id nobody has seen in a Metadata response is labelled by the id itself
    assert sample(registry, "kafka_server_brokertopicmetrics_bytesout_total", topic=str(CLICKS_ID), client_id="c") == 0
    assert (
        registry.get_sample_value(
            "kafka_server_brokertopicmetrics_totalfetchrequests_total", {"topic": str(CLICKS_ID), "client_id": "c"}
        )
        == 1
    )


def test_hostile_bytes_cost_only_the_per_topic_counts() -> None:
    """Through a connection's chain, as the proxy counts frames it forwards whole."""
    registry = CollectorRegistry()
    metrics = ClientMetrics(registry)
    chain = FilterChain([metrics], ClientInfo(client_id="evil"))
    body = produce_body(9)
    for cut in (0, 3, 10, len(body) // 2, len(body) - 2):
        chain.observe_request(0, 9, b"header" + body[:cut], len(b"header"))
    chain.observe_request(0, 9, b"\xff" * 8, 0)  # huge lengths
    chain.observe_response(1, 12, b"\x00" * 15 + b"\xff\xff\xff\xff\x0f")
    produce_requests = "kafka_server_brokertopicmetrics_totalproducerequests_total"
    assert not [s for m in registry.collect() for s in m.samples if s.name == produce_requests]
    assert sample(registry, "kafka_network_requestmetrics_requests_total", request="Produce", version="9",
                  client_id="evil") == 6
    assert sample(registry, "kafka_server_socket_server_metrics_outgoing_byte_total", client_id="evil") == 24


def test_label_values_are_bounded_against_hostile_client_ids() -> None:
    registry = CollectorRegistry()
    metrics = ClientMetrics(registry, max_label_values=3)
    for i in range(10):
        metrics.on_frame(ClientInfo(client_id=f"c{i}" + "x" * 1000), Frame(REQUEST, 18, 3, 10))
    clients = {s.labels["client_id"] for m in registry.collect() for s in m.samples if "client_id" in s.labels}
    assert len(clients) == 4 and OTHER in clients
    assert max(map(len, clients)) == 255
    assert (
        sample(
            registry, "kafka_network_requestmetrics_requests_total", request="ApiVersions", version="3", client_id=OTHER
        )
        == 7
    )


def test_request_names_are_kafkas() -> None:
    assert [request_name(k) for k in (0, 2, 9, 68)] == [
        "Produce",
        "ListOffsets",
        "OffsetFetch",
        "ConsumerGroupHeartbeat",
    ]


def test_it_decodes_only_metadata_and_observes_every_frame() -> None:
    metrics = ClientMetrics(CollectorRegistry())
    assert [k for k in range(100) if metrics.handles_response(k, 12)] == [3]
    assert not any(metrics.handles_request(k, 12) for k in range(100))
    assert metrics.observes
