"""SaslAuthenticate (key 36), v0-v2.

v0: auth_bytes in and out, error_code and error_message. v1: session_lifetime_ms in the response, set when
authentication completes: connections.max.reauth.ms, after which the client must re-authenticate (0: never,
KIP-368). v2: flexible. A failure gets SASL_AUTHENTICATION_FAILED with
Kafka's message (PLAIN: "Authentication failed: Invalid username or password"), and the connection closes.
Without a SaslHandshake first the answer is ILLEGAL_SASL_STATE and the connection closes; on a connection
already authenticated or not on a SASL listener, ILLEGAL_SASL_STATE with Kafka's KafkaApis message.
"""

from __future__ import annotations

import logging

from logway.gateway.security.sasl import SaslFailed
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

API_KEY = 36
MIN_VERSION = 0
MAX_VERSION = 2

log = logging.getLogger(__name__)


async def handle(ctx, request):
    conn = ctx.connection
    session = conn.sasl
    body = {"error_code": ErrorCode.none, "error_message": None, "auth_bytes": b"", "session_lifetime": 0}
    if session is None or session.authenticated:
        # Kafka's KafkaApis answers what reaches it past the authenticator so (a PLAINTEXT listener included).
        return build(response_type(API_KEY, ctx.version), {
            **body, "error_code": ErrorCode.illegal_sasl_state,
            "error_message": "SaslAuthenticate request received after successful authentication"})
    if session.mechanism is None:
        session.failed = True
        return build(response_type(API_KEY, ctx.version), {
            **body, "error_code": ErrorCode.illegal_sasl_state,
            "error_message": "Unexpected Kafka request of type SASL_AUTHENTICATE during SASL handshake."})
    try:
        answer, principal = session.step(bytes(request.auth_bytes))
    except SaslFailed as exc:
        session.failed = True
        log.info("failed authentication with %s (%s)", conn.peer, exc)
        return build(response_type(API_KEY, ctx.version), {
            **body, "error_code": ErrorCode.sasl_authentication_failed, "error_message": str(exc)})
    if principal is not None:
        session.authenticated = True
        conn.principal = principal
        log.debug("%s: authenticated as %s with %s", conn.peer, principal, session.mechanism)
        body["session_lifetime"] = session.lifetime_ms
    return build(response_type(API_KEY, ctx.version), {**body, "auth_bytes": answer})
