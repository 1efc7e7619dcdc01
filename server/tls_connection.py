"""A client connection over TLS (SSL and SASL_SSL listeners): the same non-blocking loop as Connection, with
OpenSSL's record layer driven over memory BIOs, and Fetch's file slices sent in large pread chunks (sendfile
cannot go through user-space TLS; the kernel here has no kTLS). The PLAINTEXT path is untouched by any of this.

Why memory BIOs: OpenSSL decrypts one TLS record per SSL_read, and librdkafka writes one record per buffer
segment (a 10-byte record header, then the 1 KiB value: two records per message). Over a socket BIO each record
cost two read() syscalls (its header, then its body) and a trip through the receive loop: 6 broker CPU-s per GB
produced against 1 in plaintext. Here one recv() takes what has arrived (up to the room in the connection's
buffer) and one recv_into decrypts all of its records into that buffer; a send encrypts up to 256 KiB into
records and hands them to the kernel in one send().
"""

from __future__ import annotations

import logging
import os
import socket
import ssl

import trio

from logway.server.connection import Connection, ConnectionClosed
from logway.wire.fetch import FileSlice

log = logging.getLogger(__name__)

# File slices go out in pieces this large (each one pread, then as many TLS records as it needs).
_FILE_CHUNK = 256 * 1024
_JOIN_UP_TO = 64 * 1024
# Plaintext encrypted per send(): its records go to the kernel in one send().
_SEND_CHUNK = 256 * 1024
# The largest TLS record on the wire (RFC 8446 5.2: 2^14 + 256 bytes of ciphertext, and a 5-byte header).
_MAX_RECORD = 5 + 2**14 + 256
# Ciphertext is received here and at once written into the connection's incoming BIO, within one call that
# never waits: so one buffer serves every connection of the thread.
_SCRATCH = memoryview(bytearray(256 * 1024))


class TlsSocket(ssl.SSLSocket):
    """A server-side TLS socket for Connection's non-blocking loop: recv_into and send speak plaintext and report
    "would block" as BlockingIOError, a clean or abrupt TLS close as end of stream (recv_into returns 0).

    It is an ssl.SSLSocket (so code that must not splice or sendfile past TLS can tell), over the connection's own
    file descriptor, but its OpenSSL object reads and writes memory BIOs, which this class fills from and drains
    to the socket in large reads and writes; only the methods below are used."""

    def __init__(self, context: ssl.SSLContext, sock: socket.socket) -> None:  # noqa: D107
        socket.socket.__init__(self, sock.family, sock.type, sock.proto, fileno=sock.detach())
        self.setblocking(False)
        self._context = context
        self._session = None
        self._closed = False
        self._connected = True
        self.server_side = True
        self.server_hostname = None
        self.do_handshake_on_connect = False
        self.suppress_ragged_eofs = True
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._sslobj = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self._unsent = memoryview(b"")  # ciphertext not yet taken by the kernel
        self._ended = False  # the TLS stream has ended (close_notify, or the TCP stream ended)

    # -- receiving ------------------------------------------------------------------------------------------

    def recv_into(self, buffer, nbytes=0, flags=0) -> int:  # noqa: D102 (the socket interface)
        if self._ended:
            return 0
        view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
        limit = nbytes or len(view)
        read = self._sslobj.read
        got = 0
        drained = False  # the last recv() took less than it asked for: the socket is empty
        try:
            while got < limit:
                try:
                    n = read(limit - got, view[got:] if got else view)
                except ssl.SSLWantReadError:
                    if drained:
                        break
                    want = min(max(limit - got, _MAX_RECORD), len(_SCRATCH))
                    try:
                        drained = 0 < self._fill(want) < want
                    except BlockingIOError:
                        break
                    continue
                if n == 0:  # the client's close_notify
                    self._ended = True
                    break
                got += n
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            self._ended = True  # what was decrypted before it still counts; the next call returns 0
        except ssl.SSLError:  # a record that does not decrypt (bad_record_mac), not TLS at all, ...
            self._send_alert()
            raise
        if self._outgoing.pending:  # a TLS 1.3 KeyUpdate answer, written while reading
            self._queue_output()
            self.flush()
        if got == 0 and not self._ended:
            raise BlockingIOError()
        return got

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
        if self._unsent and not self.flush():
            raise BlockingIOError()
        n = min(len(data), _SEND_CHUNK)
        self._sslobj.write(data[:n])
        self._queue_output()
        self.flush()
        return n

    @property
    def unsent(self) -> int:
        """Bytes of ciphertext encrypted and not yet taken by the kernel (send_all waits for them)."""
        return len(self._unsent)

    def flush(self) -> bool:
        """Hand the encrypted bytes to the kernel, as much as it takes now; True when none are left."""
        while self._unsent:
            try:
                n = socket.socket.send(self, self._unsent)
            except BlockingIOError:
                return False
            self._unsent = self._unsent[n:]
        return True

    def _queue_output(self) -> None:
        """The records OpenSSL wrote into the outgoing BIO, after those not yet sent."""
        data = self._outgoing.read()
        self._unsent = memoryview(bytes(self._unsent) + data) if self._unsent else memoryview(data)

    # -- handshake and close --------------------------------------------------------------------------------

    def do_handshake(self, block=False) -> None:  # noqa: D102 (SSLSocket's, non-blocking)
        """One step of the server handshake: SSLWantReadError / SSLWantWriteError when it must wait for the
        socket; done only once its last flight has reached the kernel. A failed handshake sends its alert."""
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
        """Best effort, never waiting: the alert OpenSSL wrote for a failed handshake or a bad record (the client
        then reports why, e.g. an unknown CA, instead of a reset)."""
        try:
            self._queue_output()
            self.flush()
        except OSError:
            pass

    def shutdown(self, how: int) -> None:  # noqa: D102 (the TCP socket's: wakes a pending receive or send)
        socket.socket.shutdown(self, how)


def wrap_server_socket(context: ssl.SSLContext, sock: socket.socket) -> TlsSocket:
    """The accepted socket as a TlsSocket (not yet shaken hands: TlsConnection.handshake does that)."""
    return TlsSocket(context, sock)


class TlsConnection(Connection):
    """A Connection whose socket is a TlsSocket; the handshake runs before the first request."""

    sock: TlsSocket

    async def handshake(self) -> None:
        sock = self.sock
        while True:
            if self.expired:  # connections.max.idle.ms ran out mid-handshake (expire() shut the socket down)
                raise ConnectionClosed()
            try:
                sock.do_handshake()
                break
            except ssl.SSLWantReadError:
                await trio.lowlevel.wait_readable(sock)
            except ssl.SSLWantWriteError:
                await trio.lowlevel.wait_writable(sock)
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                raise ConnectionClosed() from None
            except ssl.SSLError as exc:
                # A plaintext client, an untrusted or expired certificate, no shared protocol: Kafka logs
                # "Failed authentication with <peer> (SSL handshake failed)" and closes.
                log.info("failed authentication with %s (SSL handshake failed: %s)", self.peer, exc.reason or exc)
                raise ConnectionClosed() from None
        self.io_bytes += 1  # a sign of life for the idle sweep
        der = sock.getpeercert()
        if der:
            dn = x500_name(der.get("subject", ()))
            try:
                name = self.security.principal_mapper.name(dn)
            except ValueError as exc:  # Kafka: "Failed to map name for '<dn>' based on SSL principal mapping rules."
                log.info("failed authentication with %s (Failed to map name for '%s' based on SSL principal "
                         "mapping rules: %s)", self.peer, dn, exc)
                raise ConnectionClosed() from None
            self.principal = "User:" + name
            log.debug("%s: TLS client authenticated as %s", self.peer, self.principal)

    async def send_all(self, data: bytes | memoryview) -> None:
        """Encrypt and send all of ``data``; returns once the kernel has taken every record (a response is not
        left behind in this process while the connection waits for the next request)."""
        sock = self.sock
        view = memoryview(data)
        while view or sock.unsent:
            try:
                if view:
                    n = sock.send(view)
                    view = view[n:]
                    self.io_bytes += n
                elif not sock.flush():
                    raise BlockingIOError()
            except BlockingIOError:
                await trio.lowlevel.wait_writable(sock)
        await trio.lowlevel.checkpoint_if_cancelled()

    async def send_parts(self, parts) -> None:
        """TLS has no gather send: small parts joined into one send, a large one sent as it is (no copy)."""
        if sum(len(p) for p in parts) <= _JOIN_UP_TO:
            await self.send_all(b"".join(parts))
            return
        for part in parts:
            await self.send_all(part)

    async def send_file(self, piece: FileSlice) -> None:
        """Read the slice from the segment in large chunks and send them through TLS."""
        offset, remaining = piece.position, piece.size
        while remaining > 0:
            data = os.pread(piece.fd, min(remaining, _FILE_CHUNK), offset)
            if not data:
                raise ConnectionClosed("segment file shorter than the slice being sent")
            await self.send_all(data)
            offset += len(data)
            remaining -= len(data)


# Attribute names as Java's X500Principal.getName() (RFC 2253) writes them.
_RDN_KEYS = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU", "countryName": "C",
             "localityName": "L", "stateOrProvinceName": "ST", "streetAddress": "STREET", "domainComponent": "DC",
             "userId": "UID"}


def x500_name(subject) -> str:
    """A certificate subject (ssl's getpeercert() form) as Kafka's default SSL principal name: RFC 2253,
    most specific RDN first, e.g. ``CN=alice,OU=eng,O=Acme,C=US``."""
    rdns = []
    for rdn in reversed(subject):
        rdns.append("+".join(f"{_RDN_KEYS.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(rdns)


def _escape(value: str) -> str:
    out = "".join("\\" + c if c in ',+"\\<>;' else c for c in value)
    if out[:1] in ("#", " "):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out
