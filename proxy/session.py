"""One client connection of the proxy: requests forwarded in order to one upstream connection, responses
sent back in request order, renumbered to the client's correlation ids.

The server layer's Connection reads the client's frames (size checks, the memory budget, TLS, SASL) and hands
each to this session, which forwards it and returns at once, so clients may pipeline: a writer task takes the
responses in request order (Kafka answers a connection's requests in order), each checked against the
upstream correlation id the proxy gave its request (the client's own ids need not be unique), passes it
through the connection's filter chain (proxy/chain.py: decoded only when a filter declared it) and sends it.
Answers the proxy gives itself (ApiVersions, a filter's Answer) take their place in the same order. Large
Produce requests and large responses no filter decodes are streamed (proxy/streaming.py): their record data
is spliced socket to socket, and what the filters need of them (a Fetch response's tail, each topic's record
bytes for the metrics) is read from the fields around it as they pass.

The bootstrap port's connections go to any live upstream broker; a broker port's connections to that node.
An upstream that closes or stops answering (proxy.upstream.request.timeout.ms) closes the client connection:
clients treat that as a retriable network error, refresh their metadata and reconnect.
"""

from __future__ import annotations

import logging
import socket
import struct
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from logway.proxy.api_versions import API_VERSIONS, API_VERSIONS_RANGE, Ranges, api_versions_response
from logway.proxy.chain import FETCH_KEY, Answered, FilterChain, Seen
from logway.proxy.fetch_walk import FetchWalk
from logway.proxy.filters.base import REQUEST, RESPONSE, RESPONSE_HEAD, ClientInfo, Disconnect, Filter, Frame
from logway.proxy.frames import (
    PRODUCE_KEY,
    SIZE,
    encode_response_frame,
    produce_expects_response,
    read_request_header,
    response_correlation_id,
    set_request_correlation_id,
    set_response_correlation_id,
)
from logway.proxy.produce_walk import ProduceWalk
from logway.proxy.splice import IOV_MAX, Pipe
from logway.proxy.streaming import SPLICE_FROM, ClientSource, FrameDoesNotWalk, FrameRelay, UpstreamSource
from logway.proxy.upstream import Upstream, UpstreamError
from logway.server.connection import Connection, ConnectionClosed, RequestHandler
from logway.server.security.authorizer import client_host
from logway.wire.errors import ErrorCode, MalformedRequest
from logway.wire.protocol import RequestHeader, api_name

if TYPE_CHECKING:
    from logway.proxy.server import Proxy

log = logging.getLogger(__name__)

FilterFactory = Callable[[ClientInfo], Filter]
_SMALL = 64 * 1024  # responses up to this size are read whole and sent in one send; larger ones are streamed
_STREAM_REQUEST_FROM = _SMALL  # Produce requests at least this large are streamed upstream as they arrive
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
    seen: Seen = ()  # the filters its response goes through, each with the request it returned
    heads: tuple = ()  # the filters that read its first bytes


class ProxySession(RequestHandler):
    """The proxy half of one client connection: its filter chain, its upstream connection and its writer task."""

    answers_inline = False  # the writer task answers, in request order
    chain: FilterChain
    client: ClientInfo
    upstream: Upstream | None = None
    ranges: Ranges = {}  # what this connection advertises, once its upstream is connected

    def __init__(self, proxy: Proxy, conn: Connection, node_id: int | None) -> None:
        self.proxy = proxy
        self.conn = conn
        self.node_id = node_id  # the upstream node this connection's port serves; None = bootstrap
        self._pipe = self._request_pipe = None
        self.stream_from = None  # large Produce requests are streamed upstream once there is a pipe for splice
        self.silent = False  # a filter dropped the connection: nothing more is forwarded or answered

    @asynccontextmanager
    async def session(self, conn: Connection) -> AsyncIterator[None]:
        """The writer task and the splice pipes while the connection serves requests; the upstream closed after."""
        self._queue_in, self._queue_out = trio.open_memory_channel(self.proxy.settings.max_in_flight)
        if conn.spliceable:
            try:
                self._pipe = Pipe()  # responses (the writer task)
                self._request_pipe = Pipe()  # requests (the read loop)
                self.stream_from = _STREAM_REQUEST_FROM
            except OSError as exc:  # out of file descriptors: large frames are buffered instead
                log.info("connection from %s: no pipe for splice (%s)", conn.peer, exc)
                if self._pipe is not None:
                    self._pipe.close()
                self._pipe = None
        cluster = self.proxy.virtual_clusters.get(conn.listener.name)
        self.client = ClientInfo(principal=conn.principal, host=client_host(conn.peer), address=conn.peer,
                                 listener=conn.listener.name,
                                 topic_prefix=cluster.topic_prefix if cluster is not None else "")
        self.chain = FilterChain([factory(self.client) for factory in self.proxy.filter_chain(conn.listener.name)],
                                 self.client)
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
        """Forward the frame of ``size`` whose head is buffered if it is a Produce no filter decodes: the
        buffered bytes sent, the rest spliced from the client's socket to the upstream's (walked for the
        observers). False (nothing done) for any other frame, or a head too short to read the acks from."""
        head = conn.buffered()[SIZE.size :]
        if head[0] != 0 or head[1] != PRODUCE_KEY or conn.sasl is not None or self.silent:
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
        plan = self.chain.plan(PRODUCE_KEY, header.api_version)
        if plan.decodes_request or self.chain.observers and not _splices_early(header.api_version, head[pos:]):
            return False
        pending = Pending(header.correlation_id, PRODUCE_KEY, header.api_version, upstream.next_correlation_id(),
                          seen=plan.undecoded)
        set_request_correlation_id(head, pending.upstream_correlation_id)
        del head
        await self._stream_request(header.api_version, SIZE.size + pos, SIZE.size + size)
        if expects_response:
            await self._queue_in.send(pending)
        return True

    async def _stream_request(self, version: int, header_size: int, frame_size: int) -> None:
        """The Produce request of ``frame_size`` bytes (with its size prefix, its header ``header_size``) from
        the client's buffer and socket to the upstream's; for the observers, walked to its record sets."""
        upstream = self.upstream
        relay = FrameRelay(ClientSource(self.conn, self.proxy.config.connections_max_idle_ms / 1000), frame_size,
                           self._request_pipe, upstream.socket, upstream.send_parts, self.conn, _truncated)
        record_sets = None
        try:
            if self.chain.observers:
                await relay.fields(header_size)
                walk = ProduceWalk(version)
                try:
                    await relay.walk(walk, tail=False)
                    record_sets = walk.record_sets
                except FrameDoesNotWalk:
                    pass  # forwarded all the same (the upstream answers bad bytes): no per-topic counts
            await relay.rest()
            await relay.flush()
        except (OSError, UpstreamError) as exc:
            log.info("closing connection from %s: %s: send failed: %s", self.conn.peer, upstream, exc)
            raise ConnectionClosed() from None
        if self.chain.observers:
            self.chain.observe(Frame(REQUEST, PRODUCE_KEY, version, frame_size, record_sets))

    async def forward(self, frame: memoryview) -> None:
        """Forward one request upstream (or answer it) and queue what its response will need."""
        if self.silent:
            return
        header, pos = read_request_header(frame)
        self.client.principal, self.client.client_id = self.conn.principal, header.client_id
        if header.api_key == API_VERSIONS:
            await self._queue_in.send(Pending(header.correlation_id, answer=await self._api_versions(header)))
            return
        upstream = await self._upstream()
        self._check_advertised(header)
        key, version = header.api_key, header.api_version
        plan = self.chain.plan(key, version)
        pending = Pending(header.correlation_id, key, version, upstream.next_correlation_id(), seen=plan.undecoded,
                          heads=plan.heads)
        expects_response = key != PRODUCE_KEY or produce_expects_response(frame, header, pos)
        out = None
        if plan.decodes_request:
            try:
                out, pending.seen = await self.chain.request(header, frame, pos, pending.upstream_correlation_id, plan)
            except Answered as answered:
                await self._hold()
                if expects_response:  # (an acks=0 Produce gets no answer, as from Kafka)
                    pending.answer = _framed(answered.frame)
                    await self._queue_in.send(pending)
                return
            except Disconnect as fault:
                self._disconnect(fault)
                return
            await self._hold()
        if out is None:  # no filter changed the request: forward its bytes
            set_request_correlation_id(frame, pending.upstream_correlation_id)
            out = frame
        elif self.chain.observers and key == PRODUCE_KEY:
            pos = read_request_header(out)[1]
        if self.chain.observers:
            self.chain.observe_request(key, version, out, pos)
        try:
            await upstream.send(out)
        except UpstreamError as exc:
            log.info("closing connection from %s: %s", self.conn.peer, exc)
            raise ConnectionClosed() from None
        if expects_response:
            await self._queue_in.send(pending)

    async def _hold(self) -> None:
        """Hold the request the chain just saw for as long as a filter asked (this connection's read loop only)."""
        if self.chain.hold > 0:
            await trio.sleep(self.chain.hold)

    def _disconnect(self, fault: Disconnect) -> None:
        """A filter's Disconnect: close the connection, or go silent until the client closes it."""
        log.debug("connection from %s: %s", self.conn.peer, fault)
        if not fault.silent:
            raise ConnectionClosed()
        self.silent = True

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
                while out and len(out) < IOV_MAX - 2 and self._held_size(out) < _COALESCE and self._next_buffered():
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
        frame = self._for_client(pending, frame)
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

    def _for_client(self, pending: Pending, frame: bytearray) -> bytes | bytearray:
        """The upstream's whole response as the client gets it: counted by the observers, then decoded through
        the filters if one of them needs it, else renumbered in place."""
        self._check_correlation_id(pending, frame)
        key, version, seen, chain = pending.api_key, pending.api_version, pending.seen, self.chain
        if pending.heads:
            chain.response_head(key, version, pending.heads, bytes(frame[:RESPONSE_HEAD]))
        if chain.observers:
            chain.observe_response(key, version, frame)
        if not seen or not chain.must_decode(key, version, seen, frame):
            set_response_correlation_id(frame, pending.client_correlation_id)
            return frame
        try:
            return chain.response_frame(key, version, seen, frame, pending.client_correlation_id)
        except MalformedRequest as exc:
            raise UpstreamError(f"{self.upstream}: {exc}") from None

    def _check_correlation_id(self, pending: Pending, frame: bytes | bytearray) -> None:
        got = response_correlation_id(frame)
        if got != pending.upstream_correlation_id:
            raise UpstreamError(f"{self.upstream}: response with correlation id {got}, expected "
                                f"{pending.upstream_correlation_id}")

    # --- streaming: a large response sent on while it arrives ------------------------------------------

    def _streamable(self, pending: Pending, size: int) -> bool:
        """A large response no filter must decode, from a plain upstream socket to a plain client socket:
        streamed (its records spliced)."""
        if size <= _SMALL or self._pipe is None:
            return False
        if self.upstream.socket is None or not self.conn.spliceable:
            return False
        return self.chain.may_stream(pending.api_key, pending.api_version, pending.seen)

    async def _stream(self, pending: Pending, size: int) -> None:
        """Send the response on as it arrives: its size and correlation id, then its fields as read and its
        record data spliced socket to socket. A Fetch response is walked when a filter takes its tail (the
        address rewriting of node_endpoints, its last bytes) or the observers count its record sets."""
        upstream, chain = self.upstream, self.chain
        relay = FrameRelay(UpstreamSource(upstream, self.proxy.settings.request_timeout), SIZE.size + size,
                           self._pipe, self.conn.sock, self.conn.send_parts, self.conn,
                           lambda message: UpstreamError(f"{upstream}: {message}"))
        if pending.heads:
            await relay.fill(min(SIZE.size + size, SIZE.size + RESPONSE_HEAD))
            head = bytes(upstream.head(SIZE.size + RESPONSE_HEAD))[SIZE.size:]
            self._check_correlation_id(pending, head)
            chain.response_head(pending.api_key, pending.api_version, pending.heads, head)
        await relay.fill(8)
        head = upstream.take(8)
        relay.left -= 8
        self._check_correlation_id(pending, head[4:])
        relay.out.append(head[:4] + SIZE.pack(pending.client_correlation_id))
        key, version, seen = pending.api_key, pending.api_version, pending.seen
        record_sets = None
        try:
            if key == FETCH_KEY and (seen or chain.observers):
                record_sets = await self._walk_fetch(relay, version, strict=bool(seen))
            if seen:
                relay.out.append(chain.streamed_tail(key, version, seen, await relay.take_rest(_MAX_TAIL)))
            else:
                await relay.rest()
        except (FrameDoesNotWalk, MalformedRequest) as exc:
            raise UpstreamError(f"{upstream}: streamed {api_name(key)} response: {exc}") from None
        if chain.observers:  # (before the last bytes go: the client cannot have the response before it counts)
            chain.observe(Frame(RESPONSE, key, version, SIZE.size + size, record_sets))
        await relay.flush()

    @staticmethod
    async def _walk_fetch(relay: FrameRelay, version: int, strict: bool):
        """A streamed Fetch response walked to its tail: its record sets, None when it does not walk (``strict``:
        FrameDoesNotWalk, its tail is needed)."""
        walk = FetchWalk(version)
        try:
            await relay.walk(walk)
        except FrameDoesNotWalk:
            if strict:
                raise
            return None
        return walk.record_sets

    def _close_client(self) -> None:
        """Shut the client socket down: the read loop ends and the connection closes."""
        try:
            self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _splices_early(version: int, body_head: memoryview) -> bool:
    """Whether a Produce request the observers need walked is worth streaming: its first record set to run
    past its buffered head does so by SPLICE_FROM bytes or more (the batches of one request are alike). One of
    many small record sets is read whole instead: walking it as it streams would copy it all through Python in
    pieces, and splice nothing."""
    try:
        walked, opaque = ProduceWalk(version).step(body_head)
    except MalformedRequest:
        return False  # read whole: its per-topic counts are lost there
    return opaque - (len(body_head) - walked) >= SPLICE_FROM


def _truncated(message: str) -> MalformedRequest:
    return MalformedRequest(f"truncated frame: {message}")


def _framed(frame: bytes) -> bytes:
    return SIZE.pack(len(frame)) + frame
