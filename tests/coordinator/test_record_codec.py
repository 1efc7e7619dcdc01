"""Kafka's coordinator record encoding: every schema round-trips, Kafka's own byte forms decode, and damaged
bytes raise SchemaError (never anything else, never a huge allocation)."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logway.coordinator.consumer_group_records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    CurrentAssignmentValue,
    GroupEpochValue,
    MemberKey,
    MemberMetadataValue,
    RegexValue,
    TargetAssignmentValue,
    TopicPartitions,
    TopicPartitionsWithEpochs,
)
from logway.coordinator.record_codec import (
    SchemaError,
    decode,
    decode_key,
    decode_value,
    encode,
    encode_key,
    encode_value,
)

names = st.text(min_size=0, max_size=12)
ints = st.integers(-(2**31), 2**31 - 1)
partitions = st.lists(st.integers(0, 1000), max_size=6).map(tuple)

member_values = st.builds(
    MemberMetadataValue, instance_id=st.none() | names, rack_id=st.none() | names, client_id=names,
    client_host=names, subscribed_topic_names=st.lists(names, max_size=4).map(tuple),
    subscribed_topic_regex=st.none() | names, rebalance_timeout_ms=ints, server_assignor=st.none() | names,
    classic_member_metadata=st.none() | st.builds(
        ClassicMemberMetadata, session_timeout_ms=ints,
        supported_protocols=st.lists(st.builds(ClassicProtocol, name=names, metadata=st.binary(max_size=8)),
                                     max_size=3).map(tuple)))
assignment_values = st.builds(
    CurrentAssignmentValue, member_epoch=ints, previous_member_epoch=ints, state=st.integers(0, 2),
    assigned_partitions=st.lists(st.builds(TopicPartitionsWithEpochs, topic_id=st.uuids(), partitions=partitions,
                                           assignment_epochs=st.none() | partitions), max_size=3).map(tuple),
    partitions_pending_revocation=st.just(()))


@settings(max_examples=200, deadline=None)
@given(st.one_of(member_values, assignment_values,
                 st.builds(GroupEpochValue, epoch=ints, metadata_hash=st.integers(-(2**63), 2**63 - 1)),
                 st.builds(RegexValue, topics=st.lists(names, max_size=3).map(tuple), version=st.integers(0, 99),
                           timestamp=st.integers(0, 2**40)),
                 st.builds(TargetAssignmentValue, topic_partitions=st.lists(st.builds(
                     TopicPartitions, topic_id=st.uuids(), partitions=partitions), max_size=3).map(tuple))))
def test_values_round_trip(value) -> None:
    assert decode_value(type(value), encode_value(value)) == value


def test_keys_are_the_record_type_then_the_classic_encoding() -> None:
    key = encode_key(5, MemberKey(group_id="g", member_id="m"))
    assert key == struct.pack(">hh", 5, 1) + b"g" + struct.pack(">h", 1) + b"m"
    assert decode_key(MemberKey, key) == MemberKey(group_id="g", member_id="m")


def test_kafkas_explicit_null_classic_metadata_and_unknown_tags_decode() -> None:
    body = encode(MemberMetadataValue(instance_id=None, rack_id=None, client_id="c", client_host="h",
                                      subscribed_topic_names=("t",), subscribed_topic_regex=""), flexible=True)
    # Kafka 4.3 writes tag 0 with a varint 0 (null) when a member has no classic metadata, and so do we.
    assert body.endswith(bytes([1, 0, 1, 0]))
    # A newer Kafka's tag 9 is skipped.
    kafka_form = body[:-4] + bytes([2, 0, 1, 0, 9, 2, 0xAB, 0xCD])
    decoded = decode(MemberMetadataValue, kafka_form, 0, flexible=True)
    assert decoded.classic_member_metadata is None and decoded.subscribed_topic_names == ("t",)


@pytest.mark.parametrize("damage", [
    lambda b: b[:-3],  # truncated
    lambda b: b[:1],  # not even a version
    lambda b: b[:10] + b"\xff\xff\xff\x0f",  # an array claiming 2^28 elements
])
def test_damaged_values_raise_schema_error(damage) -> None:
    value = CurrentAssignmentValue(member_epoch=2, previous_member_epoch=1, state=0, assigned_partitions=(
        TopicPartitionsWithEpochs(topic_id=uuid.uuid4(), partitions=(0, 1), assignment_epochs=(2, 2)),))
    with pytest.raises(SchemaError):
        decode_value(CurrentAssignmentValue, damage(encode_value(value)))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_any_bytes_raise_only_schema_error(data: bytes) -> None:
    for cls in (MemberMetadataValue, CurrentAssignmentValue, RegexValue, TargetAssignmentValue):
        try:
            decode_value(cls, data)
        except SchemaError:
            pass
