"""The hand-written Produce codecs agree with kio's generic reader and writer for every version."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer

from logway.wire.produce import ProducePartitionResult, decode_produce_request, encode_produce_response
from logway.wire.protocol import MalformedRequest, build, encode_response, request_type, response_type

requests = st.fixed_dictionaries({
    "transactional_id": st.one_of(st.none(), st.text(max_size=10)),
    "acks": st.sampled_from([-1, 0, 1]),
    "timeout": st.integers(0, 60000),
    "topic_data": st.lists(st.fixed_dictionaries({
        "name": st.text(min_size=1, max_size=12),
        "topic_id": st.uuids(),
        "partition_data": st.lists(st.fixed_dictionaries({
            "index": st.integers(0, 1000),
            "records": st.one_of(st.none(), st.binary(max_size=200)),
        }), max_size=4),
    }), max_size=3),
})


def encode(version: int, data: dict) -> bytes:
    body = build(request_type(0, version), data)
    out = io.BytesIO()
    entity_writer(type(body))(out, body)
    return out.getvalue()


@settings(max_examples=40, deadline=None)
@given(version=st.integers(3, 13), data=requests)
def test_agrees_with_kio(version, data):
    raw = bytearray(b"pad" + encode(version, data))
    decoded = decode_produce_request(raw, 3, version)
    assert decoded.transactional_id == data["transactional_id"]
    assert decoded.acks == data["acks"]
    assert decoded.timeout_ms == data["timeout"]
    assert len(decoded.topics) == len(data["topic_data"])
    for got, want in zip(decoded.topics, data["topic_data"], strict=True):
        if version >= 13:
            assert got.topic_id == want["topic_id"]
        else:
            assert got.name == want["name"]
        assert [(p.index, None if p.records is None else bytes(p.records)) for p in got.partitions] == [
            (p["index"], p["records"]) for p in want["partition_data"]]


def test_records_are_views_into_the_frame():
    raw = bytearray(encode(9, {"acks": 1, "timeout": 100, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": b"abcdef"}]}]}))
    records = decode_produce_request(raw, 0, 9).topics[0].partitions[0].records
    records[0:1] = b"Z"
    assert b"Zbcdef" in raw


@pytest.mark.parametrize("version", [3, 9])
def test_truncation_is_malformed(version):
    raw = encode(version, {"acks": 1, "timeout": 100, "topic_data": [
        {"name": "topic", "partition_data": [{"index": 0, "records": b"x" * 50}]}]})
    for cut in range(len(raw) - 1):
        try:
            decode_produce_request(bytearray(raw[:cut]), 0, version)
        except MalformedRequest:
            continue
        # A cut that still decodes must be at a point where trailing data is optional: never for these.
        pytest.fail(f"decoding {cut} of {len(raw)} bytes did not fail")


partition_results = st.builds(
    ProducePartitionResult,
    index=st.integers(0, 2**31 - 1),
    error_code=st.sampled_from([0, 2, 3, 10, 45, 87]),
    base_offset=st.integers(-1, 2**63 - 1),
    log_append_time_ms=st.one_of(st.just(-1), st.integers(0, 2**41)),
    log_start_offset=st.integers(-1, 2**63 - 1),
    error_message=st.one_of(st.none(), st.text(max_size=30)),
    record_errors=st.lists(st.tuples(st.integers(0, 2**31 - 1), st.one_of(st.none(), st.text(max_size=20))),
                           max_size=3).map(tuple),
)


@settings(max_examples=60, deadline=None)
@given(version=st.integers(3, 11), correlation_id=st.integers(0, 2**31 - 1), throttle=st.integers(0, 10000),
       topics=st.lists(st.tuples(st.text(min_size=1, max_size=15), st.lists(partition_results, max_size=4)), max_size=3))
def test_response_encoder_is_byte_equal_to_kio(version, correlation_id, throttle, topics):
    body = build(response_type(0, version), {
        "throttle_time": throttle,
        "responses": [{"name": name, "partition_responses": [{
            "index": p.index, "error_code": p.error_code, "base_offset": p.base_offset,
            "log_append_time": p.log_append_time_ms if p.log_append_time_ms >= 0 else None,
            "log_start_offset": p.log_start_offset, "error_message": p.error_message,
            "record_errors": [{"batch_index": i, "batch_index_error_message": m} for i, m in p.record_errors],
        } for p in parts]} for name, parts in topics],
    })
    assert encode_produce_response(version, correlation_id, topics, throttle) == encode_response(
        0, version, correlation_id, body)
