"""One client connection: read size-prefixed frames, answer each request in order, send file slices zero-copy.

Like Kafka's SocketServer, a connection handles one request at a time (Kafka mutes the channel until the
response is sent), so responses always go out in request order; clients may still pipeline requests:
they wait in the socket buffer. Bad input (oversized, truncated or undecodable frames, unknown APIs) gets
one log line and a closed connection; nothing a client sends can stop the server.
"""

from __future__ import annotations

import errno
import logging
import os
import struct

import trio

from logway.gateway.broker import Broker
from logway.gateway.dispatch import dispatch
from logway.wire.fetch import Chunk, FileSlice
from logway.wire.protocol import MalformedRequest

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_BUFFER_SIZE = 256 * 1024
# Responses smaller than this are coalesced into one send.
_COALESCE = 64 * 1024


class ConnectionClosed(Exception):
    """The peer closed the connection (possibly mid-frame)."""


class Connection:
    def __init__(self, broker: Broker, sock: trio.socket.SocketType, peer: str) -> None:
        self.broker = broker
        self.sock = sock
        self.peer = peer
        # Receive buffer: bytes [start, end) are received and not yet handed out as a frame.
        self.buf = bytearray(_BUFFER_SIZE)
        self.view = memoryview(self.buf)
        self.start = 0
        self.end = 0
        self.client_software: tuple[str, str] | None = None

    async def _fill(self, need: int) -> None:
        """Receive more bytes, first making room for ``need`` bytes from ``start`` if the buffer's tail is short."""
        if self.start == self.end:
            self.start = self.end = 0
        elif len(self.buf) - self.start < need:
            pending = self.end - self.start
            self.buf[:pending] = bytes(self.view[self.start : self.end])  # regions may overlap
            self.start, self.end = 0, pending
        n = await self.sock.recv_into(self.view[self.end :])
        if n == 0:
            raise ConnectionClosed()
        self.end += n

    async def read_frame(self) -> memoryview | bytearray:
        """The next request frame without its size prefix, as a writable buffer the handlers may patch.

        A frame that fits the receive buffer is a view into it (valid until the next read_frame: requests
        are handled one at a time); a larger one is received straight into a buffer of its own. Either way
        the request bytes are copied once, from the kernel.
        """
        while self.end - self.start < 4:
            try:
                await self._fill(4)
            except ConnectionClosed:
                if self.end > self.start:
                    raise MalformedRequest(f"truncated frame: {self.end - self.start} bytes of a size prefix") from None
                raise
        (size,) = _SIZE.unpack_from(self.buf, self.start)
        limit = self.broker.config.socket_request_max_bytes
        if size < 0 or size > limit:
            raise MalformedRequest(f"frame of {size} bytes is larger than socket.request.max.bytes={limit} or negative")
        total = 4 + size
        if total <= len(self.buf):
            while self.end - self.start < total:
                try:
                    await self._fill(total)
                except ConnectionClosed:
                    have = self.end - self.start - 4
                    raise MalformedRequest(f"truncated frame: connection closed after {have} of {size} bytes") from None
            frame = self.view[self.start + 4 : self.start + total]
            self.start += total
            return frame
        frame = bytearray(size)
        have = self.end - self.start - 4
        frame[:have] = self.view[self.start + 4 : self.end]
        self.start = self.end = 0
        view = memoryview(frame)
        while have < size:
            n = await self.sock.recv_into(view[have:])
            if n == 0:
                raise MalformedRequest(f"truncated frame: connection closed after {have} of {size} bytes")
            have += n
        return frame

    async def send_all(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view:
            n = await self.sock.send(view)
            view = view[n:]

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

    async def run(self) -> None:
        try:
            while True:
                frame = await self.read_frame()
                response = await dispatch(self, frame)
                if response is not None:
                    await self.send_chunks(response)
        except ConnectionClosed:
            pass
        except MalformedRequest as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
        except OSError as exc:
            if exc.errno not in (errno.ECONNRESET, errno.EPIPE, errno.EBADF):
                log.warning("closing connection from %s: %s", self.peer, exc)
        except trio.BrokenResourceError:
            pass
        except Exception:
            log.exception("closing connection from %s after an internal error", self.peer)
        finally:
            self.sock.close()
