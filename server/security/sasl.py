"""A SASL listener's connection before it has authenticated (Kafka's SaslServerAuthenticator), and the
SaslHandshake and SaslAuthenticate answers of both processes.

Until authentication succeeds the connection answers only ApiVersions (its handler's), SaslHandshake and
SaslAuthenticate (answered here); any other request closes it, as Kafka does ("Unexpected Kafka request of
type ... during SASL handshake"). A failed authentication gets its SaslAuthenticate response
(SASL_AUTHENTICATION_FAILED and Kafka's message), then the connection is closed. After success, requests go
straight to the handler (no per-request cost), unless connections.max.reauth.ms is set (KIP-368): then the
session expires after that long, a SaslHandshake starts a re-authentication (same mechanism, same principal,
credentials checked again), and any other request on an expired session closes the connection, as Kafka's
SocketServer does.

SaslHandshake (key 17), v0-v1. v0: after the handshake the client sends bare SASL tokens as size-prefixed
frames, answered the same way; v1: the tokens go in SaslAuthenticate requests (KIP-152). Response:
error_code, mechanisms (the listener's sasl.enabled.mechanisms). An unknown mechanism gets
UNSUPPORTED_SASL_MECHANISM and the connection is closed, as Kafka does; a handshake on a non-SASL listener or
a second one gets ILLEGAL_SASL_STATE.

SaslAuthenticate (key 36), v0-v2. v0: auth_bytes in and out, error_code and error_message. v1:
session_lifetime_ms in the response, set when authentication completes: connections.max.reauth.ms, after which
the client must re-authenticate (0: never, KIP-368). v2: flexible. A failure gets SASL_AUTHENTICATION_FAILED
with Kafka's message (PLAIN: "Authentication failed: Invalid username or password"), and the connection
closes. Without a SaslHandshake first the answer is ILLEGAL_SASL_STATE and the connection closes; on a
connection already authenticated or not on a SASL listener, ILLEGAL_SASL_STATE with Kafka's KafkaApis message.
"""

from __future__ import annotations

import logging
import struct
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from logway.server.audit import authentication
from logway.server.security.credentials import CredentialStore
from logway.server.security.plain import PlainError, authenticate
from logway.server.security.scram import ScramAuthenticationError, ScramError, ScramServer
from logway.server.security.settings import ListenerSecurity
from logway.wire.errors import ErrorCode
from logway.wire.protocol import (
    MalformedRequest,
    api_name,
    body_offset,
    build,
    decode_body,
    decode_request_header,
    encode_response,
    response_type,
)

if TYPE_CHECKING:
    from logway.server.connection import Connection

log = logging.getLogger(__name__)

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
# The versions served (advertised by the broker's and the proxy's ApiVersions on SASL listeners).
VERSIONS = {SASL_HANDSHAKE: (0, 1), SASL_AUTHENTICATE: (0, 2)}
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
        self.claimed: str | None = None  # the user the client names in its first token (for the audit log)

    def begin_reauthentication(self, principal: str, now: float) -> None:
        """A SaslHandshake on an authenticated connection whose session has a lifetime (KIP-368)."""
        self.previous = (self.mechanism or "", principal)
        self.reauth_started = now
        self.mechanism, self.authenticated, self.failed, self.raw, self._scram = None, False, False, False, None

    def step(self, token: bytes) -> tuple[bytes, str | None]:
        """One SaslAuthenticate token in, (the answer, the principal once authenticated) out; SaslFailed on failure."""
        try:
            answer, principal = self._step(token)
        finally:
            if self._scram is not None:
                self.claimed = self._scram.username
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
                self.claimed = _plain_user(token)
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


def _plain_user(token: bytes) -> str | None:
    """The authentication id of a PLAIN token (never its password), for the audit log."""
    parts = token.split(b"\0")
    return parts[1].decode("utf-8", "replace") if len(parts) == 3 else None


def audit_authentication(conn: Connection, mechanism: str, error: str | None = None,
                         client_id: str | None = None) -> None:
    """One authentication event for the connection's audit log: its principal when it succeeded, else the user
    the client claimed (if it got that far)."""
    if not conn.audit.enabled:
        return
    client = conn.audit_client(client_id)
    if error is not None:
        claimed = conn.sasl.claimed if conn.sasl is not None else None
        client = replace(client, principal="User:" + claimed if claimed else None)
    conn.audit.record(authentication(client, mechanism, error))


def handshake_response(conn: Connection, version: int, request, client_id: str | None = None):
    """SaslHandshake: the mechanism chosen, or why not."""
    session = conn.sasl
    body = response_type(SASL_HANDSHAKE, version)
    if session is None or session.mechanism is not None or session.authenticated:
        if session is not None:
            session.failed = True
        return build(body, {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": []})
    mechanisms = list(session.security.mechanisms)
    if request.mechanism not in mechanisms:
        session.failed = True
        audit_authentication(conn, request.mechanism, f"Unsupported SASL mechanism {request.mechanism}", client_id)
        return build(body, {"error_code": ErrorCode.unsupported_sasl_mechanism, "mechanisms": mechanisms})
    session.mechanism = request.mechanism
    session.raw = version == 0
    return build(body, {"error_code": ErrorCode.none, "mechanisms": mechanisms})


def authenticate_response(conn: Connection, version: int, request, client_id: str | None = None):
    """SaslAuthenticate: one step of the exchange; the connection's principal once it completes."""
    session = conn.sasl
    body = {"error_code": ErrorCode.none, "error_message": None, "auth_bytes": b"", "session_lifetime": 0}
    cls = response_type(SASL_AUTHENTICATE, version)
    if session is None or session.authenticated:
        # Kafka's KafkaApis answers what reaches it past the authenticator so (a PLAINTEXT listener included).
        return build(cls, {**body, "error_code": ErrorCode.illegal_sasl_state,
                           "error_message": "SaslAuthenticate request received after successful authentication"})
    if session.mechanism is None:
        session.failed = True
        return build(cls, {**body, "error_code": ErrorCode.illegal_sasl_state,
                           "error_message": "Unexpected Kafka request of type SASL_AUTHENTICATE during SASL handshake."})
    try:
        answer, principal = session.step(bytes(request.auth_bytes))
    except SaslFailed as exc:
        session.failed = True
        log.info("failed authentication with %s (%s)", conn.peer, exc)
        audit_authentication(conn, session.mechanism, str(exc), client_id)
        return build(cls, {**body, "error_code": ErrorCode.sasl_authentication_failed, "error_message": str(exc)})
    if principal is not None:
        session.authenticated = True
        conn.principal = principal
        log.debug("%s: authenticated as %s with %s", conn.peer, principal, session.mechanism)
        audit_authentication(conn, session.mechanism, client_id=client_id)
        body["session_lifetime"] = session.lifetime_ms
    return build(cls, {**body, "auth_bytes": answer})


_ANSWERS = {SASL_HANDSHAKE: handshake_response, SASL_AUTHENTICATE: authenticate_response}


async def answer_sasl_request(conn: Connection, frame: memoryview) -> list[bytes]:
    """A SaslHandshake or SaslAuthenticate frame answered by the server itself."""
    header, pos = decode_request_header(frame)
    conn.api_key, conn.api_version = header.api_key, header.api_version  # for the request metrics
    low, high = VERSIONS[header.api_key]
    if not low <= header.api_version <= high:
        raise MalformedRequest(f"{api_name(header.api_key)} v{header.api_version} is not supported (v{low}-v{high})")
    request = decode_body(header.api_key, header.api_version, bytes(frame), body_offset(frame, header, pos))
    response = _ANSWERS[header.api_key](conn, header.api_version, request, header.client_id)
    return [encode_response(header.api_key, header.api_version, header.correlation_id, response)]


def start_authentication(conn: Connection) -> None:
    """A connection on a SASL listener: only the SASL exchange is served until it has authenticated, in frames
    of at most sasl.server.max.receive.size."""
    security = conn.security
    conn.sasl = SaslSession(security, conn.realm.credentials)
    conn.gate = sasl_gate
    conn.max_frame, conn.max_frame_key = security.sasl_max_receive, "sasl.server.max.receive.size"


async def sasl_gate(conn: Connection, frame: memoryview):
    """The gate of a SASL connection until it has authenticated."""
    from logway.server.connection import ConnectionClosed  # (connection imports this module)

    session = conn.sasl
    if session.raw:
        return await _raw_token(conn, session, frame)
    if len(frame) < 2:
        raise MalformedRequest("frame too short for a request header")
    (api_key,) = _API_KEY.unpack_from(frame)
    if api_key == API_VERSIONS:
        return await conn.handler.handle_before_authentication(conn, frame)
    if api_key not in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
        raise MalformedRequest(f"Unexpected Kafka request of type {api_name(api_key)} during SASL handshake")
    response = await answer_sasl_request(conn, frame)
    if session.failed:
        await conn.send_chunks(response)
        await conn.linger(1.0)
        raise ConnectionClosed()
    if session.authenticated:
        _authenticated(conn)
    return response


async def _raw_token(conn: Connection, session: SaslSession, frame: memoryview) -> list[bytes]:
    """SaslHandshake v0's flow: the frame is a bare SASL token, the answer a size-prefixed bare token; a
    failure closes the connection with no answer (there is no field to carry an error), as Kafka does."""
    from logway.server.connection import ConnectionClosed

    try:
        answer, principal = session.step(bytes(frame))
    except SaslFailed as exc:
        log.info("failed authentication with %s (%s)", conn.peer, exc)
        audit_authentication(conn, session.mechanism or "", str(exc))
        raise ConnectionClosed() from None
    if principal is not None:
        session.authenticated = True
        conn.principal = principal
        audit_authentication(conn, session.mechanism or "")
        _authenticated(conn)
    return [_SIZE.pack(len(answer)) + answer]


def _authenticated(conn: Connection) -> None:
    conn.gate = session_gate if conn.sasl.expires_at is not None else None
    conn.max_frame, conn.max_frame_key = conn.max_request_bytes, "socket.request.max.bytes"


# Kafka's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS: a SaslHandshake sooner than this after the last
# re-authentication began is an ordinary (refused) request.
_MIN_REAUTH_INTERVAL_S = 1.0


async def session_gate(conn: Connection, frame: memoryview):
    """The gate of an authenticated connection whose SASL session expires (connections.max.reauth.ms > 0):
    a SaslHandshake begins re-authentication; anything else after expiry closes the connection (Kafka's
    SocketServer: "Disconnecting expired channel")."""
    from logway.server.connection import ConnectionClosed

    session = conn.sasl
    now = time.monotonic()
    api_key = _API_KEY.unpack_from(frame)[0] if len(frame) >= 2 else -1
    if api_key == SASL_HANDSHAKE and now - session.reauth_started >= _MIN_REAUTH_INTERVAL_S:
        session.begin_reauthentication(conn.principal, now)
        conn.gate = sasl_gate
        return await sasl_gate(conn, frame)
    if now > session.expires_at:
        log.info("closing connection from %s: its SASL session expired (connections.max.reauth.ms=%d) and it sent "
                 "%s instead of re-authenticating", conn.peer, session.lifetime_ms, api_name(api_key))
        raise ConnectionClosed()
    return await conn.handler.handle(conn, frame)
