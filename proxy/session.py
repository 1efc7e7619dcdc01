"""One client connection of the proxy: requests forwarded in order to one upstream connection, responses
sent back in request order, renumbered to the client's correlation ids.

The server layer's Connection reads the client's frames (size checks, the memory budget, TLS, SASL) and hands
each to this session, which forwards it and returns at once, so clients may pipeline: a writer task takes the
responses in request order (Kafka answers a connection's requests in order), each checked against the
upstream correlation id the proxy gave its request (the client's own ids need not be unique), rewrites broker
addresses where a response carries them, passes decoded ones through the filter chain, and sends them.
Answers the proxy gives itself (ApiVersions, a filter's Answer) take their place in the same order.

The bootstrap port's connections go to any live upstream broker; a broker port's connections to that node.
An upstream that closes or stops answering (proxy.upstream.request.timeout.ms) closes the client connection:
clients treat that as a retriable network error, refresh their metadata and reconnect.
"""

from __future__ import annotations

import logging
import socket
import ssl
import struct
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio

from logway.proxy.addresses import NodeOutOfRange
from logway.proxy.api_versions import API_VERSIONS, API_VERSIONS_RANGE, Ranges, api_versions_response
from logway.proxy.fetch_walk import WALKED_FROM, FetchWalk, TailDoesNotFit, address_growth, rewrite_tail
from logway.proxy.filters.base import Answer, ClientInfo, Filter
from logway.proxy.frames import (
    PRODUCE_KEY,
    SIZE,
    decode_request,
    decode_response,
    encode_request,
    encode_response_frame,
    produce_expects_response,
    read_request_header,
    response_body_offset,
    response_correlation_id,
    set_request_correlation_id,
    set_response_correlation_id,
)
from logway.proxy.quotas import SessionQuota
from logway.proxy.rewrite import (
    DESCRIBE_CLUSTER,
    METADATA,
    NODE_ENDPOINTS_FROM,
    REWRITTEN_APIS,
    may_carry_endpoints,
    rewrite_addresses,
    upstream_endpoints,
)
from logway.proxy.splice import Pipe, SourceClosed, SourceStalled
from logway.proxy.upstream import Upstream, UpstreamError
from logway.server.connection import Connection, ConnectionClosed, RequestHandler
from logway.server.security.authorizer import client_host
from logway.wire.errors import ErrorCode, MalformedRequest
from logway.wire.protocol import RequestHeader, api_name

if TYPE_CHECKING:
    from logway.proxy.server import Proxy

log = logging.getLogger(__name__)

FETCH_KEY = 1
FilterFactory = Callable[[ClientInfo], Filter]
_SMALL = 64 * 1024  # responses up to this size are read whole and sent in one send; larger ones are streamed
_READ_AHEAD = 32 * 1024  # a streamed response's fields are received this far ahead (its records are spliced;
# a response of many small partitions is still read in few receives)
_STREAM_REQUEST_FROM = _SMALL  # Produce requests at least this large are streamed upstream as they arrive
_IOV_MAX = 512  # buffers per sendmsg (Linux allows 1024)
_COALESCE = 64 * 1024  # small responses already received are sent together up to this many bytes
_MAX_TAIL = 1024 * 1024  # the most a Fetch response's top-level tagged fields may take


@dataclass(slots=True)
class Pending:
    """A request whose response the client waits for: a local answer, or one from the upstream."""

    client_correlation_id: int
    api_key: int = -1
    api_version: int = -1
    upstream_correlation_id: int = -1
    answer: bytes | None = None  # a whole frame (with size prefix) the proxy answers itself
    requests: list[Any] = field(default_factory=list)  # what each filter returned, for on_response
    decode_response: bool = False  # a filter that saw the request wants its response decoded
    throttle_ms: int = 0  # the proxy's own client quotas throttled the request (proxy/quotas.py)


class ProxySession(RequestHandler):
    """The proxy half of one client connection: its filters, its upstream connection and its writer task."""

    answers_inline = False  # the writer task answers, in request order
    filters: list[Filter] = ()
    client: ClientInfo
    upstream: Upstream | None = None
    ranges: Ranges = {}  # what this connection advertises, once its upstream is connected
    metrics: Any = None  # the proxy's ClientMetrics (its on_frame hook counts every frame), if served
    quota: SessionQuota | None = None  # the client quotas the proxy holds this connection to, if any

    def __init__(self, proxy: Proxy, conn: Connection, node_id: int | None) -> None:
        self.proxy = proxy
        self.conn = conn
        self.node_id = node_id  # the upstream node this connection's port serves; None = bootstrap
        self._pipe = self._request_pipe = None
        self.stream_from = None  # large Produce requests are streamed upstream once there is a pipe for splice

    @asynccontextmanager
    async def session(self, conn: Connection) -> AsyncIterator[None]:
        """The writer task and the splice pipes while the connection serves requests; the upstream closed after."""
        self._queue_in, self._queue_out = trio.open_memory_channel(self.proxy.settings.max_in_flight)
        self._fit_nodes, self._fit = None, False
        if not isinstance(conn.sock, ssl.SSLSocket):
            try:
                self._pipe = Pipe()  # responses (the writer task)
                self._request_pipe = Pipe()  # requests (the read loop)
                self.stream_from = _STREAM_REQUEST_FROM
            except OSError as exc:  # out of file descriptors: large frames are buffered instead
                log.info("connection from %s: no pipe for splice (%s)", conn.peer, exc)
                if self._pipe is not None:
                    self._pipe.close()
                self._pipe = None
        self.client = ClientInfo(principal=conn.principal, host=client_host(conn.peer), listener=conn.listener.name)
        self.filters = [factory(self.client) for factory in self.proxy.filter_chain(conn.listener.name)]
        self._filter_keys = frozenset().union(*(f.api_keys for f in self.filters)) if self.filters else frozenset()
        self.metrics = self.proxy.metrics
        self.quota = self.proxy.quotas.for_listener(conn.listener.name)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._write_responses)
                yield
                nursery.cancel_scope.cancel()
        finally:
            for pipe in (self._pipe, self._request_pipe):
                if pipe is not None:
                    pipe.close()
            if self.upstream is not None:
                await self.upstream.aclose()

    # --- requests (the connection's read loop) -------------------------------------------------------

    async def handle(self, conn: Connection, frame: memoryview) -> None:
        """Forward, never answer inline (the writer task answers in order)."""
        await self.forward(frame)

    async def handle_before_authentication(self, conn: Connection, frame: memoryview) -> list[bytes]:
        """ApiVersions before SASL authentication: the proxy's own answer, inline."""
        header, _ = read_request_header(frame)
        return [await self._api_versions(header)]

    async def stream_frame(self, conn: Connection, size: int) -> bool:
        """Forward the frame of ``size`` whose head is buffered if it is a Produce no filter looks at: the
        buffered bytes sent, the rest spliced from the client's socket to the upstream's. False (nothing
        done) for any other frame, or a head too short to read the acks from."""
        head = conn.buffered()[SIZE.size :]
        if head[0] != 0 or head[1] != PRODUCE_KEY or PRODUCE_KEY in self._filter_keys or conn.sasl is not None \
                or self.metrics is not None:
            return False
        try:
            header, pos = read_request_header(head)
            expects_response = produce_expects_response(head, header, pos)
        except (MalformedRequest, IndexError, struct.error):
            return False  # read whole, as any frame: a malformed one is refused there
        upstream = await self._upstream()
        if upstream.socket is None:
            return False
        self.client.principal, self.client.client_id = self.conn.principal, header.client_id
        self._check_advertised(header)
        pending = Pending(header.correlation_id, header.api_key, header.api_version, upstream.next_correlation_id())
        if self.quota is not None:
            pending.throttle_ms = await self.quota.request(self.conn, header, head, pos, size, expects_response)
        set_request_correlation_id(head, pending.upstream_correlation_id)
        buffered = conn.buffered()
        rest = SIZE.size + size - len(buffered)
        if len(buffered) > self._request_pipe.capacity // 2:  # a large head (a grown buffer): sent apart
            try:
                await upstream.send_raw(buffered)
            except UpstreamError as exc:
                log.info("closing connection from %s: %s", self.conn.peer, exc)
                raise ConnectionClosed() from None
            buffered = b""
        try:
            self.conn.io_bytes += await self._request_pipe.move(self.conn.sock, upstream.socket, rest,
                                                           self.proxy.config.connections_max_idle_ms / 1000, buffered)
        except (SourceClosed, SourceStalled) as exc:
            raise MalformedRequest(f"truncated frame: {exc}") from None
        except OSError as exc:
            log.info("closing connection from %s: %s: send failed: %s", self.conn.peer, upstream, exc)
            raise ConnectionClosed() from None
        finally:
            del head, buffered
            conn.drop_buffered()  # the buffer held only this frame's head: its bytes are sent
        if expects_response:
            await self._queue_in.send(pending)
        return True

    async def forward(self, frame: memoryview) -> None:
        """Forward one request upstream (or answer it) and queue what its response will need."""
        header, pos = read_request_header(frame)
        self.client.principal, self.client.client_id = self.conn.principal, header.client_id
        if header.api_key == API_VERSIONS:
            await self._queue_in.send(Pending(header.correlation_id, answer=await self._api_versions(header)))
            return
        upstream = await self._upstream()
        self._check_advertised(header)
        pending = Pending(header.correlation_id, header.api_key, header.api_version, upstream.next_correlation_id())
        expects_response = header.api_key != 0 or produce_expects_response(frame, header, pos)
        if self.quota is not None:
            pending.throttle_ms = await self.quota.request(self.conn, header, frame, pos, len(frame), expects_response)
        out = None
        if header.api_key in self._filter_keys:
            out = self._filtered_request(header, frame, pos, pending)
            if pending.answer is not None:
                if expects_response:  # (an acks=0 Produce gets no answer, as from Kafka)
                    await self._queue_in.send(pending)
                return
        if out is None:  # no filter changed the request: forward its bytes
            set_request_correlation_id(frame, pending.upstream_correlation_id)
            out = frame
        elif self.metrics is not None and header.api_key == PRODUCE_KEY:
            pos = read_request_header(out)[1]
        if self.metrics is not None:
            body = memoryview(out)[pos:] if header.api_key == PRODUCE_KEY else None
            self.metrics.on_frame(self.client, header.api_key, header.api_version, "request", SIZE.size + len(out),
                                  body)
        try:
            await upstream.send(out)
        except UpstreamError as exc:
            log.info("closing connection from %s: %s", self.conn.peer, exc)
            raise ConnectionClosed() from None
        if expects_response:
            await self._queue_in.send(pending)

    def _filtered_request(self, header: RequestHeader, frame: memoryview, pos: int, pending: Pending) -> bytes | None:
        """The request as the filters leave it, encoded; None if they left it as it came."""
        key, version = header.api_key, header.api_version
        original = request = decode_request(header, bytes(frame), pos)
        try:
            for f in self.filters:
                if key in f.api_keys:
                    request = f.on_request(self.client, key, version, request)
                    wants = getattr(f, "wants_response", None)
                    pending.decode_response |= wants(key, version) if wants is not None else True
                pending.requests.append(request)
        except Answer as answer:
            # The filters before the one that answered see the answer as a response (the tenant filter
            # strips its names from an ACL denial).
            response = self._through_filters(key, version, pending.requests, answer.response)
            pending.answer = _framed(encode_response_frame(key, version, header.correlation_id, response))
            return None
        if request is original:
            return None
        upstream_header = RequestHeader(header.api_key, header.api_version, pending.upstream_correlation_id,
                                        header.client_id)
        return encode_request(upstream_header, request)

    def _check_advertised(self, header: RequestHeader) -> None:
        ranges = self.ranges
        bounds = ranges.get(header.api_key)
        if bounds is None:
            raise MalformedRequest(f"{api_name(header.api_key) or 'unknown api key'} ({header.api_key}) is not "
                                   "served by the proxy")
        if not bounds[0] <= header.api_version <= bounds[1]:
            raise MalformedRequest(f"{api_name(header.api_key)} v{header.api_version} is not supported by the "
                                   f"proxy (v{bounds[0]}-v{bounds[1]})")

    async def _upstream(self) -> Upstream:
        if self.upstream is None:
            cluster = self.proxy.cluster
            try:
                if self.node_id is None:
                    self.upstream = await cluster.connect_any()
                else:
                    self.upstream = await cluster.connect_node(self.node_id)
            except UpstreamError as exc:
                log.info("closing connection from %s: %s", self.conn.peer, exc)
                raise ConnectionClosed() from None
            self.ranges = self.proxy.advertised_ranges(self.upstream.ranges, self.conn.listener.name)
        return self.upstream

    async def _api_versions(self, header: RequestHeader) -> bytes:
        """The proxy's own ApiVersions answer (header v0 always): the advertised ranges."""
        if self.upstream is None and self.conn.sasl is not None and not self.conn.sasl.authenticated:
            # Before authentication no upstream connection is opened for the client: the cluster's ranges.
            ranges = self.proxy.advertised_ranges(self.proxy.cluster.ranges, self.conn.listener.name)
        else:
            await self._upstream()
            ranges = self.ranges
        version, error = header.api_version, ErrorCode.none
        if not API_VERSIONS_RANGE[0] <= version <= API_VERSIONS_RANGE[1]:
            # Kafka answers an ApiVersions it cannot parse with v0, UNSUPPORTED_VERSION and its ranges.
            version, error = 0, ErrorCode.unsupported_version
        body = api_versions_response(version, ranges, error)
        return _framed(encode_response_frame(API_VERSIONS, version, header.correlation_id, body))

    # --- responses (the writer task) -------------------------------------------------------------------

    async def _write_responses(self) -> None:
        """Answer the queued requests in order. Small responses go out together: while the next request's
        response is already whole in the upstream buffer (a pipelining client), it joins the same send
        (no waiting while responses are held: only bytes already received are added)."""
        out: list[bytes] = []
        try:
            async for pending in self._queue_out:
                await self._respond(pending, out)
                while out and len(out) < _IOV_MAX - 2 and self._held_size(out) < _COALESCE and self._next_buffered():
                    try:
                        pending = self._queue_out.receive_nowait()
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                    await self._respond(pending, out)
                if out:
                    await self._flush(out)
        except (UpstreamError, MalformedRequest) as exc:
            await self._flush_quietly(out)
            log.info("closing connection from %s: %s", self.conn.peer, exc)
            self._close_client()
        except OSError:
            self._close_client()
        except Exception:  # a bug: log it with its traceback; only this connection closes
            await self._flush_quietly(out)
            log.exception("closing connection from %s after an internal error", self.conn.peer)
            self._close_client()

    async def _flush_quietly(self, out: list[bytes]) -> None:
        """Before closing the client connection: the responses held for it still go out (they were complete,
        as they would have been sent one by one), within a second."""
        if not out:
            return
        with trio.move_on_after(1.0):
            try:
                await self._flush(out)
            except OSError:
                pass

    async def _respond(self, pending: Pending, out: list[bytes]) -> None:
        """``pending``'s answer: a small one appended to ``out`` (sent by the caller), a large one sent (after
        ``out``)."""
        if pending.answer is not None:
            out.append(pending.answer)
        else:
            await self._relay(pending, out)

    def _next_buffered(self) -> bool:
        """Whether the upstream's next response is already whole in its buffer (taking it cannot wait)."""
        upstream = self.upstream
        return upstream is not None and upstream.whole_frame_size(self.proxy.config.socket_request_max_bytes) \
            is not None

    @staticmethod
    def _held_size(out: list[bytes]) -> int:
        return sum(len(b) for b in out)

    async def _flush(self, out: list[bytes]) -> None:
        """Send the held responses in one send (gather I/O on a plain socket) and clear ``out``."""
        await self.conn.send_parts(out)
        out.clear()

    async def _relay(self, pending: Pending, out: list[bytes]) -> None:
        """Read the upstream's response to ``pending`` and send it on; a large one's buffer is taken from the
        shared budget (queued.max.request.bytes, as the gateway's request buffers) until it is sent."""
        reserved = 0

        async def reserve(size: int) -> None:
            nonlocal reserved
            await self.conn.memory.acquire(self.conn, size)
            reserved = size

        try:
            await self._relay_within(pending, reserve, out)
        finally:
            if reserved:
                self.conn.memory.release(reserved)

    async def _relay_within(self, pending: Pending, reserve, out: list[bytes]) -> None:
        upstream = self.upstream
        limit = self.proxy.config.socket_request_max_bytes
        frame = None
        streamed = False
        size = upstream.whole_frame_size(limit)
        if size is not None and size <= _SMALL:  # received already: taking it cannot wait (no timeout needed)
            frame = await upstream.read_frame(limit, reserve)
        else:
            with trio.move_on_after(self.proxy.settings.request_timeout):
                size = await upstream.next_frame_size(limit)
                if self._streamable(pending, size):
                    streamed = True
                else:
                    frame = await upstream.read_frame(limit, reserve)
        if streamed:
            if out:
                await self._flush(out)
            await self._stream(pending, size)
            return
        if frame is None:
            raise UpstreamError(f"{upstream}: no response to {api_name(pending.api_key)} within "
                                "proxy.upstream.request.timeout.ms")
        got = response_correlation_id(frame)
        if got != pending.upstream_correlation_id:
            raise UpstreamError(f"{upstream}: response with correlation id {got}, expected "
                                f"{pending.upstream_correlation_id}")
        if self.metrics is not None:
            body = memoryview(frame)[response_body_offset(FETCH_KEY, pending.api_version, frame):] \
                if pending.api_key == FETCH_KEY else None
            self.metrics.on_frame(self.client, pending.api_key, pending.api_version, "response",
                                  SIZE.size + len(frame), body)
        if self._must_decode(pending, frame):
            frame = self._rewritten(pending, frame)
        else:
            set_response_correlation_id(frame, pending.client_correlation_id)
        if self.quota is not None:
            frame = self.quota.answer(self.conn, pending.api_key, pending.api_version, frame, pending.throttle_ms,
                                      self.client.client_id or "")
        if len(frame) <= _SMALL:
            out.append(SIZE.pack(len(frame)))
            out.append(frame)
        else:
            if out:
                await self._flush(out)
            await self._send_large(frame)

    async def _send_large(self, frame: bytes | bytearray) -> None:
        """A large response with its size prefix in one sendmsg (a TLS socket: two sends)."""
        await self.conn.send_parts([SIZE.pack(len(frame)), frame])

    # --- streaming: a large response sent on while it arrives ------------------------------------------

    def _streamable(self, pending: Pending, size: int) -> bool:
        """A large response nothing needs to decode, from a plain upstream socket to a plain client socket:
        streamed (its records spliced). A Fetch v16+ is walked to its node_endpoints, which must fit the bytes
        the upstream gave them (the size goes out first): when the proxy's address for some broker is longer
        than the upstream's (or one byte shorter), such responses are buffered and decoded instead."""
        if size <= _SMALL or pending.decode_response or self.metrics is not None or self._pipe is None:
            return False
        if self.quota is not None and (self.quota.fetch or pending.throttle_ms):  # measured, and its throttle set
            return False
        if self.upstream.socket is None or isinstance(self.conn.sock, ssl.SSLSocket):
            return False
        key = pending.api_key
        if key == FETCH_KEY:
            return pending.api_version < WALKED_FROM or self._endpoints_fit()
        return key not in REWRITTEN_APIS

    def _endpoints_fit(self) -> bool:
        nodes = self.proxy.cluster.nodes
        if nodes is not self._fit_nodes:
            addressing = self.proxy.addressing[self.conn.listener.name]
            self._fit_nodes, self._fit = nodes, all(_fits(host, node, addressing) for node, (host, _) in nodes.items())
        return self._fit

    async def _stream(self, pending: Pending, size: int) -> None:
        """Send the response on as it arrives: its size and correlation id, then its fields as read and its
        record data spliced socket to socket; a Fetch v16+'s node_endpoints (its last bytes) rewritten."""
        upstream = self.upstream
        await self._upstream_fill(8)
        head = upstream.take(8)
        got = response_correlation_id(head[4:])
        if got != pending.upstream_correlation_id:
            raise UpstreamError(f"{upstream}: response with correlation id {got}, expected "
                                f"{pending.upstream_correlation_id}")
        out = [head[:4] + SIZE.pack(pending.client_correlation_id)]
        left = size - 4  # bytes of this frame still to come
        if pending.api_key != FETCH_KEY or pending.api_version < WALKED_FROM:
            await self._pass_through(left, out)
            await self.conn.send_parts(out)
            return
        walk = FetchWalk()
        while not walk.at_tail:
            with upstream.head(left) as view:
                fields, records = walk.step(view)
            if fields:
                out.append(upstream.take(fields))
                left -= fields
            if records:
                if records > left:
                    raise UpstreamError(f"{upstream}: Fetch records of {records} bytes past the response's end")
                await self._pass_through(records, out)
                left -= records
            elif not fields and not walk.at_tail:
                if upstream.buffered >= left:
                    raise UpstreamError(f"{upstream}: Fetch response ends inside its fields")
                await self._upstream_fill(upstream.buffered + 1)
        if left > _MAX_TAIL:
            raise UpstreamError(f"{upstream}: Fetch response with {left} bytes of tagged fields")
        await self._upstream_fill(left)
        try:
            tail = rewrite_tail(upstream.take(left), self.proxy.addressing[self.conn.listener.name])
        except (MalformedRequest, TailDoesNotFit) as exc:
            raise UpstreamError(f"{upstream}: streamed Fetch response: {exc}") from None
        out.append(tail)
        await self.conn.send_parts(out)

    async def _upstream_fill(self, n: int) -> None:
        """Buffer ``n`` bytes of the upstream's stream, at most the stall timeout without a byte."""
        with trio.move_on_after(self.proxy.settings.request_timeout) as scope:
            await self.upstream.fill(n, _READ_AHEAD)
        if scope.cancelled_caught:
            raise UpstreamError(f"{self.upstream}: response stalled for proxy.upstream.request.timeout.ms")

    async def _pass_through(self, n: int, out: list[bytes]) -> None:
        """Forward the next ``n`` bytes unread: the buffered ones queued in ``out``, the rest spliced (after
        ``out`` is sent, in order)."""
        upstream = self.upstream
        have = min(upstream.buffered, n)
        if have:
            out.append(upstream.take(have))
            n -= have
        if not n:
            return
        await self.conn.send_parts(out)
        out.clear()
        try:
            self.conn.io_bytes += await self._pipe.move(upstream.socket, self.conn.sock, n, self.proxy.settings.request_timeout)
        except (SourceClosed, SourceStalled) as exc:
            raise UpstreamError(f"{upstream}: {exc}") from None

    def _must_decode(self, pending: Pending, frame: bytearray) -> bool:
        key = pending.api_key
        if pending.decode_response:
            return True
        if key not in REWRITTEN_APIS:
            return False
        since = NODE_ENDPOINTS_FROM.get(key)
        if since is None:
            return True
        cluster = self.proxy.cluster
        return pending.api_version >= since and may_carry_endpoints(frame, cluster.markers, len(cluster.nodes))

    def _rewritten(self, pending: Pending, frame: bytearray) -> bytes:
        key, version = pending.api_key, pending.api_version
        try:
            response = decode_response(key, version, bytes(frame))
        except MalformedRequest as exc:
            raise UpstreamError(f"{self.upstream}: {exc}") from None
        if key in REWRITTEN_APIS:
            if key in (METADATA, DESCRIBE_CLUSTER):
                self.proxy.cluster.learn(upstream_endpoints(key, response))
            response = rewrite_addresses(key, response, self.proxy.addressing[self.conn.listener.name])
        response = self._through_filters(key, version, pending.requests, response)
        return encode_response_frame(key, version, pending.client_correlation_id, response)

    def _through_filters(self, key: int, version: int, requests: list[Any], response: Any) -> Any:
        """``response`` through the on_response of the filters that saw its request, last filter first."""
        for f, request in reversed(list(zip(self.filters, requests, strict=False))):
            if key in f.api_keys:
                response = f.on_response(self.client, key, version, request, response)
        return response

    def _close_client(self) -> None:
        """Shut the client socket down: the read loop ends and the connection closes."""
        try:
            self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _fits(upstream_host: str, node_id: int, addressing) -> bool:
    """Whether node ``node_id``'s endpoint rewritten fits a padding field in its upstream bytes: the same
    size, or smaller by two bytes or more (a node without a port is left out: always fits)."""
    try:
        host, _ = addressing.advertised(node_id)
    except NodeOutOfRange:
        return True
    growth = address_growth(upstream_host, host)
    return growth == 0 or growth <= -2


def _framed(frame: bytes) -> bytes:
    return SIZE.pack(len(frame)) + frame
