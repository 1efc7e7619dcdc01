"""A frame forwarded while it arrives: its fields read in Python (and walked, when a filter or an observer needs
them), its record data spliced socket to socket behind them (proxy/splice.py). The same for a large Produce
request (client to upstream) and a large response (upstream to client), over plain TCP sockets only.

A walk that fails (the frame's bytes do not parse, or its record data runs past its end) raises
FrameDoesNotWalk; the caller decides: pass the rest through unwalked (the metrics lose that frame's per-topic
counts), or give up on the connection (a Fetch response whose tail must be rewritten).
"""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

import trio

from logway.proxy.frames import Received
from logway.proxy.splice import Pipe, SourceClosed, SourceStalled
from logway.proxy.upstream import Upstream, UpstreamError
from logway.proxy.walk import Walk
from logway.wire.errors import MalformedRequest

if TYPE_CHECKING:
    from logway.server.connection import Connection

READ_AHEAD = 32 * 1024  # a streamed frame's fields are received this far ahead (its records are spliced; a
# frame of many small partitions is still read in few receives)
CLIENT_READ_AHEAD = 2 * 1024  # a streamed Produce request's: the fields and the batch header between two
# partitions' record data take about 70 bytes, and what is received past them is copied instead of spliced
# (a request of many small record sets is not streamed when the metrics walk it: see session._splices_early)
SPLICE_FROM = 32 * 1024  # a shorter run of record data not yet received is received and sent from Python: a
# splice costs a pipe round trip and a trip through the scheduler, copying 32 KiB a few microseconds


class FrameDoesNotWalk(Exception):
    """A frame's bytes do not walk to its end."""


class Source(Protocol):
    """Where a streamed frame's bytes come from: what is buffered of it, and the socket the rest is in."""

    timeout: float  # the longest the source may send nothing mid-frame

    @property
    def buffered(self) -> int: ...

    @property
    def socket(self) -> socket.socket: ...

    def head(self, n: int) -> memoryview: ...

    def take(self, n: int) -> bytes: ...

    async def fill(self, n: int, frame_left: int) -> None:
        """Receive until ``n`` bytes are buffered (the frame has ``frame_left`` bytes from the first buffered
        one); raise the source's error when it closes or stalls."""


class UpstreamSource:
    """The upstream's response stream: its buffer may run ahead into the next frame (the upstream keeps it)."""

    def __init__(self, upstream: Upstream, timeout: float) -> None:
        self.upstream = upstream
        self.timeout = timeout

    @property
    def buffered(self) -> int:
        return self.upstream.buffered

    @property
    def socket(self) -> socket.socket:
        return self.upstream.socket

    def head(self, n: int) -> memoryview:
        return self.upstream.head(n)

    def take(self, n: int) -> bytes:
        return self.upstream.take(n)

    async def fill(self, n: int, frame_left: int) -> None:
        """(At most proxy.upstream.request.timeout.ms without a byte.)"""
        with trio.move_on_after(self.timeout) as scope:
            await self.upstream.fill(n, READ_AHEAD)
        if scope.cancelled_caught:
            raise UpstreamError(f"{self.upstream}: response stalled for proxy.upstream.request.timeout.ms")


class ClientSource(Received):
    """The rest of one request frame from the client: its head, taken from the connection's buffer, then its
    socket, never read past the frame's end (the next request stays in the socket for the connection)."""

    def __init__(self, conn: Connection, timeout: float) -> None:
        self.conn = conn
        self.timeout = timeout
        self._buf = bytearray(conn.buffered())
        conn.drop_buffered()  # (its bytes are here now)

    @property
    def socket(self) -> socket.socket:
        return self.conn.sock

    async def fill(self, n: int, frame_left: int) -> None:
        """(At most connections.max.idle.ms without a byte, as the connection's own reads.)"""
        sock = self.conn.sock
        while len(self._buf) < n:
            want = min(max(n - len(self._buf), CLIENT_READ_AHEAD), frame_left - len(self._buf))
            try:
                data = sock.recv(want)
            except BlockingIOError:
                with trio.move_on_after(self.timeout) as scope:
                    await trio.lowlevel.wait_readable(sock)
                if scope.cancelled_caught:
                    raise MalformedRequest(f"truncated frame: no bytes for {self.timeout:g} s") from None
                continue
            if not data:
                raise MalformedRequest(f"truncated frame: closed with {frame_left - len(self._buf)} bytes to come")
            self.conn.io_bytes += len(data)
            self._buf += data


class FrameRelay:
    """The rest of one frame, ``left`` bytes, from ``source`` to the plain socket ``dst``: fields (``out``) sent
    from Python, opaque runs spliced through ``pipe`` right behind them, in order."""

    def __init__(self, source: Source, left: int, pipe: Pipe, dst: socket.socket,
                 send: Callable[[list[bytes]], Awaitable[None]], conn: Connection,
                 error: Callable[[str], Exception]) -> None:
        self.source = source
        self.left = left
        self.pipe = pipe
        self.dst = dst
        self.send = send
        self.conn = conn  # the client's connection: its io_bytes are its sign of life
        self.error = error  # the exception for a source that closes or stalls mid-frame
        self.out: list[bytes] = []

    async def fields(self, n: int) -> None:
        """The next ``n`` bytes, read (received as needed) and queued to send."""
        await self.fill(n)
        self.out.append(self.source.take(n))
        self.left -= n

    async def walk(self, walk: Walk, tail: bool = True) -> None:
        """Forward the frame's bytes as ``walk`` parses them, up to its tail; without ``tail`` (nothing to read
        after the record data), the last record set and what follows it are forwarded at once, unread (one
        send less a frame)."""
        src = self.source
        while not walk.at_tail:
            with src.head(self.left) as view:
                try:
                    walked, opaque = walk.step(view)
                except MalformedRequest as exc:
                    raise FrameDoesNotWalk(str(exc)) from None
            if walked:
                self.out.append(src.take(walked))
                self.left -= walked
            if opaque:
                if opaque > self.left:
                    raise FrameDoesNotWalk(f"{opaque} bytes of record data past the frame's end")
                if walk.last_run and not tail:
                    await self.rest()
                    return
                await self.opaque(opaque)
            elif not walk.at_tail:  # the buffer ends inside an item
                if src.buffered >= self.left:
                    raise FrameDoesNotWalk("the frame ends inside its fields")
                await self.fill(src.buffered + 1)

    async def opaque(self, n: int) -> None:
        """Forward the next ``n`` bytes unread: the buffered ones queued, the rest spliced after ``out`` (or, when
        it is short, received and queued)."""
        src = self.source
        if n - src.buffered < SPLICE_FROM:
            if n:
                await self.fields(n)
            return
        have = src.buffered
        if have:
            self.out.append(src.take(have))
            self.left -= have
            n -= have
        head = self.out
        if sum(len(part) for part in head) > self.pipe.capacity // 2:  # (a large head: sent apart)
            await self.flush()
            head = []
        self.out = []
        try:
            self.conn.io_bytes += await self.pipe.move(src.socket, self.dst, n, src.timeout, head)
        except (SourceClosed, SourceStalled) as exc:
            raise self.error(str(exc)) from None
        self.left -= n

    async def rest(self) -> None:
        """Forward what is left of the frame unread."""
        await self.opaque(self.left)

    async def take_rest(self, limit: int) -> bytes:
        """What is left of the frame (its tail), read; FrameDoesNotWalk when that is over ``limit`` bytes."""
        if self.left > limit:
            raise FrameDoesNotWalk(f"{self.left} bytes of tagged fields")
        await self.fill(self.left)
        tail = self.source.take(self.left)
        self.left = 0
        return tail

    async def fill(self, n: int) -> None:
        if self.source.buffered < n:
            await self.source.fill(n, self.left)

    async def flush(self) -> None:
        """Send the queued fields."""
        if self.out:
            await self.send(self.out)
            self.out = []
