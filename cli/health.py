"""`logway health --bootstrap HOST:PORT`: is a broker up and serving? For container health checks.

Healthy means what a client needs first: the broker answers ApiVersions (v0, which every Kafka broker
answers) and then Metadata (v1, no topics asked) with its brokers listed. Any Kafka-compatible broker
passes; a PLAINTEXT listener is assumed. The answer is the exit status, with one line on stdout or stderr.
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import time

from kio.serial import entity_reader

from logway.wire.protocol import build, encode_body, request_type, response_type

API_VERSIONS, METADATA = 18, 3
_CLIENT_ID = b"logway-health"


class Unhealthy(Exception):
    """The broker did not answer as a healthy one does; the message says what happened."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `logway health` on the CLI's subcommands."""
    health = sub.add_parser("health", help="exit 0 when a broker answers ApiVersions and Metadata")
    health.add_argument("--bootstrap", required=True, metavar="HOST:PORT", help="the broker to ask")
    health.add_argument("--timeout", type=_seconds, default=5.0, metavar="S",
                        help="seconds for the whole check (default 5)")


def _seconds(text: str) -> float:
    value = float(text)
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"{text!r}: expected seconds between 0 and 3600")
    return value


def health_command(args: argparse.Namespace) -> int:
    """Run the check: 0 and one line on stdout when healthy, 1 and one line on stderr when not."""
    try:
        brokers = check(args.bootstrap, args.timeout)
    except Unhealthy as exc:
        print(f"logway: health: {args.bootstrap}: {exc}", file=sys.stderr, flush=True)
        return 1
    print(f"healthy: {args.bootstrap} answered ApiVersions and Metadata ({brokers} broker(s))", flush=True)
    return 0


def split_address(bootstrap: str) -> tuple[str, int]:
    """`host:port` or `[v6]:port` -> (host, port); Unhealthy when it is neither."""
    host, sep, port = bootstrap.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise Unhealthy("expected --bootstrap HOST:PORT")
    return host.strip("[]"), int(port)


def check(bootstrap: str, timeout: float) -> int:
    """Ask ApiVersions then Metadata within ``timeout`` seconds; the number of brokers Metadata listed."""
    address = split_address(bootstrap)
    deadline = time.monotonic() + timeout
    try:
        with socket.create_connection(address, timeout=timeout) as sock:
            versions = _exchange(sock, deadline, API_VERSIONS, 0, {})
            if versions.error_code != 0:
                raise Unhealthy(f"ApiVersions answered error code {versions.error_code}")
            metadata = _exchange(sock, deadline, METADATA, 1, {"topics": []})
    except TimeoutError:
        raise Unhealthy(f"no answer within {timeout:g} s") from None
    except OSError as exc:
        raise Unhealthy(exc.strerror or str(exc) or type(exc).__name__) from None
    if not metadata.brokers:
        raise Unhealthy("Metadata listed no brokers")
    return len(metadata.brokers)


def _exchange(sock: socket.socket, deadline: float, api_key: int, version: int, data: dict):
    """One request (header v1, non-flexible versions only) and its decoded response."""
    correlation_id = api_key
    header = struct.pack(">hhih", api_key, version, correlation_id, len(_CLIENT_ID)) + _CLIENT_ID
    payload = header + encode_body(build(request_type(api_key, version), data))
    sock.settimeout(max(0.001, deadline - time.monotonic()))
    sock.sendall(struct.pack(">i", len(payload)) + payload)
    (size,) = struct.unpack(">i", _read(sock, deadline, 4))
    if not 4 <= size <= 16 * 1024 * 1024:
        raise Unhealthy(f"answered a frame of {size} bytes; is this a Kafka listener?")
    frame = _read(sock, deadline, size)
    if struct.unpack_from(">i", frame)[0] != correlation_id:
        raise Unhealthy("answered with the wrong correlation id")
    try:
        return entity_reader(response_type(api_key, version))(frame, 4)[0]
    except Exception as exc:  # any decoding failure: the answer was not Kafka's
        raise Unhealthy(f"answered bytes that are not a {version=} response to API {api_key}: {exc}") from None


def _read(sock: socket.socket, deadline: float, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise Unhealthy("closed the connection without answering")
        buf += chunk
    return bytes(buf)
