"""Raw Kafka requests over a plain socket for the gateway tests: frames built from kio types, answers read
whole and decoded with kio. For tests that need bytes a client library would never send."""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from kio.serial import entity_reader

from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, encode_body, request_type, response_type

CORRELATION_ID = 7


def request_frame(api_key: int, version: int, data: dict, correlation_id: int = CORRELATION_ID) -> bytes:
    """Size prefix + request header (client id "x"; tagged fields for flexible versions) + the kio body."""
    header = struct.pack(">hhih", api_key, version, correlation_id, 1) + b"x"
    if request_type(api_key, version).__flexible__:
        header += b"\x00"
    payload = header + encode_body(build(request_type(api_key, version), data))
    return struct.pack(">i", len(payload)) + payload


def read_exact(s: socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes; ConnectionError if the gateway closes first."""
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed by the gateway")
        buf += chunk
    return buf


def read_frame(s: socket.socket) -> bytes:
    """One response frame without its size prefix."""
    (size,) = struct.unpack(">i", read_exact(s, 4))
    return read_exact(s, size)


def exchange(s: socket.socket, api_key: int, version: int, data: dict) -> Any:
    """Send one request, read its answer, decode it with kio (ApiVersions answers use header v0)."""
    s.sendall(request_frame(api_key, version, data))
    payload = read_frame(s)
    assert struct.unpack_from(">i", payload)[0] == CORRELATION_ID
    cls = response_type(api_key, version)
    body_at = 5 if cls.__flexible__ and api_key != 18 else 4
    return entity_reader(cls)(payload, body_at)[0]


def share_join(s: socket.socket, group: str, member: str, topics: list[str]) -> Any:
    """ShareGroupHeartbeat v1 at epoch 0, asked again while the coordinator is still loading the group's
    __consumer_offsets partition (as a client does on COORDINATOR_LOAD_IN_PROGRESS, for at most 30 s)."""
    deadline = time.monotonic() + 30
    while True:
        joined = exchange(s, 76, 1, {"group_id": group, "member_id": member, "member_epoch": 0, "rack_id": None,
                                     "subscribed_topic_names": topics})
        if joined.error_code != ErrorCode.coordinator_load_in_progress or time.monotonic() > deadline:
            return joined
        time.sleep(0.05)
