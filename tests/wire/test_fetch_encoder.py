"""The hand-written Fetch response encoder is byte-equal to kio's generic writer, for every version."""

from __future__ import annotations

import os
import tempfile
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from logway.wire.fetch import FetchPartitionResult, FetchTopicResult, FileSlice, encode_fetch_response
from logway.wire.protocol import build, encode_response, response_type

partitions = st.builds(
    FetchPartitionResult,
    partition_index=st.integers(0, 2**31 - 1),
    error_code=st.sampled_from([0, 1, 3, 100]),
    high_watermark=st.integers(-1, 2**63 - 1),
    last_stable_offset=st.integers(-1, 2**63 - 1),
    log_start_offset=st.integers(-1, 2**63 - 1),
    records=st.one_of(st.none(), st.binary(max_size=300)),
    aborted_transactions=st.one_of(st.none(), st.lists(st.tuples(st.integers(0, 2**40), st.integers(0, 2**40)), max_size=3)),
    preferred_read_replica=st.integers(-1, 5),
)
topics = st.lists(
    st.builds(FetchTopicResult, name=st.text(min_size=1, max_size=20), topic_id=st.uuids(),
              partitions=st.lists(partitions, max_size=4)),
    max_size=4,
)


def kio_bytes(version: int, correlation_id: int, result: list[FetchTopicResult]) -> bytes:
    body = build(response_type(1, version), {
        "throttle_time": 0, "error_code": 0, "session_id": 0,
        "responses": [{
            "topic": t.name, "topic_id": t.topic_id,
            "partitions": [{
                "partition_index": p.partition_index, "error_code": p.error_code,
                "high_watermark": p.high_watermark, "last_stable_offset": p.last_stable_offset,
                "log_start_offset": p.log_start_offset,
                "aborted_transactions": None if p.aborted_transactions is None else [
                    {"producer_id": a, "first_offset": b} for a, b in p.aborted_transactions],
                "preferred_read_replica": p.preferred_read_replica, "records": p.records,
            } for p in t.partitions],
        } for t in result],
    })
    return encode_response(1, version, correlation_id, body)


@settings(max_examples=40, deadline=None)
@given(version=st.integers(4, 17), correlation_id=st.integers(0, 2**31 - 1), result=topics)
def test_byte_equal_to_kio(version, correlation_id, result):
    chunks = encode_fetch_response(version, correlation_id, result)
    assert b"".join(chunks) == kio_bytes(version, correlation_id, result)


def test_file_slices_stand_in_for_record_bytes():
    payload = os.urandom(5000)
    with tempfile.TemporaryFile() as f:
        f.write(b"x" * 100 + payload)
        f.flush()
        fd = f.fileno()
        as_slice = [FetchTopicResult("t", uuid.uuid4(), [FetchPartitionResult(0, records=FileSlice(fd, 100, 5000))])]
        as_bytes = [FetchTopicResult("t", as_slice[0].topic_id, [FetchPartitionResult(0, records=payload)])]
        for version in (4, 11, 12, 16):
            chunks = encode_fetch_response(version, 7, as_slice)
            assert FileSlice(fd, 100, 5000) in chunks
            expanded = b"".join(os.pread(c.fd, c.size, c.position) if isinstance(c, FileSlice) else c for c in chunks)
            assert expanded == b"".join(encode_fetch_response(version, 7, as_bytes))


def test_empty_partitions_packed_in_one_step_are_byte_equal_to_kio():
    """The one-pack path for partitions with no records and no aborted list (an empty fetch), every version."""
    empty = [FetchPartitionResult(i, error_code=i % 2, high_watermark=10 * i, last_stable_offset=10 * i - 1,
                                  log_start_offset=i, records=b"", aborted_transactions=None,
                                  preferred_read_replica=-1) for i in range(5)]
    mixed = [*empty, FetchPartitionResult(9, records=b"", aborted_transactions=[]),
             FetchPartitionResult(8, records=None, aborted_transactions=None)]
    for version in range(4, 18):
        for partitions in (empty, mixed):
            result = [FetchTopicResult("wide", uuid.UUID(int=7), partitions)]
            assert b"".join(encode_fetch_response(version, 3, result)) == kio_bytes(version, 3, result)
