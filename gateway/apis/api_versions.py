"""ApiVersions (key 18), v0-v4.

v0: error_code, api_keys. v1: throttle_time_ms. v3: flexible; the request carries client_software_name
and _version (KIP-511), validated as Kafka does (INVALID_REQUEST if they do not match
[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?); the supported and finalized features (tagged fields): the ones
Logway implements, group.version 1 (KIP-848), share.version 1 (KIP-932) and transaction.version (the
``transaction.version`` setting, 2 by default: KIP-890 part 2), as Kafka 4.3 names them. v4: same as v3
(KIP-896 only changes what an unsupported request gets). The response header is always v0 (handled in wire.protocol).
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

FINALIZED_FEATURES_EPOCH = 1  # Kafka's is the metadata log offset of the last feature change; ours never change
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
    level = int(ctx.broker.config.properties.get("transaction.version", "2"))
    payload = response_header_bytes(API_KEY, ctx.version, ctx.header.correlation_id) + _body(ctx.version, error, level)
    return [struct.pack(">i", len(payload)) + payload]


@cache
def _body(version: int, error: int, transaction_version: int = 2) -> bytes:
    """The encoded response body, the same for every request of a version (the APIs served are fixed): built
    once, as every new client connection asks first."""
    features = {}
    if version >= 3:
        levels = {"group.version": 1, "share.version": 1, "transaction.version": transaction_version}
        # v3: no supported feature whose min_version is 0, as Kafka 4 answers (clients before 3.9 cannot read one).
        features = {
            "supported_features": [] if version < 4 else [
                {"name": "group.version", "min_version": 0, "max_version": 1},
                {"name": "share.version", "min_version": 0, "max_version": 1},
                {"name": "transaction.version", "min_version": 0, "max_version": 2}],
            "finalized_features_epoch": FINALIZED_FEATURES_EPOCH,
            "finalized_features": [{"name": name, "max_version_level": level, "min_version_level": level}
                                   for name, level in levels.items() if level > 0]}
    return encode_body(build(response_type(API_KEY, version), {"error_code": error, "api_keys": _api_keys(),
                                                                "throttle_time": 0, **features}))
