"""One client connection: read size-prefixed frames, hand each to the connection's request handler (the
broker's API dispatch, or the proxy's forwarding session), send the answers in order, file slices zero-copy.

Like Kafka's SocketServer, a connection handles one request at a time (Kafka mutes the channel until the
response is sent), so responses always go out in request order; clients may still pipeline requests:
they wait in the socket buffer. A connection's memory follows the bytes it has received: its buffer grows
as they arrive, within the broker-wide queued.max.request.bytes, and shrinks back when idle. Bad input
(oversized, truncated or undecodable frames, unknown APIs) gets one log line and a closed connection;
nothing a client sends can stop the server.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import socket
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from logway.server.audit import NO_AUDIT, Audit, Client
from logway.server.config import Listener
from logway.server.request_memory import RESIZE_AFTER_S, RequestMemory
from logway.server.security.realm import Realm
from logway.server.security.settings import ListenerSecurity
from logway.server.stats import ServerStats
from logway.wire.fetch import Chunk, FileSlice
from logway.wire.protocol import MalformedRequest

if TYPE_CHECKING:
    from logway.server.security.sasl import SaslSession

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
# Every connection keeps a buffer of this size. It grows (doubling, as bytes arrive) to the frames the
# traffic brings, and, while the budget has room, up to _PIPELINE_BUFFER when a receive fills it with
# pipelined requests (several requests per receive); it is sized down to recent use every
# RESIZE_AFTER_S, at once when other connections wait for memory, and freed when idle.
_BASE_BUFFER = 8 * 1024
_PIPELINE_BUFFER = 256 * 1024
# A receive for a frame at least this large stops this far past its end, so moving a partial next frame
# to the front of the buffer never copies more; smaller frames are received as far as the buffer goes.
_READ_AHEAD = 64 * 1024
# Responses smaller than this are coalesced into one send.
_COALESCE = 64 * 1024
# At most this many responses are held back for one send while pipelined Produce requests follow (see _hold).
_MAX_HELD = 64
_PRIVATE_ANONYMOUS = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
# A connection with pipelined requests in its buffer handles at most this many of them (or bytes of them) before
# it lets the other connections run.
_TURN_REQUESTS = 4
_TURN_BYTES = 64 * 1024
_PRODUCE = 0  # api key (low byte; the high byte is 0)
_HELD_CLOSE_TIMEOUT_S = 1.0
_IOV_MAX = 512  # buffers per sendmsg (Linux allows 1024)
# When the handler streams large frames: the first receive into an empty buffer takes at most this much (a large
# frame's rest stays in the socket for the handler to splice), and a frame's head is buffered this far before
# the handler is offered it (its header, transactional id and acks).
_STREAM_HEAD_READ = 16 * 1024
_STREAM_HEAD = 1024


class ConnectionClosed(Exception):
    """The peer closed the connection (possibly mid-frame)."""


class Deferred:
    """A response not ready when its request has been handled: a Produce whose appends wait for an fsync (the
    broker's group commit). The connection goes on with the Produce requests the client has already sent after
    it, so their appends join the same fsync, holds their responses behind this one, and sends them all in
    order: ``result`` gives this one's chunks once it is ready."""

    __slots__ = ("ready", "result")

    def __init__(self, result: Callable[[], Awaitable[list[Chunk]]], ready: Callable[[], bool] | None = None) -> None:
        self.result = result
        # Whether ``result`` would return at once: then the responses before it wait for it, for one send.
        self.ready = ready or (lambda: False)


@dataclass(frozen=True)
class ListenerContext:
    """A listener as its connections see it: its name and address, its security (TLS, SASL), the realm its
    clients authenticate against and are authorized in, the largest request (socket.request.max.bytes) and
    the audit log its authentications and ACL denials go to."""

    listener: Listener
    security: ListenerSecurity
    realm: Realm
    max_request_bytes: int
    audit: Audit = NO_AUDIT


class RequestHandler:
    """What a Connection hands its request frames to (the broker's API dispatch, the proxy's session). One is
    made per connection by the server's handler factory; this base answers nothing and streams nothing."""

    # True: every answer comes back from ``handle`` (so answers to pipelined requests may be held and sent
    # together); False: the handler sends answers itself, from another task (the proxy).
    answers_inline = True
    # Frames at least this large are offered to ``stream_frame`` before they are whole (None: never).
    stream_from: int | None = None

    async def handle(self, conn: Connection, frame: memoryview) -> list[Chunk] | None:
        """Answer one request frame: framed chunks to send, or None (no answer, or sent by the handler)."""
        raise NotImplementedError

    async def handle_before_authentication(self, conn: Connection, frame: memoryview) -> list[Chunk] | None:
        """ApiVersions on a SASL connection that has not authenticated yet: answered inline (the SASL exchange
        that follows is answered by the connection itself, in order)."""
        return await self.handle(conn, frame)

    @asynccontextmanager
    async def session(self, conn: Connection) -> AsyncIterator[None]:
        """Around the connection's request loop, after its TLS handshake: the handler's own tasks and resources."""
        yield

    async def stream_frame(self, conn: Connection, size: int) -> bool:
        """Take the frame of ``size`` bytes whose head is buffered (``conn.buffered()``) and forward it as it
        arrives; False (nothing done) to have it read whole instead."""
        return False


HandlerFactory = Callable[["Connection"], RequestHandler]
Gate = Callable[["Connection", memoryview], Awaitable["list[Chunk] | None"]]


class Connection:
    """One client connection over a non-blocking socket; its reads and writes wait through trio."""

    # Who the client is, for the authorizer (Kafka's KafkaPrincipal): set by mTLS or SASL.
    principal = "User:ANONYMOUS"
    # The API of the request being answered, set by the handler (-1: none, e.g. a bare SASL token), for metrics.
    api_key = -1
    api_version = 0
    # Whether bytes may be spliced to and from the socket (not through TLS: its records are encrypted in user space).
    spliceable = True

    def __init__(self, sock: socket.socket, peer: str, context: ListenerContext, memory: RequestMemory,
                 stats: ServerStats, make_handler: HandlerFactory) -> None:
        self.listener = context.listener
        self.security = context.security
        self.realm = context.realm
        self.audit = context.audit
        self.max_request_bytes = context.max_request_bytes
        self.stats = stats
        self.sasl: SaslSession | None = None
        # Until a SASL client has authenticated (or while its session may expire), requests go through this
        # gate (server/security/sasl.py) instead of straight to the handler.
        self.gate: Gate | None = None
        # The largest frame read: socket.request.max.bytes, or before SASL authentication
        # sasl.server.max.receive.size (KIP-498: an unauthenticated client cannot make the broker buffer 100 MB).
        self.max_frame = context.max_request_bytes
        self.max_frame_key = "socket.request.max.bytes"
        self.sock = sock
        self.peer = peer
        self.memory = memory
        # Receive buffer: bytes [start, end) are received and not yet handed out as a frame.
        self.buf: bytearray | mmap.mmap = bytearray(_BASE_BUFFER)
        self.view = memoryview(self.buf)
        self.start = 0
        self.end = 0
        self.peak = 0  # the most bytes the buffer has held since it was last sized
        self.resize_at = 0.0  # trio time after which a grown buffer is sized down to ``peak``
        self.io_bytes = 0  # bytes received and sent so far (the idle sweep's sign of life)
        self.busy = False  # the server is working for this connection (waiting for memory or handling a request)
        self.expired = False
        self.client_software: tuple[str, str] | None = None
        # Responses held for one send while pipelined Produce requests follow, and their requests' metrics.
        self.held: list[Chunk | Deferred] = []
        self.held_bytes = 0
        self.held_file = False
        self.held_deferred = False
        self.answered: list[tuple[int, int, float]] = []
        # Frames and their bytes handed out since this connection last let the others run (see _take_turn).
        self.turn_requests = 0
        self.turn_bytes = 0
        self.handler = make_handler(self)

    def audit_client(self, client_id: str | None = None) -> Client:
        """This connection as the audit log names it (its principal and address; a request's client id)."""
        return Client(self.principal, self.peer, self.listener.name, client_id)

    # -- reading request frames -------------------------------------------------------------------------------

    def buffered(self) -> memoryview:
        """The bytes received and not yet handed out (a streaming handler reads a frame's head here)."""
        return self.view[self.start : self.end]

    def drop_buffered(self) -> None:
        """Forget the buffered bytes (a streaming handler has sent them on)."""
        self.start = self.end = 0

    async def read_frame(self) -> memoryview:
        """The next request frame without its size prefix (see _read_whole_frame); a large frame the handler
        streams (handler.stream_from) is offered to it first, as it arrives, and skipped here once taken."""
        if self.handler.stream_from is not None:
            frame = await self._frame_unless_streamed()
            if frame is not None:
                return frame
        return await self._read_whole_frame()

    async def _frame_unless_streamed(self) -> memoryview | None:
        """A frame already whole in the buffer, after handing the large ones the handler takes to it; None for
        anything else (a small or unusual frame, a closed connection): _read_whole_frame reads or refuses it."""
        while True:
            if self.start == self.end:
                try:
                    await self._receive_at_most(_STREAM_HEAD_READ)
                except ConnectionClosed:
                    return None  # _read_whole_frame reports it
            if self.end - self.start < 4:
                return None
            (size,) = _SIZE.unpack_from(self.buf, self.start)
            total = 4 + size
            if not 0 <= size <= self.max_frame:
                return None  # refused there
            if self.end - self.start >= total:  # already whole
                frame = self.view[self.start + 4 : self.start + total]
                self.start += total
                return frame
            if size < self.handler.stream_from:
                return None
            try:
                while self.end - self.start < _STREAM_HEAD:
                    await self._receive(_STREAM_HEAD)
            except ConnectionClosed:
                return None
            if self.end - self.start < total and not await self.handler.stream_frame(self, size):
                return None

    async def _receive_at_most(self, limit: int) -> None:
        """Into the empty receive buffer, at most ``limit`` bytes: a large frame's rest stays in the socket, for
        the handler to splice (a plain receive fills the buffer, which may have grown to hundreds of KB)."""
        self.start = self.end = 0
        waited = False
        while True:
            try:
                n = self.sock.recv_into(self.view[:limit])
                break
            except BlockingIOError:
                await self._wait_readable()  # (may size the buffer down: self.view is read again)
                waited = True
        if not waited:
            await trio.lowlevel.checkpoint()  # as _receive: let the others run
        if n == 0:
            raise ConnectionClosed()
        self.end = n
        self.io_bytes += n
        self.peak = max(self.peak, n)

    async def _read_whole_frame(self) -> memoryview:
        """The next request frame without its size prefix, as a writable view the handlers may patch.

        The view points into the receive buffer and is valid until the next read_frame (requests are
        handled one at a time); the request bytes are copied once, from the kernel, unless the buffer had
        to grow under the frame. Memory follows the bytes received, never a declared size.
        """
        if self.start == self.end:
            self.start = self.end = 0
        if self.memory.waiting and len(self.buf) > max(_BASE_BUFFER, self.end - self.start):
            # Others wait for memory: give back what this connection does not hold a request in (Kafka
            # frees a request's buffer once it is handled).
            self._resize(max(_BASE_BUFFER, self.end - self.start))
        received = False
        while self.end - self.start < 4:
            received = True
            try:
                await self._receive(4)
            except ConnectionClosed:
                if self.end > self.start:
                    raise MalformedRequest(f"truncated frame: {self.end - self.start} bytes of a size prefix") from None
                raise
        (size,) = _SIZE.unpack_from(self.buf, self.start)
        limit = self.max_frame
        if size < 0 or size > limit:
            raise MalformedRequest(f"frame of {size} bytes is larger than {self.max_frame_key}={limit} or negative")
        total = 4 + size
        while self.end - self.start < total:
            received = True
            try:
                await self._receive(total)
            except ConnectionClosed:
                have = self.end - self.start - 4
                raise MalformedRequest(f"truncated frame: connection closed after {have} of {size} bytes") from None
        await self._take_turn(received, total)
        frame = self.view[self.start + 4 : self.start + total]
        self.start += total
        return frame

    async def _take_turn(self, received: bool, size: int) -> None:
        """Let the other connections run before this one goes on, once per receive (it has yielded: it waited
        for bytes, or checkpointed) and, for frames already in the buffer (pipelined), once every _TURN_REQUESTS
        frames or _TURN_BYTES bytes: a trip through trio's scheduler costs about as much as a tenth of a small
        Produce request, and a few requests handled in a row keep the others waiting well under a millisecond."""
        if received:
            self.turn_requests, self.turn_bytes = 1, size
            return
        self.turn_requests += 1
        self.turn_bytes += size
        if self.turn_requests > _TURN_REQUESTS or self.turn_bytes > _TURN_BYTES:
            self.turn_requests, self.turn_bytes = 1, size
            await trio.lowlevel.checkpoint()
        else:
            await trio.lowlevel.checkpoint_if_cancelled()

    async def _receive(self, need: int) -> None:
        """Receive more of the ``need`` bytes starting at ``start``, first making room for them: move them to
        the front if they fit the buffer, else grow it once it is full (so memory follows received bytes)."""
        if self.start + need > len(self.buf):
            if need <= len(self.buf):
                self._resize(len(self.buf))
            elif self.end == len(self.buf):
                await self._grow(need)
        waited = False
        while True:
            size = len(self.buf)  # the buffer may be given back while waiting with nothing in it
            stop = size if need < _READ_AHEAD else min(size, max(self.start + need, self.end + _READ_AHEAD))
            try:
                n = self.sock.recv_into(self.view[self.end : stop])
                break
            except BlockingIOError:
                await self._wait_readable()
                waited = True
        if not waited:
            # Bytes were there at once (a pipelining client): let the other connections run before this one
            # goes on. After a wait for bytes the task has just been scheduled: no second trip through the loop.
            await trio.lowlevel.checkpoint()
        if n == 0:
            raise ConnectionClosed()
        self.end += n
        self.io_bytes += n
        if self.end == size:
            self.peak = size
            if size < _PIPELINE_BUFFER and self.end - self.start >= need:
                self._grow_for_pipelining()
        elif self.end > self.peak:
            self.peak = self.end

    async def _wait_readable(self) -> None:
        """Wait for bytes. A grown buffer with nothing in it is first sized down to its recent use (every
        RESIZE_AFTER_S) and offered to RequestMemory while waiting, which gives it back when the wait is
        long or other connections need memory (no receive is in progress, so it can be swapped)."""
        if self.start < self.end or len(self.buf) == _BASE_BUFFER:
            await trio.lowlevel.wait_readable(self.sock)
            return
        now = trio.current_time()
        if now >= self.resize_at:
            if self.peak <= len(self.buf) // 2:
                self._resize(max(_BASE_BUFFER, self.peak))
            self.peak = 0
            self.resize_at = now + RESIZE_AFTER_S
        self.memory.hold_idle(self, now)
        try:
            await trio.lowlevel.wait_readable(self.sock)
        finally:
            self.memory.unhold_idle(self)

    async def _grow(self, need: int) -> None:
        """Double the full buffer (up to ``need`` and a quarter), taking the memory from the broker-wide budget:
        while it is spent this connection stops reading (backpressure), as Kafka mutes a channel."""
        size = len(self.buf)
        new_size = min(2 * size, need + need // 4)
        self.busy = True
        try:
            await self.memory.acquire(self, new_size - size)
        finally:
            self.busy = False
        self._resize(new_size)

    def _grow_for_pipelining(self) -> None:
        """The buffer filled up with whole requests and more are likely queued: grow it to _PIPELINE_BUFFER at
        once if the budget has room now, else double it if that has room (never waiting: this memory only saves
        receives). One step instead of doubling five times: each step copies the pending bytes into a new
        mapping and unmaps the old one, which cost 100 fresh pipelining producers 7% of the broker's CPU. The
        pages of the mapping are only used (RSS) once bytes are received into them."""
        size = len(self.buf)
        for new_size in (_PIPELINE_BUFFER, min(2 * size, _PIPELINE_BUFFER)):
            if self.memory.try_acquire(new_size - size):
                self._resize(new_size)
                return

    def give_back_buffer(self) -> None:
        """Called by RequestMemory while this connection waits for bytes with nothing in its buffer: back to
        the base buffer."""
        if len(self.buf) > _BASE_BUFFER and self.start == self.end:
            self._resize(_BASE_BUFFER)
            self.peak = 0

    def _resize(self, size: int) -> None:
        """Move the pending bytes to the front of a buffer of ``size`` (the same one if it is that size),
        returning memory above the base size to the budget (growth took it from there first)."""
        pending = self.end - self.start
        if size == len(self.buf):
            self.buf[:pending] = bytes(self.view[self.start : self.end])  # regions may overlap
        else:
            # A grown buffer is a private anonymous mapping: pages cost memory only once bytes are received
            # into them, and go back to the system as soon as the buffer is dropped. (mmap.mmap(-1, n) alone
            # is MAP_SHARED, backed by shmem: its page faults and munmap cost more.)
            buf = bytearray(size) if size <= _BASE_BUFFER else mmap.mmap(-1, size, flags=_PRIVATE_ANONYMOUS)
            buf[:pending] = self.view[self.start : self.end]
            if size < len(self.buf):
                self.memory.release(len(self.buf) - size)
            self.buf, self.view = buf, memoryview(buf)
        self.start, self.end = 0, pending

    async def send_all(self, data: bytes | memoryview) -> None:
        """Send all of ``data``. Only a cancellation point, not a trip through the scheduler: the next receive
        yields to the other connections (it waits for bytes or checkpoints), once per request."""
        view = memoryview(data)
        while view:
            try:
                n = self.sock.send(view)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self.sock)
                continue
            self.io_bytes += n
            view = view[n:]
        await trio.lowlevel.checkpoint_if_cancelled()

    async def send_file(self, piece: FileSlice) -> None:
        """os.sendfile from a segment file straight to the socket (the zero-copy path of the seeds)."""
        fd_out = self.sock.fileno()
        offset = piece.position
        remaining = piece.size
        while remaining > 0:
            try:
                sent = os.sendfile(fd_out, piece.fd, offset, remaining)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self.sock)
                continue
            if sent == 0:
                # The file is shorter than the slice (truncated under us): a broken response; drop the
                # connection rather than let the client read garbage.
                raise ConnectionClosed("segment file shorter than the slice being sent")
            offset += sent
            remaining -= sent
            self.io_bytes += sent
        await trio.lowlevel.checkpoint()

    async def send_parts(self, parts: Sequence[bytes | bytearray | memoryview]) -> None:
        """Send ``parts`` in order with one sendmsg where it can (gather I/O: no copy to join them)."""
        views = [memoryview(p) for p in parts if len(p)]
        while views:
            try:
                sent = self.sock.sendmsg(views[:_IOV_MAX])
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self.sock)
                continue
            self.io_bytes += sent
            while sent:
                if sent >= len(views[0]):
                    sent -= len(views.pop(0))
                else:
                    views[0], sent = views[0][sent:], 0
        await trio.lowlevel.checkpoint()

    async def send_chunks(self, chunks: list[Chunk]) -> None:
        buffered: list[bytes] = []
        size = 0
        for chunk in chunks:
            if isinstance(chunk, FileSlice):
                if buffered:
                    await self.send_all(b"".join(buffered))
                    buffered, size = [], 0
                await self.send_file(chunk)
            else:
                buffered.append(chunk)
                size += len(chunk)
                if size >= _COALESCE:
                    await self.send_all(b"".join(buffered))
                    buffered, size = [], 0
        if buffered:
            await self.send_all(b"".join(buffered))

    async def linger(self, seconds: float, limit: int = 64 * 1024) -> None:
        """Before closing after a last response (a failed authentication): read and drop what the peer still
        sends, until it closes or ``seconds`` pass, so close() does not reset the connection (a receive
        buffer with unread bytes makes it send RST) before the client has read that response. (Shutting the
        write side first made kafka-python 3.0 report a plain disconnect instead of the authentication
        error, observed in test_kafka_python_wrong_password.)"""
        scratch = bytearray(4096)
        with trio.move_on_after(seconds):
            while limit > 0:
                try:
                    n = self.sock.recv_into(scratch)
                except BlockingIOError:
                    await trio.lowlevel.wait_readable(self.sock)
                    continue
                except OSError:
                    return
                if n == 0:
                    return
                limit -= n

    def expire(self) -> None:
        """Close an idle connection (connections.max.idle.ms): shut the socket down, so the pending receive
        ends and run() closes it; Kafka's Selector closes expired channels quietly, so only a debug line."""
        if self.expired:
            return
        self.expired = True
        log.debug("closing idle connection from %s (connections.max.idle.ms)", self.peer)
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    async def handshake(self) -> None:
        """Before the first request: nothing on PLAINTEXT (TLS connections shake hands here)."""

    async def run(self) -> None:
        """Serve the connection until the client closes it or sends something it may not; then close it."""
        try:
            await self.handshake()
            async with self.handler.session(self):
                try:
                    await self._answer_requests()
                except Exception as exc:  # inside the session: its tasks end after the answers held here go out
                    await self._closing(exc)
        except Exception as exc:  # the TLS handshake, or the handler's session itself
            await self._closing(exc)
        finally:
            trio.lowlevel.notify_closing(self.sock)
            self.sock.close()
            if len(self.buf) > _BASE_BUFFER:
                self.memory.release(len(self.buf) - _BASE_BUFFER)

    async def _closing(self, exc: Exception) -> None:
        """Why the connection closes, in one log line (none for a client that simply went away); the answers to
        the requests before a bad one still go out."""
        if isinstance(exc, ConnectionClosed):
            return
        if isinstance(exc, MalformedRequest):
            await self._send_held_quietly()
            if not self.expired:
                log.warning("closing connection from %s: %s", self.peer, exc)
        elif isinstance(exc, OSError):
            if exc.errno not in (errno.ECONNRESET, errno.EPIPE, errno.EBADF):
                log.warning("closing connection from %s: %s", self.peer, exc)
        else:
            await self._send_held_quietly()
            log.error("closing connection from %s after an internal error", self.peer, exc_info=exc)

    async def _answer_requests(self) -> None:
        handler = self.handler
        while True:
            # No local keeps the frame or the response while waiting for the next request, so an idle
            # connection's buffer (and a large response) can be freed.
            frame = await self.read_frame()
            started = time.perf_counter()
            self.busy = True
            self.api_key = -1
            gate = self.gate
            response = await (handler.handle(self, frame) if gate is None else gate(self, frame))
            self.busy = False
            del frame
            self._hold(response, started)
            del response
            if not self._may_hold_more():
                await self.send_held()

    # -- responses held back while pipelined Produce requests follow -----------------------------------------
    # A send on a TCP socket costs more than the Python work of a small Produce request (on loopback it also
    # runs the peer's receive path and wakes it), and a client that pipelines Produce requests (librdkafka with
    # many connections) has the next ones in our buffer already. Their responses are then held and sent in one
    # send once no further Produce request is waiting (or _COALESCE bytes / _MAX_HELD responses are held): the
    # order is unchanged, each response leaves within the handling of the requests already received, and none
    # waits on anything that can block (only the broker's own dispatch, only before a Produce, which does not
    # wait for the network and sends them before it waits for an fsync or a worker thread). Kafka answers one
    # request at a time per connection too; this only pays for fewer sends (and wake-ups of the client).

    def _hold(self, response: list[Chunk | Deferred] | None, started: float) -> None:
        """Queue a request's response (None: acks=0, nothing to send) and its metrics until the next send."""
        if response is not None:
            for chunk in response:
                self.held.append(chunk)
                if isinstance(chunk, Deferred):
                    self.held_deferred = True
                    continue
                self.held_bytes += chunk.size if isinstance(chunk, FileSlice) else len(chunk)
                self.held_file |= isinstance(chunk, FileSlice)
        if self.api_key >= 0:
            self.answered.append((self.api_key, self.api_version, started))

    def _may_hold_more(self) -> bool:
        """Whether the held responses may wait for the next request: a whole Produce request is already in the
        buffer, the broker answers it itself, and the held responses are small bytes. Behind a response waiting
        for an fsync (Deferred), what the client has sent meanwhile is taken in first, without waiting for it."""
        if self.held_file or self.held_bytes >= _COALESCE or len(self.answered) >= _MAX_HELD:
            return False
        if self.gate is not None or not self.handler.answers_inline:  # the SASL gate; a proxy's session
            return False
        if self._produce_buffered(whole=True):
            return True
        if not self.held_deferred:
            return False
        # A Produce behind one waiting for its fsync is taken in as it arrives (a large one needs several receives).
        self._receive_ready()
        return self._produce_buffered(whole=False)

    def _produce_buffered(self, *, whole: bool) -> bool:
        """Whether a Produce request is in the buffer (``whole``: all of it, else its beginning)."""
        have = self.end - self.start
        if have < 6:
            return False
        (size,) = _SIZE.unpack_from(self.buf, self.start)
        if size < 2 or (whole and size > have - 4):
            return False
        return self.buf[self.start + 4] == 0 and self.buf[self.start + 5] == _PRODUCE

    def _receive_ready(self) -> bool:
        """Receive what the client has sent already, without waiting; whether anything came (a closed or failed
        socket counts as nothing: the next read reports it)."""
        if self.end == len(self.buf):
            if self.start == 0:
                return False  # full of one unfinished frame: the next read grows the buffer
            self._resize(len(self.buf))
        try:
            n = self.sock.recv_into(self.view[self.end :])
        except OSError:  # BlockingIOError: nothing there
            return False
        self.end += n
        self.io_bytes += n
        self.peak = max(self.peak, self.end)
        return n > 0

    async def send_held(self) -> None:
        """Send the held responses (one send when they are small bytes), then record their requests' metrics:
        Kafka's RequestMetrics TotalTimeMs, from the request received to its response sent. A handler calls it
        before it waits on something slow (a Produce that must fsync), so earlier responses do not wait too.
        A Deferred response is waited for in its turn, after the responses before it are sent."""
        held, answered = self.held, self.answered
        self.held, self.answered, self.held_bytes, self.held_file = [], [], 0, False
        if self.held_deferred:
            self.held_deferred = False
            held = await self._send_until_last_deferred(held)
        if held:
            await self.send_chunks(held)
        if answered:
            record = self.stats.requests.record
            now = time.perf_counter()
            for api_key, api_version, started in answered:
                record(api_key, api_version, (now - started) * 1000)

    async def _send_until_last_deferred(self, held: list[Chunk | Deferred]) -> list[Chunk]:
        """Send the held chunks up to the last Deferred, each Deferred once ready; the chunks after it."""
        ready: list[Chunk] = []
        for chunk in held:
            if isinstance(chunk, Deferred):
                if ready and not chunk.ready():
                    await self.send_chunks(ready)
                    ready = []
                ready.extend(await chunk.result())
            else:
                ready.append(chunk)
        return ready

    async def _send_held_quietly(self) -> None:
        """Before closing a connection: the responses to the requests before the bad one still go out."""
        if not self.held:
            return
        try:
            with trio.move_on_after(_HELD_CLOSE_TIMEOUT_S):
                await self.send_held()
        except OSError:
            pass
