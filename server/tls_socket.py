"""A non-blocking TLS socket whose record layer runs over memory BIOs, in large reads and writes: the broker's and
the proxy's TLS client connections (server/tls_connection.py) and the proxy's TLS upstream connections
(proxy/upstream.py) are driven through it by trio's wait_readable/wait_writable, like their plain sockets.

Why memory BIOs: OpenSSL decrypts one TLS record per SSL_read, and librdkafka writes one record per buffer
segment (a 10-byte record header, then the 1 KiB value: two records per message). Over a socket BIO each record
cost two read() syscalls (its header, then its body) and a trip through the receive loop: 6 broker CPU-s per GB
produced, against 1 in plaintext. Here one recv() takes what has arrived (up to the room the caller has) and one
recv_into decrypts all of its records into the caller's buffer; sends encrypt up to 64 KiB at a time and hand
the records to the kernel in one sendmsg(). (kTLS would move the record layer into the kernel and let Fetch use
sendfile again, but it needs a kernel built with CONFIG_TLS and Python 3.12's ssl.OP_ENABLE_KTLS.)
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable, Sequence

import trio

# Plaintext encrypted before the records are handed to the kernel. Small enough that the plaintext, OpenSSL's
# copy of the records and the bytes handed to sendmsg stay in the CPU's cache: consuming over TLS cost 0.86-1.04
# broker CPU-s/GB in 64 KiB pieces against 1.04-1.16 in 256 KiB ones (and 0.98-1.05 in 32 KiB ones, more
# calls), on a quiet 2-core VM.
_SEND_CHUNK = 64 * 1024
# The largest TLS record on the wire (RFC 8446 5.2: 2^14 + 256 bytes of ciphertext, and a 5-byte header).
_MAX_RECORD = 5 + 2**14 + 256
# Ciphertext is received here and at once written into the connection's incoming BIO, within one call that never
# waits: so one buffer serves every connection of the thread.
_SCRATCH = memoryview(bytearray(256 * 1024))
_IOV_MAX = 512


class TlsSocket(ssl.SSLSocket):
    """A TLS socket for a non-blocking loop: recv_into, recv and send speak plaintext and report "would block" as
    BlockingIOError, and a clean or abrupt TLS close as the end of the stream (recv_into returns 0).

    It is an ssl.SSLSocket (code that must not splice or sendfile past TLS can tell), over the connection's own
    file descriptor, but its OpenSSL object reads and writes memory BIOs, which this class fills from and drains
    to the socket; only the methods defined here are meant to be used."""

    def __init__(self, context: ssl.SSLContext, sock: socket.socket, *, server_side: bool,  # noqa: D107
                 server_hostname: str | None = None) -> None:
        socket.socket.__init__(self, sock.family, sock.type, sock.proto, fileno=sock.detach())
        self.setblocking(False)
        self._context = context
        self._session = None
        self._closed = False
        self._connected = True
        self.server_side = server_side
        self.server_hostname = server_hostname
        self.do_handshake_on_connect = False
        self.suppress_ragged_eofs = True
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._sslobj = context.wrap_bio(self._incoming, self._outgoing, server_side=server_side,
                                        server_hostname=server_hostname)
        self._unsent: list[memoryview] = []  # ciphertext not yet taken by the kernel, in order
        self.unsent = 0  # its bytes
        self._ended = False  # the TLS stream has ended (close_notify, or the TCP stream ended)

    # -- receiving ------------------------------------------------------------------------------------------

    def recv_into(self, buffer, nbytes=0, flags=0) -> int:  # noqa: D102 (the socket interface)
        if self._ended:
            return 0
        view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
        try:
            got = self._decrypt_into(view, nbytes or len(view))
        except ssl.SSLError:  # a record that does not decrypt (bad_record_mac), not TLS at all, ...
            self._send_alert()
            raise
        if self._outgoing.pending:  # a TLS 1.3 KeyUpdate answer, written while reading
            self._queue_output()
            self.flush()
        if got == 0 and not self._ended:
            raise BlockingIOError()
        return got

    def _decrypt_into(self, view: memoryview, limit: int) -> int:
        """Up to ``limit`` bytes of plaintext into ``view``: the records buffered, then those the socket has. It
        receives first when nothing is buffered (no ciphertext in the BIO, no plaintext left of a record read in
        part), and stops once the socket and the BIO are drained: no read that can only fail (an exception)."""
        read, incoming = self._sslobj.read, self._incoming
        got = 0
        fill = not incoming.pending and not self._sslobj.pending()
        drained = False  # the last recv() took less than it asked for: the socket is empty
        try:
            while got < limit:
                if fill:
                    want = min(max(limit - got, _MAX_RECORD), len(_SCRATCH))
                    try:
                        n = self._fill(want)
                    except BlockingIOError:
                        break
                    drained, fill = 0 < n < want, False
                try:
                    n = read(limit - got, view[got:] if got else view)
                except ssl.SSLWantReadError:  # a partial record in the BIO
                    if drained:
                        break
                    fill = True
                    continue
                if n == 0:  # the peer's close_notify
                    self._ended = True
                    break
                got += n
                if drained and not incoming.pending:
                    break
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            self._ended = True  # what was decrypted before it still counts; the next call returns 0
        return got

    def recv(self, bufsize: int, flags=0) -> bytes:  # noqa: D102
        buf = bytearray(bufsize)
        return bytes(memoryview(buf)[: self.recv_into(buf)])

    def _fill(self, want: int) -> int:
        """Move up to ``want`` bytes of ciphertext from the socket into the incoming BIO and return how many
        (BlockingIOError if none are there). The caller asks for at most the room it has, or one record:
        plaintext is never longer than its ciphertext, so the BIO keeps little more than a partial record.
        0: the TCP stream has ended, and so has the BIO's input (the next read raises SSLEOFError)."""
        n = socket.socket.recv_into(self, _SCRATCH, want)
        if n == 0:
            self._incoming.write_eof()
        else:
            self._incoming.write(_SCRATCH[:n])
        return n

    # -- sending --------------------------------------------------------------------------------------------

    def send(self, data, flags=0) -> int:  # noqa: D102
        if self.unsent and not self.flush():
            raise BlockingIOError()
        n = self.encrypt(data)
        self.flush()
        return n

    def encrypt(self, data) -> int:
        """Encrypt up to 64 KiB of ``data`` into records queued for the kernel (flush sends them); how many
        bytes of ``data`` that took."""
        n = min(len(data), _SEND_CHUNK)
        self._sslobj.write(data[:n])
        self._queue_output()
        return n

    def flush(self) -> bool:
        """Hand the queued records to the kernel, as many as it takes now; True when none are left."""
        unsent = self._unsent
        while unsent:
            try:
                n = socket.socket.sendmsg(self, unsent[:_IOV_MAX])
            except BlockingIOError:
                return False
            self.unsent -= n
            while n:
                if n >= len(unsent[0]):
                    n -= len(unsent.pop(0))
                else:
                    unsent[0], n = unsent[0][n:], 0
        return True

    def _queue_output(self) -> None:
        """Queue the records OpenSSL wrote into the outgoing BIO."""
        data = self._outgoing.read()
        if data:
            self._unsent.append(memoryview(data))
            self.unsent += len(data)

    # -- handshake and close --------------------------------------------------------------------------------

    def do_handshake(self, block=False) -> None:  # noqa: D102 (SSLSocket's, non-blocking)
        """One step of the handshake: SSLWantReadError / SSLWantWriteError when it must wait for the socket;
        done only once its last flight has reached the kernel. A failed handshake sends its alert."""
        while True:
            try:
                self._sslobj.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._queue_output()
                if not self.flush():
                    raise ssl.SSLWantWriteError() from None
                try:
                    self._fill(len(_SCRATCH))
                except BlockingIOError:
                    raise ssl.SSLWantReadError() from None
            except ssl.SSLError:
                self._send_alert()
                raise
        self._queue_output()
        if not self.flush():
            raise ssl.SSLWantWriteError()

    def _send_alert(self) -> None:
        """Best effort, never waiting: the alert OpenSSL wrote for a failed handshake or a bad record (the peer
        then reports why, e.g. an unknown CA, instead of a reset)."""
        try:
            self._queue_output()
            self.flush()
        except OSError:
            pass

    def shutdown(self, how: int) -> None:  # noqa: D102 (the TCP socket's: wakes a pending receive or send)
        socket.socket.shutdown(self, how)


async def handshake(sock: TlsSocket) -> None:
    """Shake hands, waiting for the socket as the handshake needs (ssl.SSLError if it fails)."""
    while True:
        try:
            sock.do_handshake()
            return
        except ssl.SSLWantReadError:
            await trio.lowlevel.wait_readable(sock)
        except ssl.SSLWantWriteError:
            await trio.lowlevel.wait_writable(sock)


def _ignore(_n: int) -> None:
    pass


async def send_parts(sock: TlsSocket, parts: Sequence[bytes | bytearray | memoryview],
                     sent: Callable[[int], object] = _ignore) -> None:
    """Send every byte of ``parts`` (one TLS record or more each), their records gathered into few sendmsg calls;
    returns once the kernel has taken them all. ``sent(n)`` is told of each ``n`` bytes encrypted (progress)."""
    for part in parts:
        view = memoryview(part)
        while view:
            if sock.unsent >= _SEND_CHUNK and not sock.flush():
                await trio.lowlevel.wait_writable(sock)
                continue
            n = sock.encrypt(view)
            view = view[n:]
            sent(n)
    while not sock.flush():
        await trio.lowlevel.wait_writable(sock)
    await trio.lowlevel.checkpoint_if_cancelled()
