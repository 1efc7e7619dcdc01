"""A client connection over TLS (SSL and SASL_SSL listeners): the same non-blocking loop as Connection, over a
TlsSocket (server/tls_socket.py: OpenSSL's record layer over memory BIOs, in large reads and writes), with Fetch's
file slices sent in large pread chunks (sendfile cannot go through user-space TLS). The PLAINTEXT path is
untouched by any of this.
"""

from __future__ import annotations

import logging
import os
import socket
import ssl
from dataclasses import replace

from logway.server.audit import authentication
from logway.server.connection import Connection, ConnectionClosed
from logway.server.tls_socket import TlsSocket, handshake, send_parts
from logway.wire.fetch import FileSlice

log = logging.getLogger(__name__)

# File slices go out in pieces this large (each one pread, then as many TLS records as it needs): as large as
# the socket's encryption step (tls_socket._SEND_CHUNK), so each piece is encrypted while it is in the cache.
_FILE_CHUNK = 64 * 1024
_JOIN_UP_TO = 64 * 1024


def wrap_server_socket(context: ssl.SSLContext, sock: socket.socket) -> TlsSocket:
    """The accepted socket as a TlsSocket (not yet shaken hands: TlsConnection.handshake does that)."""
    return TlsSocket(context, sock, server_side=True)


class TlsConnection(Connection):
    """A Connection whose socket is a TlsSocket; the handshake runs before the first request."""

    sock: TlsSocket
    spliceable = False

    async def handshake(self) -> None:
        try:
            await handshake(self.sock)
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            raise ConnectionClosed() from None
        except ssl.SSLError as exc:
            # A plaintext client, an untrusted or expired certificate, no shared protocol: Kafka logs
            # "Failed authentication with <peer> (SSL handshake failed)" and closes.
            log.info("failed authentication with %s (SSL handshake failed: %s)", self.peer, exc.reason or exc)
            self._audit(f"SSL handshake failed: {exc.reason or exc}")
            raise ConnectionClosed() from None
        except OSError:
            if self.expired:  # connections.max.idle.ms ran out mid-handshake (expire() shut the socket down)
                raise ConnectionClosed() from None
            raise
        self.io_bytes += 1  # a sign of life for the idle sweep
        der = self.sock.getpeercert()
        if der:
            dn = x500_name(der.get("subject", ()))
            try:
                name = self.security.principal_mapper.name(dn)
            except ValueError as exc:  # Kafka: "Failed to map name for '<dn>' based on SSL principal mapping rules."
                log.info("failed authentication with %s (Failed to map name for '%s' based on SSL principal "
                         "mapping rules: %s)", self.peer, dn, exc)
                self._audit(f"Failed to map name for '{dn}' based on SSL principal mapping rules: {exc}")
                raise ConnectionClosed() from None
            self.principal = "User:" + name
            log.debug("%s: TLS client authenticated as %s", self.peer, self.principal)
            self._audit()

    def _audit(self, error: str | None = None) -> None:
        """An authentication event: a client certificate accepted (mTLS) or a handshake that failed (Kafka counts
        both as authentications). A TLS client without a certificate has not authenticated: no event."""
        if self.audit.enabled:
            client = self.audit_client()
            self.audit.record(authentication(client if error is None else replace(client, principal=None), "SSL",
                                             error))

    async def send_all(self, data: bytes | memoryview) -> None:
        """Encrypt and send all of ``data``; returns once the kernel has taken every record."""
        await send_parts(self.sock, [data], self._sent)

    def _sent(self, n: int) -> None:
        self.io_bytes += n  # a sign of life for the idle sweep, while a large answer goes out

    async def send_parts(self, parts) -> None:
        """Small parts joined into one TLS record (one encryption), large ones encrypted as they are (no copy);
        their records go to the kernel together."""
        if sum(len(p) for p in parts) <= _JOIN_UP_TO:
            parts = [b"".join(parts)]
        await send_parts(self.sock, parts, self._sent)

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
