"""Broker addresses in upstream responses of a 3-broker cluster (node ids 1, 2, 5), rewritten at every version
kio knows: built with kio, encoded as the upstream sends them, rewritten through the proxy's bytes path."""

from __future__ import annotations

import pytest

from logway.proxy.addresses import BrokerAddressing, NodeOutOfRange, parse_node_id_range
from logway.proxy.api_versions import advertised_ranges, kio_range
from logway.proxy.frames import decode_response, encode_response_frame
from logway.proxy.rewrite import (
    DESCRIBE_CLUSTER,
    FETCH,
    FIND_COORDINATOR,
    METADATA,
    PRODUCE,
    endpoint_markers,
    may_carry_endpoints,
    rewrite_addresses,
    upstream_endpoints,
)
from logway.wire.protocol import build, response_type

UPSTREAM = {1: ("kafka-a.internal", 9092), 2: ("kafka-b.internal", 9093), 5: ("10.1.2.5", 19092)}
ADDRESSING = BrokerAddressing(bind_port=9192, advertised_host="gw.example", advertised_port=29192)
BROKERS = [{"node_id": n, "host": h, "port": p, "rack": None} for n, (h, p) in UPSTREAM.items()]


def _versions(api_key: int) -> range:
    lo, hi = kio_range(api_key)
    return range(lo, hi + 1)


def _through_proxy(api_key: int, version: int, body) -> object:
    """Encode as the upstream would, then decode, rewrite and re-encode as the proxy does; decode the result."""
    frame = encode_response_frame(api_key, version, 7, body)
    rewritten = rewrite_addresses(api_key, decode_response(api_key, version, frame), ADDRESSING)
    return decode_response(api_key, version, encode_response_frame(api_key, version, 7, rewritten))


def _expected(node: int) -> tuple[str, int]:
    return "gw.example", 29192 + 1 + node


@pytest.mark.parametrize("version", _versions(METADATA))
def test_metadata_brokers_rewritten(version):
    body = build(response_type(METADATA, version), {
        "brokers": BROKERS, "controller_id": 5, "cluster_id": "c1", "throttle_time": 0, "error_code": 0,
        "topics": [{"error_code": 0, "name": "t", "topic_id": None, "partitions": [
            {"error_code": 0, "partition_index": 0, "leader_id": 2, "replica_nodes": [2, 5], "isr_nodes": [2]}]}]})
    seen = _through_proxy(METADATA, version, body)
    assert [(b.node_id, b.host, b.port) for b in seen.brokers] == [(n, *_expected(n)) for n in (1, 2, 5)]
    assert seen.topics[0].partitions[0].leader_id == 2
    assert upstream_endpoints(METADATA, body) == [(n, h, p) for n, (h, p) in UPSTREAM.items()]


@pytest.mark.parametrize("version", _versions(FIND_COORDINATOR))
def test_find_coordinator_rewritten(version):
    if version < 4:
        body = build(response_type(FIND_COORDINATOR, version),
                     {"error_code": 0, "node_id": 5, "host": "10.1.2.5", "port": 19092, "throttle_time": 0, "error_message": None})
        seen = _through_proxy(FIND_COORDINATOR, version, body)
        assert (seen.node_id, seen.host, seen.port) == (5, *_expected(5))
        return
    body = build(response_type(FIND_COORDINATOR, version), {"throttle_time": 0, "coordinators": [
        {"key": "g1", "node_id": 1, "host": "kafka-a.internal", "port": 9092, "error_code": 0, "error_message": None},
        {"key": "g2", "node_id": 5, "host": "10.1.2.5", "port": 19092, "error_code": 0, "error_message": None},
        {"key": "g3", "node_id": -1, "host": "", "port": -1, "error_code": 15, "error_message": None}]})
    seen = _through_proxy(FIND_COORDINATOR, version, body)
    assert [(c.key, c.node_id, c.host, c.port) for c in seen.coordinators] == [
        ("g1", 1, *_expected(1)), ("g2", 5, *_expected(5)), ("g3", -1, "", -1)]


@pytest.mark.parametrize("version", _versions(DESCRIBE_CLUSTER))
def test_describe_cluster_rewritten(version):
    brokers = [{"broker_id": n, "host": h, "port": p, "rack": None, "is_fenced": False} for n, (h, p) in UPSTREAM.items()]
    body = build(response_type(DESCRIBE_CLUSTER, version),
                 {"error_code": 0, "cluster_id": "c1", "controller_id": 1, "brokers": brokers, "throttle_time": 0, "error_message": None})
    seen = _through_proxy(DESCRIBE_CLUSTER, version, body)
    assert sorted((b.broker_id, b.host, b.port) for b in seen.brokers) == [(n, *_expected(n)) for n in (1, 2, 5)]


@pytest.mark.parametrize(("api_key", "version"), [(PRODUCE, v) for v in _versions(PRODUCE) if v >= 10]
                         + [(FETCH, v) for v in _versions(FETCH) if v >= 16])
def test_node_endpoints_rewritten_and_detected(api_key, version):
    endpoints = [{"node_id": 5, "host": "10.1.2.5", "port": 19092, "rack": None}]
    body = build(response_type(api_key, version), {"responses": [], "node_endpoints": endpoints, "throttle_time": 0, "error_code": 0})
    frame = encode_response_frame(api_key, version, 7, body)
    markers = endpoint_markers({h for h, _ in UPSTREAM.values()})
    assert may_carry_endpoints(frame, markers, 3)
    seen = _through_proxy(api_key, version, body)
    assert [(e.node_id, e.host, e.port) for e in seen.node_endpoints] == [(5, *_expected(5))]
    plain = encode_response_frame(api_key, version, 7, build(response_type(api_key, version), {"responses": [], "throttle_time": 0, "error_code": 0}))
    assert not may_carry_endpoints(plain, markers, 3)
    # Only the end of the response can hold node_endpoints: a host inside records far before it is not looked at.
    records = build(response_type(api_key, version), {"responses": [], "throttle_time": 0, "error_code": 0})
    far = endpoint_markers({"10.1.2.5"})[0] + bytes(100_000) + encode_response_frame(api_key, version, 7, records)
    assert not may_carry_endpoints(far, markers, 3)
    assert may_carry_endpoints(far[:100], markers, 3)


@pytest.mark.parametrize(("api_key", "version"), [(k, v) for k in (78, 79) for v in _versions(k) if v >= 1])
def test_share_fetch_and_acknowledge_node_endpoints_rewritten(api_key, version):
    endpoints = [{"node_id": 2, "host": "10.1.2.2", "port": 19092, "rack": None}]
    body = build(response_type(api_key, version), {"responses": [], "node_endpoints": endpoints, "throttle_time": 0,
                                                   "error_code": 0, "acquisition_lock_timeout": 30_000})
    seen = _through_proxy(api_key, version, body)
    assert [(e.node_id, e.host, e.port) for e in seen.node_endpoints] == [(2, *_expected(2))]


def test_node_outside_range_is_left_out_with_a_clear_error(caplog):
    narrow = BrokerAddressing(bind_port=9192, advertised_host="gw", advertised_port=9192, max_node_id=2)
    with pytest.raises(NodeOutOfRange, match="proxy.node.id.range=0-2"):
        narrow.advertised(5)
    body = build(response_type(METADATA, 12), {"brokers": BROKERS, "topics": [], "throttle_time": 0, "error_code": 0})
    seen = rewrite_addresses(METADATA, body, narrow)
    assert [b.node_id for b in seen.brokers] == [1, 2]
    assert "upstream node id 5 is outside proxy.node.id.range=0-2" in caplog.text
    single = build(response_type(FIND_COORDINATOR, 3), {"error_code": 0, "node_id": 5, "host": "h", "port": 1, "throttle_time": 0, "error_message": None})
    answered = rewrite_addresses(FIND_COORDINATOR, single, narrow)
    assert (answered.error_code, answered.node_id, answered.host) == (15, -1, "")


def test_address_pattern_and_ranges():
    pattern = BrokerAddressing(bind_port=9192, advertised_host="gw", advertised_port=9192,
                               address_pattern="broker-$(nodeId).gw", port_offset=10)
    assert pattern.advertised(2) == ("broker-2.gw", 9204)
    assert pattern.listen_port(2) == 9204 and pattern.node_for_port(9204) == 2
    assert pattern.node_for_port(9192) is None
    assert parse_node_id_range("1-5") == (1, 5) and parse_node_id_range("7") == (0, 7)
    with pytest.raises(ValueError, match="proxy.node.id.range"):
        parse_node_id_range("x")


def test_advertised_ranges_intersect_and_drop_what_cannot_be_forwarded():
    upstream = {0: (0, 99), 1: (4, 17), 3: (0, 12), 17: (0, 1), 36: (0, 2), 55: (0, 2), 78: (1, 1), 83: (0, 0),
                9999: (0, 1)}
    ranges = advertised_ranges(upstream, sasl={17: (0, 1), 36: (0, 2)})
    assert ranges[0] == (3, kio_range(0)[1])  # kio's floor and ceiling
    assert ranges[1] == (4, 17) and ranges[3] == (0, 12) and ranges[18] == (0, 4)
    assert 55 not in ranges and 83 not in ranges and 9999 not in ranges
    assert ranges[78] == (1, 1)  # ShareFetch: its node_endpoints are rewritten
    assert 78 not in advertised_ranges(upstream, caps={78: -1})  # under the proxy's ACLs: topics by id only
    assert ranges[17] == (0, 1)  # the proxy's own SASL, only on SASL listeners
    assert 17 not in advertised_ranges(upstream) and 36 not in advertised_ranges(upstream)
