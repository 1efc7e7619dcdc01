"""A SASL listener's connection before it has authenticated (Kafka's SaslServerAuthenticator).

Until authentication succeeds the connection answers only ApiVersions, SaslHandshake and SaslAuthenticate;
any other request closes it, as Kafka does ("Unexpected Kafka request of type ... during SASL handshake").
A failed authentication gets its SaslAuthenticate response (SASL_AUTHENTICATION_FAILED and Kafka's message),
then the connection is closed. After success, requests go straight to the API dispatch (no per-request cost),
unless connections.max.reauth.ms is set (KIP-368): then the session expires after that long, a SaslHandshake
starts a re-authentication (same mechanism, same principal, credentials checked again), and any other
request on an expired session closes the connection, as Kafka's SocketServer does.
"""

from __future__ import annotations

import logging
import struct
import time
from typing import TYPE_CHECKING

from logway.gateway.security.credentials import CredentialStore
from logway.gateway.security.plain import PlainError, authenticate
from logway.gateway.security.scram import ScramAuthenticationError, ScramError, ScramServer
from logway.gateway.security.settings import ListenerSecurity
from logway.wire.protocol import MalformedRequest, api_name

if TYPE_CHECKING:
    from logway.gateway.connection import Connection

log = logging.getLogger(__name__)

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
_API_KEY = struct.Struct(">h")
_SIZE = struct.Struct(">i")


class SaslFailed(Exception):
    """Authentication failed; the message is the client's error_message."""


class SaslSession:
    """The SASL state of one connection: the mechanism chosen by SaslHandshake, the exchange in progress."""

    def __init__(self, security: ListenerSecurity, store: CredentialStore) -> None:
        self.security = security
        self.store = store
        self.mechanism: str | None = None
        self.authenticated = False
        self.failed = False
        self.raw = False  # after a SaslHandshake v0: the tokens come as bare frames, not SaslAuthenticate
        self._scram: ScramServer | None = None
        self.lifetime_ms = 0  # of the session, once authenticated (0: it never expires)
        self.expires_at: float | None = None  # time.monotonic() after which only re-authentication is served
        self.previous: tuple[str, str] | None = None  # while re-authenticating: the mechanism and principal
        self.reauth_started = float("-inf")

    def begin_reauthentication(self, principal: str, now: float) -> None:
        """A SaslHandshake on an authenticated connection whose session has a lifetime (KIP-368)."""
        self.previous = (self.mechanism or "", principal)
        self.reauth_started = now
        self.mechanism, self.authenticated, self.failed, self.raw, self._scram = None, False, False, False, None

    def step(self, token: bytes) -> tuple[bytes, str | None]:
        """One SaslAuthenticate token in, (the answer, the principal once authenticated) out; SaslFailed on failure."""
        answer, principal = self._step(token)
        if principal is not None:
            self._complete(principal)
        return answer, principal

    def _step(self, token: bytes) -> tuple[bytes, str | None]:
        mechanism = self.mechanism
        if self.previous is not None and mechanism != self.previous[0]:
            raise SaslFailed(f"SASL mechanism '{mechanism}' requested by client is not supported for "
                             f"re-authentication of mechanism '{self.previous[0]}'")
        try:
            if mechanism == "PLAIN":
                user = authenticate(token, self.security.plain_users)
                return b"", "User:" + user
            if self._scram is None:
                self._scram = ScramServer(mechanism, lambda user: self.store.lookup(mechanism, user))
            answer = self._scram.respond(token)
            return answer, ("User:" + self._scram.username) if self._scram.complete else None
        except (PlainError, ScramAuthenticationError) as exc:
            raise SaslFailed(str(exc)) from None
        except ScramError:
            # Kafka's SaslServerAuthenticator passes a SaslAuthenticationException's message through and
            # words any other SaslException (unknown user, wrong proof) this way.
            raise SaslFailed("Authentication failed during authentication due to invalid credentials with SASL "
                             f"mechanism {mechanism}") from None

    def _complete(self, principal: str) -> None:
        """Kafka's ReauthInfo.calcCompletionTimesAndReturnSessionLifetimeMs, for credentials that never expire."""
        if self.previous is not None and principal != self.previous[1]:
            before, after = (p.replace(":", ".", 1) for p in (self.previous[1], principal))
            raise SaslFailed(f"Cannot change principals during re-authentication from {before}: {after}")
        self.previous = None
        self.lifetime_ms = max(0, self.security.reauth_ms.get(self.mechanism or "", 0))
        self.expires_at = time.monotonic() + self.lifetime_ms / 1000 if self.lifetime_ms else None


async def sasl_gate(conn: Connection, frame: memoryview):
    """The dispatch of a SASL connection until it has authenticated."""
    from logway.gateway.connection import ConnectionClosed  # (imports at call time: connection imports the APIs)
    from logway.gateway.dispatch import dispatch

    session = conn.sasl
    if session.raw:
        return await _raw_token(conn, session, frame)
    if len(frame) < 2:
        raise MalformedRequest("frame too short for a request header")
    (api_key,) = _API_KEY.unpack_from(frame)
    if api_key not in (API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE):
        raise MalformedRequest(f"Unexpected Kafka request of type {api_name(api_key)} during SASL handshake")
    response = await dispatch(conn, frame)
    if session.failed:
        if response:
            await conn.send_chunks(response)
            await conn.linger(1.0)
        raise ConnectionClosed()
    if session.authenticated:
        _authenticated(conn)
    return response


async def _raw_token(conn: Connection, session: SaslSession, frame: memoryview) -> list[bytes]:
    """SaslHandshake v0's flow: the frame is a bare SASL token, the answer a size-prefixed bare token; a
    failure closes the connection with no answer (there is no field to carry an error), as Kafka does."""
    from logway.gateway.connection import ConnectionClosed

    try:
        answer, principal = session.step(bytes(frame))
    except SaslFailed as exc:
        log.info("failed authentication with %s (%s)", conn.peer, exc)
        raise ConnectionClosed() from None
    if principal is not None:
        session.authenticated = True
        conn.principal = principal
        _authenticated(conn)
    return [_SIZE.pack(len(answer)) + answer]


def _authenticated(conn: Connection) -> None:
    if conn.sasl.expires_at is not None:
        conn.dispatch = session_gate
    else:
        conn.__dict__.pop("dispatch", None)  # back to the class's API dispatch
    conn.max_frame, conn.max_frame_key = conn.broker.config.socket_request_max_bytes, "socket.request.max.bytes"


# Kafka's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS: a SaslHandshake sooner than this after the last
# re-authentication began is an ordinary (refused) request.
_MIN_REAUTH_INTERVAL_S = 1.0


async def session_gate(conn: Connection, frame: memoryview):
    """The dispatch of an authenticated connection whose SASL session expires (connections.max.reauth.ms > 0):
    a SaslHandshake begins re-authentication; anything else after expiry closes the connection (Kafka's
    SocketServer: "Disconnecting expired channel")."""
    from logway.gateway.connection import ConnectionClosed
    from logway.gateway.dispatch import dispatch

    session = conn.sasl
    now = time.monotonic()
    api_key = _API_KEY.unpack_from(frame)[0] if len(frame) >= 2 else -1
    if api_key == SASL_HANDSHAKE and now - session.reauth_started >= _MIN_REAUTH_INTERVAL_S:
        session.begin_reauthentication(conn.principal, now)
        conn.dispatch = sasl_gate
        return await sasl_gate(conn, frame)
    if now > session.expires_at:
        log.info("closing connection from %s: its SASL session expired (connections.max.reauth.ms=%d) and it sent "
                 "%s instead of re-authenticating", conn.peer, session.lifetime_ms, api_name(api_key))
        raise ConnectionClosed()
    return await dispatch(conn, frame)
