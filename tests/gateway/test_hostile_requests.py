"""Hostile request bodies against a real gateway: a declared length the bytes cannot hold closes that one
connection with one log line (the process lives on and serves the next client); a request that decodes
but names something unknown gets Kafka's per-partition error code on a connection that stays open."""

from __future__ import annotations

import socket
import struct
import uuid

import pytest
from raw_requests import exchange

from logway.wire.errors import ErrorCode

HUGE_COMPACT = b"\x80\x80\x80\x80\x40"  # uvarint 2^34 + 1: "an array of ~2^34 items"

# The reproducers, as whole frames (size, header v2 with client id "x", body).
def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


REPRODUCERS = {
    # printf '\x00\x00\x00\x11\x00\x03\x00\x09\x00\x00\x00\x07\x00\x01x\x00\x80\x80\x80\x80\x40'
    "metadata v9": b"\x00\x00\x00\x11\x00\x03\x00\x09\x00\x00\x00\x07\x00\x01x\x00\x80\x80\x80\x80\x40",
    "fetch v12": _frame(b"\x00\x01\x00\x0c\x00\x00\x00\x07\x00\x01x\x00"
                        + struct.pack(">iiiibii", -1, 500, 1, 1 << 20, 0, 0, -1) + HUGE_COMPACT),
    "delete_groups v2": _frame(b"\x00\x2a\x00\x02\x00\x00\x00\x07\x00\x01x\x00" + HUGE_COMPACT),
}





def closed_by_server(s: socket.socket) -> bool:
    s.settimeout(10)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def test_declared_length_past_the_frame_closes_only_that_connection(gateway_process):
    gw = gateway_process.start()
    for name, frame in REPRODUCERS.items():
        with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as s:
            s.sendall(frame)
            assert closed_by_server(s), name
        assert gw.proc.poll() is None, f"{name}: gateway died with exit code {gw.proc.returncode}"
        with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as s:  # the next client is served
            answer = exchange(s, 3, 9, {"topics": [], "allow_auto_topic_creation": False,
                                       "include_cluster_authorized_operations": False,
                                       "include_topic_authorized_operations": False})
            assert [b.port for b in answer.brokers] == [gw.port]
    gw.stop()
    log = gw.log_path.read_text()
    assert "Traceback" not in log
    warnings = [line for line in log.splitlines() if "closing connection" in line]
    assert len(warnings) == len(REPRODUCERS) and all("cannot fit" in line for line in warnings), warnings


@pytest.mark.parametrize("version", range(4, 13))
def test_fetch_of_an_unknown_topic_answers_unknown_topic_or_partition(logway, version):
    with socket.create_connection(("127.0.0.1", logway.port), timeout=10) as s:
        fetch = {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                 "session_id": 0, "session_epoch": -1, "rack_id": "",
                 "topics": [{"topic": "no-such-topic", "partitions": [
                     {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                      "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}
        answer = exchange(s, 1, version, fetch)
        [topic] = answer.responses
        assert topic.topic == "no-such-topic"
        assert [p.error_code for p in topic.partitions] == [ErrorCode.unknown_topic_or_partition]
        # The connection stays open: the next request on it is answered.
        assert exchange(s, 18, 2, {}).error_code == ErrorCode.none


@pytest.mark.parametrize("version", [10, 11])
@pytest.mark.parametrize("by", ["null name", "topic id"])
def test_metadata_v10_v11_by_topic_id_answers_invalid_request(logway, version, by):
    """Kafka: topic ids are not supported in Metadata v10-v11 and names cannot be null there: INVALID_REQUEST."""
    topic = {"name": None, "topic_id": None} if by == "null name" else {"name": "t", "topic_id": uuid.uuid4()}
    with socket.create_connection(("127.0.0.1", logway.port), timeout=10) as s:
        answer = exchange(s, 3, version, {"topics": [topic], "allow_auto_topic_creation": False, "include_cluster_authorized_operations": False,
                                          "include_topic_authorized_operations": False})
        assert [(t.name, t.error_code) for t in answer.topics] == [
            (topic["name"] or "", ErrorCode.invalid_request)]
        assert exchange(s, 18, 2, {}).error_code == ErrorCode.none


def test_offset_commit_with_null_topics_closes_the_connection_with_one_line(logway, caplog):
    """OffsetCommit's topics array is not nullable: Kafka's reader refuses the request ("non-nullable field
    topics was serialized as null") and the connection is closed; the gateway goes on."""
    body = b"\x00\x01g" + struct.pack(">i", 1) + b"\x00\x01m" + struct.pack(">q", -1) + b"\xff\xff\xff\xff"
    payload = struct.pack(">hhih", 8, 2, 7, 1) + b"x" + body
    with socket.create_connection(("127.0.0.1", logway.port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        assert closed_by_server(s)
    with socket.create_connection(("127.0.0.1", logway.port), timeout=10) as s:
        assert exchange(s, 18, 2, {}).error_code == ErrorCode.none
    closing = [r for r in caplog.records if "closing connection" in r.getMessage()]
    assert len(closing) == 1 and "topics: array length -1" in closing[0].getMessage()
    assert closing[0].exc_info is None  # one line, no traceback


def test_create_topics_past_kafkas_partition_limit_is_refused_at_once(gateway_process):
    """2^31-1 partitions in one CreateTopics: Kafka's controller refuses more than 10000 new partitions per
    request with POLICY_VIOLATION; the gateway answers at once instead of creating partitions for ever."""
    gw = gateway_process.start()
    topics = [{"name": "huge", "num_partitions": 2**31 - 1, "replication_factor": 1, "assignments": [],
               "configs": []}]
    with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as s:
        answer = exchange(s, 19, 5, {"topics": topics, "timeout": 1000, "validate_only": False})
        assert [(t.name, t.error_code) for t in answer.topics] == [("huge", ErrorCode.policy_violation)]
        answer = exchange(s, 19, 5, {"topics": [{**topics[0], "name": "small", "num_partitions": 2}],
                                     "timeout": 1000, "validate_only": False})
        assert [(t.name, t.error_code) for t in answer.topics] == [("small", ErrorCode.none)]
        more = exchange(s, 37, 2, {"topics": [{"name": "small", "count": 2**31 - 1, "assignments": None}],
                                   "timeout": 1000, "validate_only": False})
        assert [(r.name, r.error_code) for r in more.results] == [("small", ErrorCode.policy_violation)]
    assert not (gw.data_dir / "huge-0").exists()
