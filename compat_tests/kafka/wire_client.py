"""A blocking Kafka protocol client over a plain socket: kio request types in, kio response types out.

The conformance harness sends the same request bytes to Apache Kafka and to Logway with it, so a
difference in the answers is a difference in the brokers, not in the clients.
"""

from __future__ import annotations

import socket
import struct
from functools import cache
from typing import Any

from kio.serial import entity_reader

from logway.wire.protocol import build, encode_body, is_flexible, request_type, response_type

API_VERSIONS = 18


@cache
def _reader(cls: type):
    return entity_reader(cls)


class Closed(ConnectionError):
    """The broker closed the connection instead of answering."""


def request_frame(api_key: int, version: int, body: bytes, correlation_id: int,
                  client_id: str | None = "conformance", flexible: bool | None = None) -> bytes:
    """Size prefix + request header (v1, or v2 with tagged fields for flexible versions) + body.

    ``flexible`` overrides the header version for versions kio does not know (a newer client's).
    """
    cid = b"" if client_id is None else client_id.encode()
    header = struct.pack(">hhih", api_key, version, correlation_id, -1 if client_id is None else len(cid)) + cid
    if _flexible(api_key, version) if flexible is None else flexible:
        header += b"\x00"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def _flexible(api_key: int, version: int) -> bool:
    try:
        return is_flexible(api_key, version)
    except Exception:  # a version kio does not know: send the classic header
        return False


class WireClient:
    """One connection to a broker; `call` sends one request and decodes its response with kio."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 15.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, api_key: int, version: int, fields: dict[str, Any] | None = None) -> Any:
        """Build the request from ``fields`` (see logway.wire.protocol.build), send it, return the response."""
        body = encode_body(build(request_type(api_key, version), fields or {}))
        return self.call_raw(api_key, version, body)

    def call_raw(self, api_key: int, version: int, body: bytes) -> Any:
        self.correlation_id += 1
        self.sock.sendall(request_frame(api_key, version, body, self.correlation_id))
        return self.decode(api_key, version, self.read_frame())

    def decode(self, api_key: int, version: int, frame: bytes) -> Any:
        (correlation_id,) = struct.unpack_from(">i", frame, 0)
        if correlation_id != self.correlation_id:
            raise AssertionError(f"correlation id {correlation_id}, expected {self.correlation_id}")
        pos = 4
        if api_key != API_VERSIONS and _flexible(api_key, version):
            pos += 1  # response header v1: empty tagged fields
        body, _size = _reader(response_type(api_key, version))(frame, pos)
        return body

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._exact(4))
        return self._exact(size)

    def _exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except ConnectionResetError as exc:
                raise Closed("connection reset") from exc
            if not chunk:
                raise Closed("connection closed by the broker")
            buf += chunk
        return bytes(buf)

    def is_closed(self, timeout: float = 5.0) -> bool:
        """True if the broker closes the connection within ``timeout`` (without sending anything)."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
