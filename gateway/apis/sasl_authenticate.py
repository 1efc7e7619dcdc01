"""SaslAuthenticate (key 36), v0-v2: answered by the server layer (server/security/sasl.py, which says what each
version does); here for the broker's ApiVersions and for a SaslAuthenticate outside the SASL exchange (on a
PLAINTEXT listener, or after authentication: ILLEGAL_SASL_STATE with Kafka's KafkaApis message)."""

from __future__ import annotations

from logway.server.security.sasl import SASL_AUTHENTICATE, VERSIONS, authenticate_response

API_KEY = SASL_AUTHENTICATE
MIN_VERSION, MAX_VERSION = VERSIONS[SASL_AUTHENTICATE]


async def handle(ctx, request):
    return authenticate_response(ctx.connection, ctx.version, request)
