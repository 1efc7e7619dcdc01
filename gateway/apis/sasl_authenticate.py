"""SaslAuthenticate (key 36), v0-v2: answered by the server layer (server/security/sasl.py, which says what each
version does); here for the broker's ApiVersions and for a SaslAuthenticate outside the SASL exchange (on a
PLAINTEXT listener, or after authentication: ILLEGAL_SASL_STATE with Kafka's KafkaApis message)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.server.security.sasl import SASL_AUTHENTICATE, VERSIONS, authenticate_response

if TYPE_CHECKING:
    from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
    from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse

    from logway.gateway.context import RequestContext

API_KEY = SASL_AUTHENTICATE
MIN_VERSION, MAX_VERSION = VERSIONS[SASL_AUTHENTICATE]


async def handle(ctx: RequestContext, request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    return authenticate_response(ctx.connection, ctx.version, request)
