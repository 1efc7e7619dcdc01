"""SaslHandshake (key 17), v0-v1: answered by the server layer (server/security/sasl.py, which says what each
version does); here for the broker's ApiVersions and for a handshake outside the SASL exchange (on a PLAINTEXT
listener, or a second one: ILLEGAL_SASL_STATE)."""

from __future__ import annotations

from logway.server.security.sasl import SASL_HANDSHAKE, VERSIONS, handshake_response

API_KEY = SASL_HANDSHAKE
MIN_VERSION, MAX_VERSION = VERSIONS[SASL_HANDSHAKE]


async def handle(ctx, request):
    return handshake_response(ctx.connection, ctx.version, request)
