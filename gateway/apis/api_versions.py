"""ApiVersions (key 18), v0-v4.

v0: error_code, api_keys. v1: throttle_time_ms. v3: flexible; the request carries client_software_name
and _version (KIP-511), validated as Kafka does (INVALID_REQUEST if they do not match
[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?); supported/finalized features are tagged fields left at their
defaults (so omitted: older librdkafka builds cannot parse them). v4: same as v3 (KIP-896 only changes
what an unsupported request gets). The response header is always v0 (handled in wire.protocol).
A request with a version beyond ours gets a v0 response with UNSUPPORTED_VERSION and our ranges.
"""

from __future__ import annotations

import re
import struct
from functools import cache
from typing import TYPE_CHECKING

from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, encode_body, encode_response, response_header_bytes, response_type

if TYPE_CHECKING:
    from kio.schema.api_versions.v4.request import ApiVersionsRequest

    from logway.gateway.context import RequestContext

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4

_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def _api_keys() -> list[dict]:
    from logway.gateway.apis.registry import supported_versions  # (the registry imports this module)

    return [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in supported_versions()]


def unsupported_version_response(correlation_id: int) -> bytes:
    body = build(response_type(API_KEY, 0), {"error_code": ErrorCode.unsupported_version, "api_keys": _api_keys()})
    return encode_response(API_KEY, 0, correlation_id, body)


async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> list[bytes]:
    error = ErrorCode.none
    if ctx.version >= 3:
        name, version = request.client_software_name, request.client_software_version
        if _SOFTWARE.fullmatch(name or "") and _SOFTWARE.fullmatch(version or ""):
            ctx.connection.client_software = (name, version)
        else:
            error = ErrorCode.invalid_request
    payload = response_header_bytes(API_KEY, ctx.version, ctx.header.correlation_id) + _body(ctx.version, error)
    return [struct.pack(">i", len(payload)) + payload]


@cache
def _body(version: int, error: int) -> bytes:
    """The encoded response body, the same for every request of a version (the APIs served are fixed): built
    once, as every new client connection asks first."""
    return encode_body(build(response_type(API_KEY, version), {"error_code": error, "api_keys": _api_keys(),
                                                                "throttle_time": 0}))
