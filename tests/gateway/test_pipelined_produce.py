"""Pipelined Produce requests on one connection: the gateway sends their responses together (one send while
more Produce requests wait in its buffer), and a client still sees every response, in order, with the right
offsets; responses already due go out before a bad frame closes the connection."""

from __future__ import annotations

import socket
import struct
import threading

from kafka.admin import KafkaAdminClient, NewTopic
from kio.serial import entity_reader
from raw_requests import read_frame, request_frame

from logway.storage.partition_log import PartitionLog
from logway.wire.errors import ErrorCode
from logway.wire.protocol import response_type
from logway.wire.records import build_batch

VERSION = 8


def produce_frame(topic: str, correlation_id: int, values: list[bytes], acks: int = 1) -> bytes:
    batch = build_batch([(None, v, ()) for v in values])
    return request_frame(0, VERSION, {
        "transactional_id": None, "acks": acks, "timeout": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    }, correlation_id=correlation_id)


def produce_answer(frame: bytes) -> tuple[int, int, int]:
    """(correlation id, error code, base offset) of a Produce v8 response for one partition."""
    (correlation_id,) = struct.unpack_from(">i", frame)
    response, _ = entity_reader(response_type(0, VERSION))(bytes(frame), 4)
    partition = response.responses[0].partition_responses[0]
    return correlation_id, partition.error_code, partition.base_offset


def create_topic(gw, topic: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=gw.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        admin.close()


def closed_by_server(s: socket.socket) -> bool:
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def test_pipelined_produce_answers_every_request_in_order(logway, topic_name):
    create_topic(logway, topic_name)
    frames = [produce_frame(topic_name, cid, [b"a", b"b", b"c"]) for cid in range(1, 21)]
    frames.insert(10, produce_frame(topic_name, 99, [b"no answer"], acks=0))  # acks=0: appended, not answered
    frames.append(request_frame(3, 9, {"topics": None, "allow_auto_topic_creation": False,
                                       "include_topic_authorized_operations": False,
                                       "include_cluster_authorized_operations": False}, correlation_id=21))
    with socket.create_connection(("127.0.0.1", logway.port), timeout=10) as s:
        s.sendall(b"".join(frames))
        answers = [produce_answer(read_frame(s)) for _ in range(20)]
        (metadata_cid,) = struct.unpack_from(">i", read_frame(s))
    expected_offsets = [3 * i for i in range(10)] + [3 * i + 1 for i in range(10, 20)]
    assert answers == [(cid, ErrorCode.none, offset)
                       for cid, offset in zip(range(1, 21), expected_offsets, strict=True)]
    assert metadata_cid == 21


def test_responses_due_before_a_bad_frame_are_sent(logway, topic_name):
    create_topic(logway, topic_name)
    good = [produce_frame(topic_name, cid, [b"kept"]) for cid in range(1, 6)]
    # A Produce frame (so the responses before it are held for it) of a version nobody speaks: the connection closes.
    bad = struct.pack(">i", 10) + struct.pack(">hhih", 0, 99, 6, -1)
    with socket.create_connection(("127.0.0.1", logway.port), timeout=10) as s:
        s.sendall(b"".join(good) + bad)
        answers = [produce_answer(read_frame(s)) for _ in range(5)]
        assert closed_by_server(s)
    assert answers == [(cid, ErrorCode.none, cid - 1) for cid in range(1, 6)]


def test_held_responses_do_not_wait_for_a_later_requests_fsync(logway, topic_name, monkeypatch):
    """A Produce to a flush.messages=1 topic is answered once fsynced. The answer held for the request before it
    (to a topic that needs no fsync) goes out first: the fsync is held up here until that answer has arrived,
    which it must without it (else the test times out on the read)."""
    durable = topic_name + "-durable"
    admin = KafkaAdminClient(bootstrap_servers=logway.bootstrap)
    try:
        admin.create_topics([NewTopic(topic_name, 1, 1), NewTopic(durable, 1, 1, topic_configs={"flush.messages": "1"})])
    finally:
        admin.close()
    first_answered = threading.Event()
    flushes = []
    real_flush = PartitionLog.flush

    def flush(plog):
        if plog.topic == durable:
            flushes.append(plog.log_end_offset)
            first_answered.wait(10)
        real_flush(plog)

    monkeypatch.setattr(PartitionLog, "flush", flush)
    with socket.create_connection(("127.0.0.1", logway.port), timeout=5) as s:
        s.sendall(produce_frame(topic_name, 1, [b"one"]) + produce_frame(durable, 2, [b"two"]))
        first = produce_answer(read_frame(s))
        first_answered.set()
        second = produce_answer(read_frame(s))
    assert (first, second) == ((1, ErrorCode.none, 0), (2, ErrorCode.none, 0))
    assert flushes == [1]


def test_pipelined_produces_to_a_durable_topic_share_one_fsync(logway, topic_name, monkeypatch):
    """flush.messages=1: each answer waits for its fsync; requests the client pipelined are appended meanwhile and
    one fsync (the group commit's) covers them all."""
    admin = KafkaAdminClient(bootstrap_servers=logway.bootstrap)
    try:
        admin.create_topics([NewTopic(topic_name, 1, 1, topic_configs={"flush.messages": "1"})])
    finally:
        admin.close()
    flushes = []
    real_flush = PartitionLog.flush

    def flush(plog, **kwargs):
        if plog.topic == topic_name:
            flushes.append(plog.log_end_offset)
        real_flush(plog, **kwargs)

    monkeypatch.setattr(PartitionLog, "flush", flush)
    with socket.create_connection(("127.0.0.1", logway.port), timeout=5) as s:
        s.sendall(b"".join(produce_frame(topic_name, cid, [b"%d" % cid]) for cid in range(1, 6)))
        answers = [produce_answer(read_frame(s)) for _ in range(5)]
    assert answers == [(cid, ErrorCode.none, cid - 1) for cid in range(1, 6)]
    # One fsync for all, or two when the connection let the others run (the group commit's round among them)
    # after its fourth pipelined request (server.connection's turns).
    assert flushes[-1] == 5 and len(flushes) <= 2, flushes
