"""The fault filter (proxy/filters/fault.py, proxy/error_injection.py), sans-IO: which requests it targets, the
answers it makes up (the chosen error in each targeted partition or at the top), what it forwards, its seeded
draws, the hold and the throttle, and the settings it refuses."""

from __future__ import annotations

import uuid

import pytest
from prometheus_client import CollectorRegistry

from logway.proxy.filter_config import FilterSettings
from logway.proxy.filters.base import Answer, ClientInfo, Disconnect
from logway.proxy.filters.fault import KEYS, FaultFilter, build
from logway.server.config import ConfigError
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build as build_message
from logway.wire.protocol import request_type, response_type

PRODUCE, FETCH, METADATA, JOIN_GROUP = 0, 1, 3, 11
CLIENT = ClientInfo(client_id="app", address="127.0.0.1:1")
NOT_LEADER = ErrorCode.not_leader_or_follower


def _filter(registry: CollectorRegistry | None = None, **values: str) -> FaultFilter:
    settings = FilterSettings("chaos", "fault", {**KEYS, **values}, registry=registry)
    return build(settings)(CLIENT)


def _produce(*topics: str, acks: int = -1):
    return build_message(request_type(PRODUCE, 9), {"acks": acks, "timeout": 30000, "topic_data": [
        {"name": t, "partition_data": [{"index": 0, "records": b""}, {"index": 1, "records": b""}]} for t in topics]})


def _produce_answer(*topics: str):
    return build_message(response_type(PRODUCE, 9), {"responses": [
        {"name": t, "partition_responses": [{"index": p, "error_code": 0, "base_offset": 5} for p in (0, 1)]}
        for t in topics]})


def _errors(response) -> dict[tuple[str, int], int]:
    return {(t.name, p.index): p.error_code for t in response.responses for p in t.partition_responses}


def test_the_targeted_topics_are_refused_and_the_rest_forwarded():
    fault = _filter(topics="orders.*", error="NOT_LEADER_OR_FOLLOWER")
    forwarded = fault.on_request(CLIENT, PRODUCE, 9, _produce("orders-eu", "audit"))
    assert [t.name for t in forwarded.topic_data] == ["audit"]
    answer = fault.on_response(CLIENT, PRODUCE, 9, forwarded, _produce_answer("audit"))
    assert _errors(answer) == {("audit", 0): 0, ("audit", 1): 0, ("orders-eu", 0): NOT_LEADER,
                               ("orders-eu", 1): NOT_LEADER}
    untouched = _produce("audit")
    assert fault.on_request(CLIENT, PRODUCE, 9, untouched) is untouched  # names no targeted topic


def test_a_wholly_targeted_request_is_answered_by_the_proxy():
    fault = _filter(error="REQUEST_TIMED_OUT")
    with pytest.raises(Answer) as answered:
        fault.on_request(CLIENT, PRODUCE, 9, _produce("a", "b"))
    assert set(_errors(answered.value.response).values()) == {ErrorCode.request_timed_out}
    join = build_message(request_type(JOIN_GROUP, 7), {"group_id": "g", "session_timeout": 10000,
                                                       "rebalance_timeout": 10000, "member_id": "",
                                                       "protocol_type": "consumer", "protocols": []})
    group_fault = _filter(apis="JoinGroup,FindCoordinator", error="COORDINATOR_NOT_AVAILABLE")
    with pytest.raises(Answer) as answered:
        group_fault.on_request(CLIENT, JOIN_GROUP, 7, join)
    assert answered.value.response.error_code == ErrorCode.coordinator_not_available


def test_after_the_upstream_the_answer_fails_and_the_request_went_through():
    fault = _filter(error="NOT_LEADER_OR_FOLLOWER", **{"error.after.upstream": "true"})
    request = _produce("a")
    assert fault.on_request(CLIENT, PRODUCE, 9, request) is request
    assert fault.needs_response(PRODUCE, 9, request)
    assert set(_errors(fault.on_response(CLIENT, PRODUCE, 9, request, _produce_answer("a"))).values()) == {NOT_LEADER}


def test_topics_named_by_id_fail_the_upstreams_answer_once_metadata_taught_the_ids():
    fault = _filter(topics="orders", error="NOT_LEADER_OR_FOLLOWER")
    orders, other = uuid.uuid4(), uuid.uuid4()
    metadata = build_message(response_type(METADATA, 12), {"brokers": [], "cluster_id": "c", "controller_id": 1,
                                                          "topics": [{"name": "orders", "topic_id": orders},
                                                                     {"name": "other", "topic_id": other}]})
    fault.on_response(CLIENT, METADATA, 12, None, metadata)
    fetch = build_message(request_type(FETCH, 17), {"max_wait": 500, "min_bytes": 1, "topics": [
        {"topic_id": topic_id, "partitions": [{"partition": 0, "fetch_offset": 0}]} for topic_id in (orders, other)]})
    forwarded = fault.on_request(CLIENT, FETCH, 17, fetch)
    assert forwarded is fetch  # (Fetch v13+ names topics by id: the rules cannot refuse it before the upstream)
    answer = build_message(response_type(FETCH, 17), {"responses": [
        {"topic_id": topic_id, "partitions": [{"partition_index": 0, "high_watermark": 9, "records": b"RECORDS"}]}
        for topic_id in (orders, other)]})
    failed = fault.on_response(CLIENT, FETCH, 17, forwarded, answer)
    assert [(t.topic_id, p.error_code, p.records) for t in failed.responses for p in t.partitions] == [
        (orders, NOT_LEADER, b""), (other, 0, b"RECORDS")]  # empty records, as Kafka's, not null
    assert failed.error_code == 0  # the partitions', not the whole response's


def test_the_draws_repeat_with_the_seed_and_follow_the_rate():
    def faulted(seed: str) -> list[int]:
        fault = _filter(error="NOT_LEADER_OR_FOLLOWER", **{"error.rate": "0.3", "seed": seed})
        out = []
        for i in range(400):
            try:
                fault.on_request(CLIENT, PRODUCE, 9, _produce("t"))
            except Answer:
                out.append(i)
        return out
    first = faulted("42")
    assert first == faulted("42") and first != faulted("43")
    assert 80 < len(first) < 160  # 0.3 of 400


def test_latency_throttle_disconnect_and_drop():
    registry = CollectorRegistry()
    fault = _filter(registry, **{"latency.ms": "250", "throttle.ms": "700"})
    request = _produce("t")
    assert fault.on_request(CLIENT, PRODUCE, 9, request) is request
    assert (fault.request_delay(), fault.request_delay()) == (0.25, 0.0)  # taken once
    answer = fault.on_response(CLIENT, PRODUCE, 9, request, _produce_answer("t"))
    assert answer.throttle_time.total_seconds() == 0.7
    assert registry.get_sample_value("logway_proxy_faults_injected_total",
                                     {"filter": "chaos", "fault": "latency", "api": "Produce"}) == 1
    assert fault.on_request(CLIENT, PRODUCE, 9, _produce("t", acks=0)) is not None
    assert not fault._pending  # an acks=0 Produce gets no answer: nothing is kept for one
    with pytest.raises(Disconnect) as closed:
        _filter(**{"disconnect.rate": "1"}).on_request(CLIENT, PRODUCE, 9, request)
    assert not closed.value.silent
    with pytest.raises(Disconnect) as dropped:
        _filter(**{"drop.rate": "1"}).on_request(CLIENT, PRODUCE, 9, request)
    assert dropped.value.silent


def test_client_ids_are_targeted_by_pattern():
    fault = _filter(**{"client.id": "chaos-.*", "disconnect.rate": "1"})
    request = _produce("t")
    assert fault.on_request(CLIENT, PRODUCE, 9, request) is request
    with pytest.raises(Disconnect):
        fault.on_request(ClientInfo(client_id="chaos-monkey"), PRODUCE, 9, request)


@pytest.mark.parametrize(("values", "message"), [
    ({}, "a fault filter with nothing to inject"),
    ({"error": "NOT_A_THING"}, "proxy.filter.chaos.error='NOT_A_THING': not a Kafka error name"),
    ({"error": "NONE"}, "not an error"),
    ({"apis": "Produce,Fletch", "latency.ms": "5"}, "proxy.filter.chaos.apis='Produce,Fletch'"),
    ({"error": "REQUEST_TIMED_OUT", "error.rate": "1.5"}, "proxy.filter.chaos.error.rate=1.5"),
    ({"latency.ms": "5", "seed": "x"}, "proxy.filter.chaos.seed='x'"),
    ({"latency.ms": "5", "topics": "("}, "proxy.filter.chaos.topics='\\(': not a regular expression"),
])
def test_settings_that_cannot_work_are_one_config_error(values, message):
    with pytest.raises(ConfigError, match=message):
        _filter(**values)


@pytest.mark.parametrize(("name", "key", "version", "data"), [
    ("ConsumerGroupHeartbeat", 68, 1, {"group_id": "g", "member_id": "m", "member_epoch": 0,
                                       "rebalance_timeout": 1000, "subscribed_topic_names": ["t"],
                                       "topic_partitions": []}),
    ("ShareGroupHeartbeat", 76, 1, {"group_id": "g", "member_id": "m", "member_epoch": 0,
                                    "subscribed_topic_names": ["t"]}),
    ("AlterShareGroupOffsets", 91, 0, {"group_id": "g", "topics": [
        {"topic_name": "t", "partitions": [{"partition_index": 0, "start_offset": 0}]}]}),
])
def test_kip848_and_share_group_requests_get_the_error_from_the_proxy(name, key, version, data):
    """The group APIs of KIP-848 and KIP-932 are refused in their own shape (the ACL rules' GROUP refusal)."""
    fault = _filter(apis=name, error="COORDINATOR_NOT_AVAILABLE")
    with pytest.raises(Answer) as answered:
        fault.on_request(CLIENT, key, version, build_message(request_type(key, version), data))
    assert answered.value.response.error_code == ErrorCode.coordinator_not_available


def test_a_fetch_refused_before_the_upstream_carries_empty_records_not_null():
    fault = _filter(apis="Fetch", topics="orders", error="NOT_LEADER_OR_FOLLOWER")
    fetch = build_message(request_type(FETCH, 12), {"max_wait": 500, "min_bytes": 1, "topics": [
        {"topic": t, "partitions": [{"partition": 0, "fetch_offset": 0}]} for t in ("orders", "other")]})
    forwarded = fault.on_request(CLIENT, FETCH, 12, fetch)
    assert [t.topic for t in forwarded.topics] == ["other"]
    answer = build_message(response_type(FETCH, 12), {"responses": [
        {"topic": "other", "partitions": [{"partition_index": 0, "high_watermark": 9, "records": b"RECORDS"}]}]})
    finished = fault.on_response(CLIENT, FETCH, 12, forwarded, answer)
    assert sorted((t.topic, p.error_code, p.records) for t in finished.responses for p in t.partitions) == [
        ("orders", NOT_LEADER, b""), ("other", 0, b"RECORDS")]
