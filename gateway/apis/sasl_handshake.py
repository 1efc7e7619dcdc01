"""SaslHandshake (key 17), v0-v1: answered by the server layer (server/security/sasl.py, which says what each
version does); here for the broker's ApiVersions and for a handshake outside the SASL exchange (on a PLAINTEXT
listener, or a second one: ILLEGAL_SASL_STATE)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.server.security.sasl import SASL_HANDSHAKE, VERSIONS, handshake_response

if TYPE_CHECKING:
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
    from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

    from logway.gateway.context import RequestContext

API_KEY = SASL_HANDSHAKE
MIN_VERSION, MAX_VERSION = VERSIONS[SASL_HANDSHAKE]


async def handle(ctx: RequestContext, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    return handshake_response(ctx.connection, ctx.version, request)
