"""A client connection over TLS (SSL and SASL_SSL listeners): the same non-blocking loop as Connection, with
Python's ssl doing the record layer, and Fetch's file slices sent in large pread chunks (sendfile cannot
go through user-space TLS). The PLAINTEXT path is untouched by any of this.
"""

from __future__ import annotations

import errno
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


class NonBlockingTLSSocket(ssl.SSLSocket):
    """An SSLSocket that reports "would block" the way Connection's loop expects (BlockingIOError), and a
    clean or abrupt TLS close as end of stream."""

    def recv_into(self, buffer, nbytes=0, flags=0):  # noqa: D102 (the socket interface)
        try:
            return super().recv_into(buffer, nbytes, flags)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise BlockingIOError() from None
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            return 0

    def send(self, data, flags=0):  # noqa: D102
        try:
            return super().send(data, flags)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise BlockingIOError() from None
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            raise BrokenPipeError(errno.EPIPE, "TLS peer closed the connection") from None


def wrap_server_socket(context: ssl.SSLContext, sock: socket.socket) -> NonBlockingTLSSocket:
    context.sslsocket_class = NonBlockingTLSSocket
    return context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)


class TlsConnection(Connection):
    """A Connection whose socket is a NonBlockingTLSSocket; the handshake runs before the first request."""

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
