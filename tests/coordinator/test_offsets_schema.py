"""__consumer_offsets key/value codecs against hand-assembled Kafka byte layouts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logway.coordinator.offsets_schema import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    SchemaError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)


def h(*parts: str) -> bytes:
    return bytes.fromhex("".join(parts).replace(" ", ""))


GROUP = "0005 67726f7570"  # int16 length + "group"
TS_1700000000000 = "0000018bcfe56800"

MEMBER = GroupMetadataValue(
    protocol_type="consumer",
    generation=1,
    protocol="range",
    leader="m1",
    current_state_timestamp=1000,
    members=(
        MemberMetadataValue(
            member_id="m1",
            group_instance_id=None,
            client_id="c",
            client_host="/h",
            rebalance_timeout=300_000,
            session_timeout=10_000,
            subscription=b"\x01",
            assignment=b"\x02",
        ),
    ),
)


def test_offset_commit_key_bytes() -> None:
    raw = h("0001", GROUP, "0005 746f706963", "00000003")  # version 1, group, "topic", partition 3
    assert encode_offset_commit_key("group", "topic", 3) == raw
    assert decode_key(raw) == OffsetCommitKey("group", "topic", 3)
    assert decode_key(h("0000", GROUP, "0005 746f706963", "00000003")) == OffsetCommitKey("group", "topic", 3)


def test_group_metadata_key_bytes() -> None:
    raw = h("0002", GROUP)
    assert encode_group_metadata_key("group") == raw
    assert decode_key(raw) == GroupMetadataKey("group")


def test_keys_of_newer_record_types_are_not_ours() -> None:
    assert decode_key(h("0003", GROUP)) is None


def test_offset_commit_value_v3_bytes() -> None:
    value = OffsetCommitValue(offset=100, leader_epoch=5, metadata="md", commit_timestamp=1_700_000_000_000)
    raw = h("0003", "0000000000000064", "00000005", "0002 6d64", TS_1700000000000)
    assert encode_offset_commit_value(value) == raw
    assert decode_offset_commit_value(raw) == value


def test_offset_commit_value_with_expire_timestamp_is_v1() -> None:
    value = OffsetCommitValue(
        offset=100, leader_epoch=-1, metadata="", commit_timestamp=1_700_000_000_000, expire_timestamp=1_700_000_000_000
    )
    raw = h("0001", "0000000000000064", "0000", TS_1700000000000, TS_1700000000000)
    assert encode_offset_commit_value(value) == raw
    assert decode_offset_commit_value(raw) == value


def test_offset_commit_value_old_and_flexible_versions_decode() -> None:
    v0 = h("0000", "0000000000000064", "0002 6d64", TS_1700000000000)
    assert decode_offset_commit_value(v0) == OffsetCommitValue(100, -1, "md", 1_700_000_000_000)
    # v4: compact string (length + 1 as unsigned varint) and an empty tagged-field section.
    v4 = h("0004", "0000000000000064", "00000005", "03 6d64", TS_1700000000000, "00")
    assert decode_offset_commit_value(v4) == OffsetCommitValue(100, 5, "md", 1_700_000_000_000)


def test_group_metadata_value_v3_bytes() -> None:
    raw = h(
        "0003",
        "0008 636f6e73756d6572",  # protocolType "consumer"
        "00000001",  # generation
        "0005 72616e6765",  # protocol "range"
        "0002 6d31",  # leader "m1"
        "00000000000003e8",  # currentStateTimestamp 1000
        "00000001",  # one member
        "0002 6d31",  # memberId
        "ffff",  # groupInstanceId null
        "0001 63",  # clientId "c"
        "0002 2f68",  # clientHost "/h"
        "000493e0",  # rebalanceTimeout 300000
        "00002710",  # sessionTimeout 10000
        "00000001 01",  # subscription
        "00000001 02",  # assignment
    )
    assert encode_group_metadata_value(MEMBER) == raw
    assert decode_group_metadata_value(raw) == MEMBER


def test_empty_group_metadata_value_has_null_protocol_and_leader() -> None:
    value = GroupMetadataValue("consumer", 2, None, None, 5, ())
    raw = h("0003", "0008 636f6e73756d6572", "00000002", "ffff", "ffff", "0000000000000005", "00000000")
    assert encode_group_metadata_value(value) == raw
    assert decode_group_metadata_value(raw) == value


def test_group_metadata_value_v0_has_no_rebalance_timeout() -> None:
    raw = h(
        "0000",
        "0008 636f6e73756d6572",
        "00000001",
        "0005 72616e6765",
        "0002 6d31",
        "00000001",
        "0002 6d31",
        "0001 63",
        "0002 2f68",
        "00002710",
        "00000001 01",
        "00000001 02",
    )
    decoded = decode_group_metadata_value(raw)
    assert decoded.current_state_timestamp == -1
    assert decoded.members[0].rebalance_timeout == decoded.members[0].session_timeout == 10_000


def test_group_metadata_value_v4_flexible_decodes() -> None:
    raw = h(
        "0004",
        "09 636f6e73756d6572",
        "00000001",
        "06 72616e6765",
        "03 6d31",
        "00000000000003e8",
        "02",  # compact array of one
        "03 6d31",
        "00",  # null instance id
        "02 63",
        "03 2f68",
        "000493e0",
        "00002710",
        "02 01",
        "02 02",
        "00",  # member tagged fields
        "01 05 02 abcd",  # top-level: one unknown tagged field (tag 5, 2 bytes), skipped
    )
    assert decode_group_metadata_value(raw) == MEMBER


@pytest.mark.parametrize(
    "raw",
    [h("0003", "0000000000000064"), h("0009", "0000000000000064"), h("0003", "00000000000000640000000500ff")],
)
def test_bad_offset_values_raise_schema_error(raw: bytes) -> None:
    with pytest.raises(SchemaError):
        decode_offset_commit_value(raw)


names = st.text(max_size=20)
members = st.builds(
    MemberMetadataValue,
    member_id=names,
    group_instance_id=st.none() | names,
    client_id=names,
    client_host=names,
    rebalance_timeout=st.integers(0, 2**31 - 1),
    session_timeout=st.integers(0, 2**31 - 1),
    subscription=st.binary(max_size=50),
    assignment=st.binary(max_size=50),
)


@given(
    st.builds(
        GroupMetadataValue,
        protocol_type=names,
        generation=st.integers(0, 2**31 - 1),
        protocol=st.none() | names,
        leader=st.none() | names,
        current_state_timestamp=st.integers(-1, 2**62),
        members=st.lists(members, max_size=4).map(tuple),
    )
)
def test_group_metadata_value_round_trips(value: GroupMetadataValue) -> None:
    assert decode_group_metadata_value(encode_group_metadata_value(value)) == value
