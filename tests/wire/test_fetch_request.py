"""The hand-written Fetch request reader reads exactly what kio reads, or declines (None) and leaves the request
to kio: for every version, for well-formed requests, cut ones and ones with lying lengths or random bytes. And
the empty-answer encoder is byte-equal to the general Fetch response encoder."""

from __future__ import annotations

import random
import struct
import uuid
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logway.wire.errors import MalformedRequest
from logway.wire.fetch import (
    FetchPartitionResult,
    FetchTopicResult,
    empty_partition_packer,
    encode_empty_fetch_response,
    encode_fetch_response,
)
from logway.wire.fetch_request import read_fetch_request
from logway.wire.protocol import build, decode_body, encode_body, request_type

I32 = 2**31 - 1
partition = st.fixed_dictionaries({
    "partition": st.integers(-2**31, I32), "current_leader_epoch": st.integers(-1, 5),
    "fetch_offset": st.integers(-2**63, 2**63 - 1), "last_fetched_epoch": st.integers(-1, 5),
    "log_start_offset": st.integers(-1, 2**40), "partition_max_bytes": st.integers(-2**31, I32)})
topic = st.fixed_dictionaries({
    "topic": st.text(max_size=12), "topic_id": st.uuids(),
    "partitions": st.lists(partition, max_size=6)})
request = st.fixed_dictionaries({
    "replica_id": st.integers(-1, 3), "max_wait": st.integers(-5, 10_000), "min_bytes": st.integers(-1, I32),
    "max_bytes": st.integers(-1, I32), "isolation_level": st.integers(0, 1), "session_id": st.integers(0, I32),
    "session_epoch": st.integers(-1, 3), "topics": st.lists(topic, max_size=4), "rack_id": st.text(max_size=5)})


def kio_body(version: int, data: dict) -> bytes:
    return encode_body(build(request_type(1, version), data))


def kio_view(version: int, body: bytes) -> tuple:
    """What the fetch handler takes from kio's decoding, in the reader's shape."""
    r = decode_body(1, version, body, 0)
    topics = [(t.topic_id.bytes if version >= 13 else t.topic,
               [(p.partition, p.fetch_offset, p.partition_max_bytes) for p in t.partitions]) for t in r.topics]
    session = (r.session_id, r.session_epoch) if version >= 7 else (0, -1)
    return (r.max_wait // timedelta(milliseconds=1), r.min_bytes, r.max_bytes, r.isolation_level, *session, topics)


def fast_view(version: int, body: bytes) -> tuple | None:
    r = read_fetch_request(version, body, 0)
    if r is None:
        return None
    return (r.max_wait_ms, r.min_bytes, r.max_bytes, r.isolation_level, r.session_id, r.session_epoch,
            [(t.key, t.partitions) for t in r.topics])


def agrees_with_kio(version: int, body: bytes) -> bool:
    """The reader declines, or kio accepts the body and reads the same values. True if the reader read it."""
    fast = fast_view(version, body)
    if fast is None:
        return False
    assert fast == kio_view(version, body)
    return True


@settings(max_examples=60, deadline=None)
@given(version=st.integers(4, 17), data=request)
def test_well_formed_requests_read_as_kio_reads_them(version, data):
    if version >= 13:  # kio reads the zero uuid as None: the handler answers it UNKNOWN_TOPIC_ID either way
        data["topics"] = [t for t in data["topics"] if t["topic_id"] != uuid.UUID(int=0)]
    body = kio_body(version, data)
    assert agrees_with_kio(version, body)
    assert agrees_with_kio(version, body + b"\x00\x07")  # trailing bytes are ignored, by kio too


@settings(max_examples=40, deadline=None)
@given(version=st.integers(4, 17), data=request, seed=st.integers(0, 2**32))
def test_cut_and_mutated_requests_are_declined_or_read_as_kio_reads_them(version, data, seed):
    body = kio_body(version, data)
    rng = random.Random(seed)
    for cut in range(len(body)):  # every truncation
        agrees_with_kio_or_refused(version, body[:cut])
    for _ in range(30):  # lying lengths and counts, random bytes
        mutated = bytearray(body)
        at = rng.randrange(len(mutated))
        choice = rng.randrange(3)
        if choice == 0:
            mutated[at : at + 4] = struct.pack(">i", rng.choice([-2, -1, 0x7FFFFFFF, 2**20, rng.randrange(1, 64)]))
        elif choice == 1:
            mutated[at] = rng.choice([0x00, 0x7F, 0x80, 0xFF])
        else:
            mutated[at : at + 2] = struct.pack(">h", rng.choice([-2, -1, 0x7FFF, rng.randrange(1, 64)]))
        agrees_with_kio_or_refused(version, bytes(mutated))


def agrees_with_kio_or_refused(version: int, body: bytes) -> None:
    """Bad bytes: if the reader reads them, kio must read the same; else kio alone decides (it may refuse)."""
    if fast_view(version, body) is None:
        return
    agrees_with_kio(version, body)


@pytest.mark.parametrize("version", [11, 12, 13, 17])
def test_a_declared_partition_count_larger_than_the_bytes_is_declined_before_reading(version):
    data = {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 100, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "rack_id": "",
            "topics": [{"topic": "t", "topic_id": uuid.uuid4(), "partitions": [
                {"partition": 0, "fetch_offset": 1, "partition_max_bytes": 10}]}]}
    body = bytearray(kio_body(version, data))
    # The partitions count sits right after the topic key: 4 bytes (0x00000001) or the compact varint 2.
    key = data["topics"][0]["topic_id"].bytes if version >= 13 else (b"\x02t" if version >= 12 else b"\x00\x01t")
    at = body.index(key) + len(key)
    if version >= 12:
        body[at : at + 1] = b"\xff\xff\xff\x7f"  # 2^28 - 1 partitions, in a varint of 4 bytes
    else:
        body[at : at + 4] = struct.pack(">i", 2**30)
    assert read_fetch_request(version, bytes(body), 0) is None
    with pytest.raises(MalformedRequest):
        decode_body(1, version, bytes(body), 0)


def test_tagged_fields_and_forgotten_topics_are_left_to_kio():
    base = {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 100, "isolation_level": 0,
            "session_id": 5, "session_epoch": 2, "rack_id": "", "topics": []}
    assert read_fetch_request(12, kio_body(12, base), 0) is not None
    assert read_fetch_request(12, kio_body(12, {**base, "cluster_id": "c"}), 0) is None
    forgotten = {**base, "forgotten_topics_data": [{"topic": "t", "partitions": [1]}]}
    assert read_fetch_request(11, kio_body(11, forgotten), 0) is None


rows = st.lists(st.tuples(st.integers(0, I32), st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1),
                          st.integers(-1, 2**63 - 1)), max_size=5)


@settings(max_examples=60, deadline=None)
@given(version=st.integers(4, 17), correlation_id=st.integers(0, I32), read_committed=st.booleans(),
       topics=st.lists(st.tuples(st.text(min_size=1, max_size=10), st.uuids(), rows), max_size=4))
def test_empty_answer_is_byte_equal_to_the_general_encoder(version, correlation_id, read_committed, topics):
    general = [FetchTopicResult(name, topic_id, [
        FetchPartitionResult(i, 0, high, lso, start, b"", [] if read_committed else None) for i, high, lso, start in r])
        for name, topic_id, r in topics]
    expected = b"".join(encode_fetch_response(version, correlation_id, general))
    pack = empty_partition_packer(version)
    heads = [(name, topic_id, [pack(*row) for row in r]) for name, topic_id, r in topics]
    assert encode_empty_fetch_response(version, correlation_id, heads, read_committed) == expected
