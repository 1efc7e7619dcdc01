"""One connection from the proxy to an upstream broker: connect (TLS, SASL PLAIN or SCRAM-SHA-256/512 with
the proxy's own credentials), ask ApiVersions once, then send frames and read whole response frames in order.

Every wait is bounded: connecting by proxy.upstream.connect.timeout.ms, each response by the caller.
An upstream that closes, times out or sends a frame that does not parse raises UpstreamError; the proxy then
closes the client connection (Kafka clients treat that as a retriable network error and refresh metadata).
"""

from __future__ import annotations

import itertools
import logging
import socket
import struct
from typing import Any

import trio

from logway.proxy.api_versions import API_VERSIONS, Ranges, parse_ranges
from logway.proxy.config import UpstreamSecurity
from logway.proxy.frames import Received, decode_response, encode_request, response_correlation_id
from logway.proxy.splice import IOV_MAX, drop_sent
from logway.server.security.scram import ScramClient, ScramError
from logway.server.tls_socket import TlsSocket, handshake
from logway.server.tls_socket import send_parts as send_tls_parts
from logway.wire.errors import MalformedRequest
from logway.wire.protocol import RequestHeader, build, request_type

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_SMALL = 64 * 1024  # frames up to this size are sent as one buffer with their size prefix
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
CLIENT_ID = "logway-proxy"


async def send_parts(sock: socket.socket, parts: list) -> None:
    """Send every byte of ``parts`` on a non-blocking socket with sendmsg (gather I/O: no copy to join them)."""
    views = [memoryview(p).cast("B") for p in parts if len(p)]
    while views:
        try:
            sent = sock.sendmsg(views[:IOV_MAX])
        except BlockingIOError:
            await trio.lowlevel.wait_writable(sock)
            continue
        drop_sent(views, sent)
    await trio.lowlevel.checkpoint_if_cancelled()


def _plain_socket(stream: trio.SocketStream) -> socket.socket:
    """The stream's TCP socket as a plain non-blocking socket: the proxy's hot path sends and receives on it
    directly, as the gateway does on client sockets (trio's stream wrappers cost more than the syscall)."""
    sock = socket.socket(fileno=stream.socket.detach())
    sock.setblocking(False)
    return sock


class UpstreamError(Exception):
    """The upstream broker cannot be reached or broke the protocol."""


class UpstreamAuthenticationError(UpstreamError):
    """The upstream refused the proxy's own credentials (proxy.upstream.sasl.*): a configuration error."""


class Upstream(Received):
    """A connected, authenticated upstream connection and the API ranges its broker answered."""

    def __init__(self, sock: socket.socket, address: tuple[str, int], node_id: int | None) -> None:
        # A non-blocking socket used directly, plain or a TlsSocket (server/tls_socket.py: large reads and writes
        # through memory BIOs; trio's SSLStream cost the proxy 2.5 CPU-s per GB consumed against 0.5 in plaintext).
        self.sock = sock
        self.tls = isinstance(sock, TlsSocket)
        self.address = address
        self.node_id = node_id
        self.ranges: Ranges = {}
        self._buf = bytearray()
        self._ids = itertools.count(1)

    def __repr__(self) -> str:
        return f"upstream {self.address[0]}:{self.address[1]}" + ("" if self.node_id is None else f" (node {self.node_id})")

    def next_correlation_id(self) -> int:
        return next(self._ids) & 0x7FFFFFFF

    @classmethod
    async def connect(cls, address: tuple[str, int], security: UpstreamSecurity, timeout: float,
                      node_id: int | None = None) -> Upstream:
        """Open, secure and authenticate a connection and read the broker's ApiVersions, within ``timeout``."""
        try:
            with trio.fail_after(timeout):
                stream = await trio.open_tcp_stream(*address)
                stream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                stream.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
                sock = _plain_socket(stream)
                if security.tls:
                    sock = TlsSocket(security.ssl_context, sock, server_side=False,
                                     server_hostname=address[0] if security.check_hostname else None)
                upstream = cls(sock, address, node_id)
                try:
                    if upstream.tls:
                        await handshake(sock)
                    await upstream._api_versions()
                    if security.sasl:
                        await upstream._authenticate(security)
                except BaseException:
                    await upstream.aclose()
                    raise
                return upstream
        except trio.TooSlowError:
            raise UpstreamError(f"connecting to {address[0]}:{address[1]} timed out after {timeout:g} s") from None
        except OSError as exc:  # ssl.SSLError included
            raise UpstreamError(f"cannot connect to {address[0]}:{address[1]}: {exc}") from None

    async def _api_versions(self) -> None:
        response = await self.request(API_VERSIONS, 3, {"client_software_name": CLIENT_ID,
                                                         "client_software_version": "1"})
        if response.error_code != 0:  # UNSUPPORTED_VERSION: an old broker answers v0 with its ranges
            response = await self.request(API_VERSIONS, 0, {})
        self.ranges = parse_ranges(response)

    async def _authenticate(self, security: UpstreamSecurity) -> None:
        """Kafka's client SASL exchange (KIP-152): SaslHandshake v1, then the mechanism's SaslAuthenticate
        rounds (PLAIN: one; SCRAM-SHA-256/512: two, the server's signature checked)."""
        handshake = await self.request(SASL_HANDSHAKE, 1, {"mechanism": security.mechanism})
        if handshake.error_code != 0:
            raise UpstreamAuthenticationError(
                f"{self}: SaslHandshake {security.mechanism} refused ({handshake.error_code.name}); "
                f"it offers {', '.join(handshake.mechanisms)}")
        if security.mechanism == "PLAIN":
            await self._sasl_round(security, b"\0" + security.username.encode() + b"\0" + security.password.encode())
            return
        scram = ScramClient(security.mechanism, security.username, security.password)
        try:
            final = scram.final(await self._sasl_round(security, scram.first()))
            scram.verify(await self._sasl_round(security, final))
        except ScramError as exc:
            raise UpstreamAuthenticationError(f"{self}: {security.mechanism} authentication as "
                                              f"{security.username} failed: {exc}") from None

    async def _sasl_round(self, security: UpstreamSecurity, token: bytes) -> bytes:
        """One SaslAuthenticate exchange: our token out, the broker's back (a refusal raises)."""
        version = min(2, self.ranges.get(SASL_AUTHENTICATE, (0, 2))[1])
        answer = await self.request(SASL_AUTHENTICATE, version, {"auth_bytes": token})
        if answer.error_code != 0:
            raise UpstreamAuthenticationError(f"{self}: {security.mechanism} authentication as {security.username} "
                                              f"failed: {answer.error_message or answer.error_code.name}")
        return bytes(answer.auth_bytes)

    async def request(self, api_key: int, version: int, fields: dict[str, Any]) -> Any:
        """Send one request built from ``fields`` and return its decoded response (the proxy's own requests)."""
        correlation_id = self.next_correlation_id()
        header = RequestHeader(api_key, version, correlation_id, CLIENT_ID)
        await self.send(encode_request(header, build(request_type(api_key, version), fields)))
        frame = await self.read_frame(100 * 1024 * 1024)
        if response_correlation_id(frame) != correlation_id:
            raise UpstreamError(f"{self}: response to correlation id {response_correlation_id(frame)}, "
                                f"expected {correlation_id}")
        try:
            return decode_response(api_key, version, bytes(frame))
        except MalformedRequest as exc:
            raise UpstreamError(f"{self}: {exc}") from None

    async def send(self, frame: bytes | bytearray | memoryview) -> None:
        """Send one frame (without its size prefix) with its prefix in one sendmsg (not a 4-byte packet of its
        own); over TLS a small one is copied behind its prefix (one record)."""
        if self.tls and len(frame) <= _SMALL:
            await self._send([_SIZE.pack(len(frame)) + frame])
        else:
            await self._send([_SIZE.pack(len(frame)), frame])

    async def send_parts(self, parts: list[bytes]) -> None:
        """Send bytes as they are (fields of a frame whose record data is spliced to ``socket``)."""
        await self._send(parts)

    async def _send(self, parts: list) -> None:
        try:
            if self.tls:
                await send_tls_parts(self.sock, parts)
            else:
                await send_parts(self.sock, parts)
        except OSError as exc:
            raise UpstreamError(f"{self}: send failed: {exc}") from None

    async def read_frame(self, max_size: int, reserve=None) -> bytearray:
        """The next whole response frame without its size prefix; ``reserve(size)`` is awaited before a
        large frame's buffer is allocated (the caller's memory budget)."""
        await self._fill(4)
        (size,) = _SIZE.unpack_from(self._buf, 0)
        if size < 4 or size > max_size:
            raise UpstreamError(f"{self}: response frame of {size} bytes (limit {max_size})")
        if size <= _SMALL:
            await self._fill(4 + size)
            frame = self._buf[4 : 4 + size]
            del self._buf[: 4 + size]
            return frame
        # A large frame (a Fetch response) is received straight into its own buffer: one copy, from the kernel.
        if reserve is not None:
            await reserve(size)
        frame = bytearray(size)
        have = len(self._buf) - 4
        frame[:have] = memoryview(self._buf)[4:]
        self._buf.clear()
        view = memoryview(frame)
        while have < size:
            have += await self._receive_into(view[have:])
        return frame

    # --- streaming a frame (proxy/session.py sends a large one on while it arrives) -----------------------

    @property
    def socket(self) -> socket.socket | None:
        """The plain TCP socket (None over TLS: its bytes cannot be spliced)."""
        return None if self.tls else self.sock

    async def next_frame_size(self, max_size: int) -> int:
        """The size of the next response frame (its prefix stays buffered: read_frame or take reads it)."""
        await self._fill(4)
        (size,) = _SIZE.unpack_from(self._buf, 0)
        if size < 4 or size > max_size:
            raise UpstreamError(f"{self}: response frame of {size} bytes (limit {max_size})")
        return size

    def whole_frame_size(self, max_size: int) -> int | None:
        """The size of the next response frame if all of it is buffered already, else None."""
        if len(self._buf) < 4:
            return None
        (size,) = _SIZE.unpack_from(self._buf, 0)
        return size if 4 <= size <= max_size and len(self._buf) >= 4 + size else None

    async def fill(self, n: int, read_ahead: int) -> None:
        """Receive until ``n`` bytes are buffered, each receive asking for at most ``read_ahead`` more than
        needed (a streamed frame's records are better left in the socket, for splice)."""
        await self._fill(n, read_ahead)

    async def _receive_into(self, view: memoryview) -> int:
        try:
            n = await self._plain_receive(self.sock.recv_into, view)
        except OSError as exc:
            raise UpstreamError(f"{self}: receive failed: {exc}") from None
        if n == 0:
            raise UpstreamError(f"{self} closed the connection")
        return n

    async def _fill(self, n: int, read_ahead: int = _SMALL) -> None:
        while len(self._buf) < n:
            want = max(n - len(self._buf), read_ahead)
            try:
                data = await self._plain_receive(self.sock.recv, want)
            except OSError as exc:
                raise UpstreamError(f"{self}: receive failed: {exc}") from None
            if not data:
                raise UpstreamError(f"{self} closed the connection")
            self._buf += data

    async def _plain_receive(self, receive, arg):
        """``receive(arg)`` on the socket, waiting for bytes as long as there are none. Only a
        cancellation point when bytes were there at once: the caller's task yields when it next waits."""
        while True:
            try:
                got = receive(arg)
                break
            except BlockingIOError:
                await trio.lowlevel.wait_readable(self.sock)
        await trio.lowlevel.checkpoint_if_cancelled()
        return got

    async def aclose(self) -> None:
        trio.lowlevel.notify_closing(self.sock)
        self.sock.close()
