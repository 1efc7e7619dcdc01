"""wire.protocol.build, the one dict-to-kio builder: what a field left out (or given None where it may not be
null) becomes, checked on the bytes a client reads."""

from __future__ import annotations

import uuid

from kio.serial import entity_reader

from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, encode_body, field_entity, response_type


def roundtrip(api_key: int, version: int, data: dict):
    cls = response_type(api_key, version)
    return entity_reader(cls)(encode_body(build(cls, data)), 0)[0]


def test_fields_left_out_get_the_schema_default_else_kafkas():
    response = roundtrip(3, 12, {"throttle_time": 0, "brokers": [], "topics": [
        {"name": "t", "error_code": ErrorCode.topic_authorization_failed}]})
    topic = response.topics[0]
    assert (topic.name, topic.error_code, topic.partitions, topic.is_internal) == (
        "t", ErrorCode.topic_authorization_failed, (), False)
    assert topic.topic_authorized_operations == -(2**31)  # the schema's default (AUTHORIZED_OPERATIONS_OMITTED)
    assert topic.topic_id is None  # kio reads the zero uuid as None
    assert (response.cluster_id, response.controller_id) == (None, -1)
    state = roundtrip(65, 0, {"throttle_time": 0, "transaction_states": [
        {"transactional_id": "tx", "error_code": ErrorCode.transactional_id_not_found, "transaction_start_time": 0}]})
    state = state.transaction_states[0]
    assert (state.transaction_state, state.producer_id, state.producer_epoch, state.topics) == ("", -1, -1, ())


def test_none_for_a_field_that_may_not_be_null_gets_its_default():
    """Metadata v10 names may not be null (v12+ may): a builder given None writes "" rather than failing."""
    response = roundtrip(3, 10, {"throttle_time": 0, "brokers": [], "topics": [
        {"name": None, "error_code": ErrorCode.invalid_request, "topic_id": uuid.UUID(int=1), "partitions": []}]})
    assert response.topics[0].name == ""
    assert roundtrip(3, 12, {"throttle_time": 0, "brokers": [], "topics": [
        {"name": None, "error_code": 0, "topic_id": uuid.UUID(int=1), "partitions": []}]}).topics[0].name is None


def test_nested_entities_are_built_from_dicts_at_any_depth():
    group = field_entity(response_type(9, 8), "groups")
    built = build(group, {"group_id": "g", "topics": [{"name": "t", "partitions": [{"partition_index": 3}]}]})
    partition = built.topics[0].partitions[0]
    assert (partition.partition_index, partition.committed_offset, partition.error_code) == (3, -1, ErrorCode.none)
