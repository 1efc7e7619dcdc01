"""SaslHandshake (key 17), v0-v1.

v0: after the handshake the client sends bare SASL tokens as size-prefixed frames, answered the same way
(gateway/security/sasl.py); v1: the tokens go in SaslAuthenticate requests (KIP-152).
Response: error_code, mechanisms (the listener's sasl.enabled.mechanisms). An unknown mechanism gets
UNSUPPORTED_SASL_MECHANISM and the connection is closed, as Kafka does; a handshake on a non-SASL listener
or a second one gets ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

API_KEY = 17
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx, request):
    session = ctx.connection.sasl
    body = response_type(API_KEY, ctx.version)
    if session is None or session.mechanism is not None or session.authenticated:
        if session is not None:
            session.failed = True
        return build(body, {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": []})
    mechanisms = list(session.security.mechanisms)
    if request.mechanism not in mechanisms:
        session.failed = True
        return build(body, {"error_code": ErrorCode.unsupported_sasl_mechanism, "mechanisms": mechanisms})
    session.mechanism = request.mechanism
    session.raw = ctx.version == 0
    return build(body, {"error_code": ErrorCode.none, "mechanisms": mechanisms})
