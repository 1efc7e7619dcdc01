"""The Fetch v16+ walk the proxy streams large responses with (proxy/fetch_walk.py): fed the bytes kio encodes
in pieces of any size, it hands back every field unchanged and each partition's records exactly, and its tail
rewrite gives the same node_endpoints as the decoding path in the upstream's number of bytes; end to end, a
large Fetch v16 carrying node_endpoints streamed through a `logway proxy` process names only the proxy.

A Kafka broker sends node_endpoints only when a partition just lost its leader, and then in a response that
also holds other partitions' data only by chance: that cannot be made to happen on demand, so the upstream of
the end-to-end test is a scripted broker answering ApiVersions, Metadata and Fetch with bytes kio encodes."""

from __future__ import annotations

import random
import socket
import struct
import sys
import threading
import uuid
from pathlib import Path

import pytest

from logway.proxy.addresses import BrokerAddressing
from logway.proxy.fetch_walk import PADDING_TAG, FetchWalk, TailDoesNotFit, _tagged, rewrite_tail
from logway.proxy.frames import decode_response, encode_response_frame, read_request_header
from logway.proxy.rewrite import FETCH, rewrite_addresses
from logway.proxy.walk import uvarint
from logway.wire.errors import MalformedRequest
from logway.wire.protocol import build, encode_body, request_type, response_type

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.procs import recv_exact  # noqa: E402
from compat_tests.kafka.wire_client import request_frame  # noqa: E402

ADDRESSING = BrokerAddressing(bind_port=9192, advertised_host="gw.example", advertised_port=29192)


def _response(version: int, endpoints: list[dict]):
    def partition(index: int, records: bytes | None, error: int = 0, aborted=None, leader=None):
        out = {"partition_index": index, "error_code": error, "high_watermark": 100 + index, "last_stable_offset": 90,
               "log_start_offset": 0, "aborted_transactions": aborted, "preferred_read_replica": -1, "records": records}
        if leader is not None:
            out["current_leader"] = {"leader_id": leader, "leader_epoch": 3}
        return out

    rng = random.Random(version)
    topics = [
        {"topic_id": uuid.UUID("3f1e7f0c-5c4b-4d7e-9d5b-0f6f2b1c2a01"), "partitions": [
            partition(0, rng.randbytes(70_000)),
            partition(1, None, error=6, leader=5),  # NOT_LEADER_OR_FOLLOWER, the new leader in current_leader
            partition(2, rng.randbytes(5), aborted=[{"producer_id": 7, "first_offset": 12}] * 3)]},
        {"topic_id": uuid.UUID("3f1e7f0c-5c4b-4d7e-9d5b-0f6f2b1c2a02"), "partitions": [partition(0, b"")]},
        {"topic_id": uuid.UUID("3f1e7f0c-5c4b-4d7e-9d5b-0f6f2b1c2a03"), "partitions": []},
    ]
    return build(response_type(FETCH, version), {"throttle_time": 0, "error_code": 0, "session_id": 9,
                                                 "responses": topics, "node_endpoints": endpoints})


def _walk(frame: bytes, piece: int, version: int = 16) -> tuple[bytes, list[int]]:
    """Stream ``frame`` (no size prefix) through the walk as the proxy does, ``piece`` bytes arriving at a time:
    the bytes the client gets and the length of each records section passed unseen (those that run past the
    bytes at hand)."""
    walk, out, records_seen = FetchWalk(version), [frame[:4]], []
    pos, have = 4, 4
    while not walk.at_tail:
        have = min(len(frame), max(have, pos) + piece)
        walked, records = walk.step(memoryview(frame)[pos:have])
        if not (records or walk.at_tail) and have == len(frame):
            raise MalformedRequest("ends inside its fields")  # as the proxy's FrameRelay.walk does
        out.append(frame[pos:pos + walked])
        pos += walked
        if records:
            records_seen.append(records)
            out.append(frame[pos:pos + records])
            pos += records
        assert pos <= len(frame)
    out.append(rewrite_tail(frame[pos:], ADDRESSING))
    return b"".join(out), records_seen


def _without_padding(frame: bytes, version: int = 16) -> bytes:
    """``frame`` without the padding tagged field (kio, unlike Kafka's clients, refuses unknown tags)."""
    walk, pos = FetchWalk(version), 4
    while not walk.at_tail:
        fields, records = walk.step(memoryview(frame)[pos:])
        pos += fields + records
    tail = memoryview(frame)[pos:]
    count, at = uvarint(tail, 0)
    fields = []
    for _ in range(count):
        tag, at = uvarint(tail, at)
        size, at = uvarint(tail, at)
        fields.append((tag, bytes(tail[at:at + size])))
        at += size
    assert fields[-1][0] == PADDING_TAG and not any(fields[-1][1])
    return frame[:pos] + _tagged(fields[:-1])


@pytest.mark.parametrize("version", [16, 17, 18])
@pytest.mark.parametrize("piece", [1, 7, 4096, 1 << 20])
def test_walk_hands_back_every_byte_and_each_records_section(version, piece):
    body = _response(version, [])
    frame = encode_response_frame(FETCH, version, 7, body)
    streamed, records = _walk(frame, piece, version)
    assert streamed == frame
    # null and empty records take no bytes; records already at hand are walked over, not passed unseen
    assert records == {1: [70_000, 5], 7: [70_000, 5], 4096: [70_000], 1 << 20: []}[piece]


@pytest.mark.parametrize("version", [16, 17, 18])
def test_node_endpoints_rewritten_in_the_upstream_bytes_as_the_decoding_path_does(version):
    """Same-length hosts: byte for byte what decoding, rewriting and encoding gives; shorter ones: a padding
    tagged field keeps the size, and the client reads the same endpoints."""
    same = [{"node_id": 5, "host": "kafka-5.dc", "port": 19092, "rack": "r1"}]  # "gw.example" has 10 bytes too
    body = _response(version, same)
    frame = encode_response_frame(FETCH, version, 7, body)
    decoded = encode_response_frame(FETCH, version, 7, rewrite_addresses(FETCH, body, ADDRESSING))
    streamed, _ = _walk(frame, 1000, version)
    assert streamed == decoded
    longer = [{"node_id": 5, "host": "kafka-broker-5.internal.example", "port": 19092, "rack": None},
              {"node_id": 1, "host": "10.1.2.1", "port": 9092, "rack": None}]
    frame = encode_response_frame(FETCH, version, 7, _response(version, longer))
    streamed, _ = _walk(frame, 1000, version)
    assert len(streamed) == len(frame)
    seen = decode_response(FETCH, version, _without_padding(streamed, version))
    assert [(e.node_id, e.host, e.port, e.rack) for e in seen.node_endpoints] == [
        (5, "gw.example", 29192 + 1 + 5, None), (1, "gw.example", 29192 + 1 + 1, None)]
    assert b"internal" not in streamed
    assert seen.responses == decode_response(FETCH, version, frame).responses


def test_a_rewrite_that_cannot_take_the_upstream_bytes_is_refused():
    """A longer address (or one byte shorter: no tagged field is one byte) cannot be sent in the size already
    sent: the proxy closes the client connection rather than leak or corrupt anything (the session streams
    such responses only when every known broker's address fits; see AddressRewrite.may_stream)."""
    for host in ("k5", "gw.example1"):  # the proxy's "gw.example" is 8 bytes longer, 1 byte shorter
        frame = encode_response_frame(FETCH, 16, 7, _response(16, [{"node_id": 5, "host": host, "port": 1}]))
        with pytest.raises(TailDoesNotFit):
            _walk(frame, 100)
    frame = encode_response_frame(FETCH, 16, 7, _response(16, [{"node_id": 5, "host": "gw.example12", "port": 1}]))
    assert len(_walk(frame, 100)[0]) == len(frame)  # two bytes shorter: padded


def test_a_tail_that_does_not_parse_to_its_end_is_malformed():
    frame = encode_response_frame(FETCH, 16, 7, _response(16, [{"node_id": 5, "host": "kafka-5.dc", "port": 1}]))
    with pytest.raises(MalformedRequest):
        _walk(frame + b"\0", 100)
    with pytest.raises(MalformedRequest):
        _walk(frame[:-3], 100)


# --- end to end: a scripted upstream broker -------------------------------------------------------------------

def _read(sock: socket.socket) -> bytes:
    """One whole frame's bytes after its size prefix."""
    return recv_exact(sock, struct.unpack(">i", recv_exact(sock, 4))[0])


def _frame(api_key: int, version: int, fields: dict, correlation_id: int) -> bytes:
    return request_frame(api_key, version, encode_body(build(request_type(api_key, version), fields)), correlation_id)


STREAM_TOPIC_ID = uuid.UUID("3f1e7f0c-5c4b-4d7e-9d5b-0f6f2b1c2a01")
RECORDS = random.Random(1).randbytes(300_000)
FAR_HOST = "broker-2.far-away.internal"  # longer than the proxy's 127.0.0.1: rewritten with padding


class ScriptedBroker:
    """Node 1 of a two-broker cluster on a local port: ApiVersions, Metadata and Fetch v16 answered from kio."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        with sock:
            while True:
                try:
                    frame = _read(sock)
                except (ConnectionError, OSError):
                    return
                header, _ = read_request_header(frame)
                key, version = header.api_key, header.api_version
                out = encode_response_frame(key, version, header.correlation_id, build(response_type(key, version),
                                                                                     self._answer(key)))
                sock.sendall(struct.pack(">i", len(out)) + out)

    def _answer(self, key: int) -> dict:
        brokers = [{"node_id": 1, "host": "127.0.0.1", "port": self.port, "rack": None},
                   {"node_id": 2, "host": FAR_HOST, "port": 9092, "rack": None}]
        if key == 18:
            return {"error_code": 0, "throttle_time": 0, "api_keys": [
                {"api_key": 1, "min_version": 4, "max_version": 16}, {"api_key": 3, "min_version": 0, "max_version": 12}]}
        if key == 3:
            return {"brokers": brokers, "cluster_id": "c", "controller_id": 1, "topics": [], "throttle_time": 0}
        assert key == 1
        partitions = [
            {"partition_index": 0, "error_code": 0, "high_watermark": 10, "records": RECORDS, "aborted_transactions": None},
            {"partition_index": 1, "error_code": 6, "high_watermark": -1, "records": None, "aborted_transactions": None,
             "current_leader": {"leader_id": 2, "leader_epoch": 4}}]  # NOT_LEADER_OR_FOLLOWER, its new leader
        return {"throttle_time": 0, "error_code": 0, "session_id": 0, "node_endpoints": brokers,
                "responses": [{"topic_id": STREAM_TOPIC_ID, "partitions": partitions}]}

    def close(self) -> None:
        self.listener.close()


def test_node_endpoints_of_a_streamed_fetch_name_only_the_proxy(processes):
    broker = ScriptedBroker()
    try:
        proxy = processes["proxy"](f"127.0.0.1:{broker.port}").start()
        proxy.wait_node_port(1)
        fetch = {"max_wait": 0, "min_bytes": 1, "max_bytes": 8 << 20, "session_epoch": -1, "topics": [
            {"topic_id": STREAM_TOPIC_ID, "partitions": [{"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                                                  for p in range(2)]}]}
        with socket.create_connection(("127.0.0.1", proxy.node_port(1)), timeout=10) as sock:
            sock.sendall(_frame(18, 3, {"client_software_name": "t", "client_software_version": "1"}, 1)
                         + _frame(1, 16, fetch, 2))
            _read(sock)
            answer = _read(sock)
    finally:
        broker.close()
    assert struct.unpack_from(">i", answer)[0] == 2
    assert FAR_HOST.encode() not in answer and struct.pack(">i", broker.port) not in answer
    seen = decode_response(1, 16, _without_padding(answer))
    assert [(e.node_id, e.host, e.port) for e in seen.node_endpoints] == [
        (1, "127.0.0.1", proxy.node_port(1)), (2, "127.0.0.1", proxy.node_port(2))]
    assert seen.responses[0].partitions[0].records == RECORDS
    assert seen.responses[0].partitions[1].current_leader.leader_id == 2
    # Streamed, not decoded: the upstream's size, the padding field taking up what the shorter host left.
    sent = encode_response_frame(1, 16, 2, build(response_type(1, 16), broker._answer(1)))
    assert len(answer) == len(sent)
