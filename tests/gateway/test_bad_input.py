"""Bad bytes from a client close that connection (with a log line) and nothing else: the server goes on."""

from __future__ import annotations

import socket
import struct

import pytest
from raw_requests import read_frame

from logway.wire.protocol import build, encode_body, request_type


def connect(gw) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", gw.port), timeout=5)
    return s


def closed_by_server(s: socket.socket) -> bool:
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def api_versions_frame(version: int = 2, correlation_id: int = 1) -> bytes:
    header = struct.pack(">hhih", 18, version, correlation_id, 4) + b"test"
    if version >= 3:
        header += b"\x00"
        body = encode_body(build(request_type(18, version),
                                 {"client_software_name": "t", "client_software_version": "1"}))
    else:
        body = b""
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def assert_still_serving(gw) -> None:
    with connect(gw) as s:
        s.sendall(api_versions_frame())
        response = read_frame(s)
        assert struct.unpack_from(">ih", response) == (1, 0)


BAD_INPUTS = {
    "oversized frame": struct.pack(">i", 200 * 1024 * 1024) + b"x" * 100,
    "negative size": struct.pack(">i", -5),
    "garbage header": struct.pack(">i", 3) + b"\x01\x02\x03",
    "unknown api key": struct.pack(">i", 10) + struct.pack(">hhih", 999, 0, 1, -1),
    "unsupported version": struct.pack(">i", 10) + struct.pack(">hhih", 3, 99, 1, -1),
    "malformed body": struct.pack(">i", 14) + struct.pack(">hhih", 3, 1, 1, -1) + struct.pack(">i", 5000),
    "client id past the end": struct.pack(">i", 10) + struct.pack(">hhih", 18, 0, 1, 400),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input_closes_only_that_connection(logway, name, caplog):
    with connect(logway) as bystander, connect(logway) as s:
        s.sendall(BAD_INPUTS[name])
        assert closed_by_server(s)
        bystander.sendall(api_versions_frame())
        assert struct.unpack_from(">ih", read_frame(bystander)) == (1, 0)
    assert_still_serving(logway)
    assert any("closing connection" in r.getMessage() for r in caplog.records)


def test_truncated_frame_then_disconnect(logway):
    with connect(logway) as s:
        s.sendall(struct.pack(">i", 1000) + b"\x00\x12\x00\x00")
    assert_still_serving(logway)


def test_unsupported_api_versions_version_gets_v0_answer(logway):
    with connect(logway) as s:
        frame = struct.pack(">hhih", 18, 99, 42, -1)
        s.sendall(struct.pack(">i", len(frame)) + frame)
        response = read_frame(s)
    correlation_id, error_code, count = struct.unpack_from(">ihi", response)
    assert (correlation_id, error_code) == (42, 35)  # UNSUPPORTED_VERSION
    keys = {struct.unpack_from(">hhh", response, 10 + 6 * i)[0] for i in range(count)}
    assert {0, 1, 2, 3, 18, 22} <= keys


def test_pipelined_requests_are_answered_in_order(logway):
    with connect(logway) as s:
        s.sendall(b"".join(api_versions_frame(v, correlation_id=100 + v) for v in (0, 1, 2, 3, 0, 3)))
        ids = [struct.unpack_from(">i", read_frame(s))[0] for _ in range(6)]
    assert ids == [100, 101, 102, 103, 100, 103]


def test_frames_split_anywhere_are_reassembled(logway):
    import random

    rng = random.Random(7)
    frames = [api_versions_frame(rng.choice([0, 1, 2, 3]), correlation_id=i) for i in range(3000)]
    stream = b"".join(frames)
    with connect(logway) as s:
        pos = 0
        while pos < len(stream):
            step = rng.randint(1, 40000)
            s.sendall(stream[pos : pos + step])
            pos += step
        ids = [struct.unpack_from(">i", read_frame(s))[0] for _ in range(len(frames))]
    assert ids == list(range(len(frames)))
