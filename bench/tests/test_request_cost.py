"""bench.request_cost's raw Fetch and Produce clients and report plumbing (no broker): the requests it sends decode
as the Fetch v11 and Produce v9 they claim to be, and its response reader counts partitions and record bytes (its LATEST.md
edit is bench/latest.py's, tested in test_latest.py)."""

from __future__ import annotations

import struct
from pathlib import Path

from kio.schema.fetch.v11.request import FetchRequest
from kio.schema.fetch.v11.response import FetchResponse
from kio.serial import entity_reader

from bench.request_cost import (
    busy_stacks,
    fetch_request,
    fetch_response_summary,
    produce_v9_frame,
)
from logway.wire.batch import validate_batch
from logway.wire.fetch import FetchPartitionResult, FetchTopicResult, encode_fetch_response
from logway.wire.produce import decode_produce_request


def test_fetch_request_is_a_fetch_v11_at_the_given_offsets():
    frame = fetch_request(42, "wide", [5, 0, 7])
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    api_key, version, correlation_id, client_len = struct.unpack_from(">hhih", frame, 4)
    assert (api_key, version, correlation_id) == (1, 11, 42)
    request, _ = entity_reader(FetchRequest)(frame, 4 + 10 + client_len)
    assert request.max_wait.total_seconds() == 0 and request.min_bytes == 1
    [topic] = request.topics
    assert topic.topic == "wide"
    assert [(p.partition, p.fetch_offset) for p in topic.partitions] == [(0, 5), (1, 0), (2, 7)]


def test_fixed_produce_frame_is_a_produce_v9_with_one_batch_per_partition():
    frame = produce_v9_frame("fixed-8", 8, 2)
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    api_key, version, _, client_len = struct.unpack_from(">hhih", frame, 4)
    assert (api_key, version) == (0, 9)
    request = decode_produce_request(bytearray(frame[4:]), 10 + client_len + 1, 9)  # + the header's tagged fields
    assert request.acks == 1 and request.transactional_id is None
    [topic] = request.topics
    assert topic.name == "fixed-8" and [p.index for p in topic.partitions] == list(range(8))
    for p in topic.partitions:
        header = validate_batch(p.records)
        assert header.size == len(p.records) and header.records_count == 2 and header.producer_id == -1


def test_response_summary_counts_partitions_and_record_bytes():
    partitions = [FetchPartitionResult(0, high_watermark=1, records=b""),
                  FetchPartitionResult(1, high_watermark=3, records=b"x" * 61, aborted_transactions=[(1, 2)]),
                  FetchPartitionResult(2, error_code=3, records=None)]
    chunks = encode_fetch_response(11, 9, [FetchTopicResult("wide", None, partitions)])
    frame = b"".join(chunks)[4:]
    entity_reader(FetchResponse)(frame, 4)  # a well-formed v11 response
    assert fetch_response_summary(frame) == (9, 3, 61)


def test_idle_threads_are_left_out_of_the_busy_stacks(tmp_path: Path):
    raw = tmp_path / "pyspy-x.txt"
    raw.write_text("run (trio);_work (trio);lock_PyThread_acquire_lock (libpython3.11.so.1.0) 50\n"
                   "run (trio);get_events (trio);epoll_wait (libc.so.6) 30\n"
                   "run (trio);dispatch (gateway/dispatch.py);send (libc.so.6) 20\n")
    assert busy_stacks(raw).read_text() == "run (trio);dispatch (gateway/dispatch.py);send (libc.so.6) 20\n"
