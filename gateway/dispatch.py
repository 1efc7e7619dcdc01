"""Route a request frame to its API module and encode the answer.

The modules of gateway/apis/ register themselves (gateway/apis/registry.py). A RAW module gets the undecoded
frame (the hot paths: Produce, Fetch); the others get the kio message. With an authorizer, every request
passes Kafka's per-API ACL rules first (server/security/request_acls.py, the proxy's too): the handler serves
what the principal may use and the denied entries are added to its answer; RAW handlers apply the same rules
by name. The ACL checks a request fails and the changes it makes go to the listener's audit log
(server/audit.py). A handler returns a kio response (encoded here), a list of already-framed chunks (Fetch's zero-copy
response), or None (acks=0 Produce: no response at all, as Kafka does).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from logway.gateway.apis import api_versions
from logway.gateway.apis.registry import APIS, Api
from logway.gateway.context import RequestContext
from logway.server.audit_changes import CHANGE_APIS
from logway.server.connection import Connection, RequestHandler
from logway.server.security.request_acls import NO_ACL, RULES, authorize_request
from logway.wire.fetch import Chunk
from logway.wire.protocol import (
    MalformedRequest,
    RequestHeader,
    api_name,
    body_offset,
    decode_body,
    decode_request_header,
    encode_response,
)

if TYPE_CHECKING:
    from logway.gateway.broker import Broker

log = logging.getLogger(__name__)

_UNRULED = sorted(f"gateway/apis/{api.module}.py (API key {key})" for key, api in APIS.items()
                  if key not in RULES and key not in NO_ACL)
if _UNRULED:  # fail closed: an API without an ACL rule would be served to every principal
    raise ImportError(f"no ACL rule in server/security/request_acls.py for {', '.join(_UNRULED)}")
# The APIs whose requests dispatch checks; RAW handlers check by name themselves (no second decode).
_CHECKED = frozenset(key for key, api in APIS.items() if not api.raw and key not in NO_ACL)


class BrokerHandler(RequestHandler):
    """The broker's answer to every request frame of its connections (one instance serves them all)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def __call__(self, conn: Connection) -> BrokerHandler:
        """The handler factory of the broker's listeners: this one handler for every connection."""
        return self

    async def handle(self, conn: Connection, frame: memoryview) -> list[Chunk] | None:
        return await dispatch(self.broker, conn, frame)

    @asynccontextmanager
    async def session(self, conn: Connection) -> AsyncIterator[None]:
        """A share session ends with the connection that opened it (its member's records are released)."""
        try:
            yield
        finally:
            self.broker.shares.connection_closed(conn)


async def dispatch(broker: Broker, conn: Connection, frame: memoryview | bytearray) -> list[Chunk] | None:
    """Decode the request header, check the version, run the API's handler under the ACL rules."""
    header, pos = decode_request_header(frame)
    api = APIS.get(header.api_key)
    if api is None:
        raise MalformedRequest(f"unknown or unsupported api key {header.api_key} ({api_name(header.api_key)})")
    conn.api_key, conn.api_version = header.api_key, header.api_version  # for the request metrics
    if not api.min_version <= header.api_version <= api.max_version:
        return _unsupported_version(api, header)
    if log.isEnabledFor(logging.DEBUG):
        log.debug("%s: %s v%d correlation %d from %s", conn.peer, api.module, header.api_version,
                  header.correlation_id, header.client_id)
    ctx = RequestContext(conn, broker, header, frame, body_offset(frame, header, pos))
    request: Any = None if api.raw else decode_body(header.api_key, header.api_version, bytes(frame), ctx.body_pos)
    try:
        if conn.realm.authorizer is not None and header.api_key in _CHECKED:
            return await _serve_checked(ctx, api, request)
        result = await api.handle(ctx, request)
        if result is None or isinstance(result, list):  # Fetch's chunks, acks=0 Produce's nothing
            return result
        if header.api_key in CHANGE_APIS:
            ctx.audit_changes(request, result)
        return [encode_response(header.api_key, header.api_version, header.correlation_id, result)]
    except MalformedRequest:
        raise
    except Exception as exc:  # a bug: the connection logs it with its traceback; name the request in it
        exc.add_note(f"while answering {api_name(header.api_key)} v{header.api_version} from {header.client_id}")
        raise


async def _serve_checked(ctx: RequestContext, api: Api, request: Any) -> list[Chunk] | None:
    """Kafka's ACL rules for the request: answered by them alone, or served in part and finished by them."""
    header = ctx.header
    acl = ctx.acl
    decision = authorize_request(header.api_key, header.api_version, request, acl)
    ctx.audit_denials(acl)
    if decision.request is None:
        return [encode_response(header.api_key, header.api_version, header.correlation_id, decision.response)]
    ctx.decision = decision
    result = await api.handle(ctx, decision.request)
    if result is None or isinstance(result, list):
        return result
    if header.api_key in CHANGE_APIS:  # what was served (the refused entries are denials, recorded above)
        ctx.audit_changes(decision.request, result)
    return [encode_response(header.api_key, header.api_version, header.correlation_id, decision.finish(result))]


def _unsupported_version(api: Api, header: RequestHeader) -> list[Chunk]:
    if header.api_key == api_versions.API_KEY:
        # Kafka answers an ApiVersions request it cannot parse with a v0 response carrying
        # UNSUPPORTED_VERSION and its ranges, so the client can retry with a version it shares.
        return [api_versions.unsupported_version_response(header.correlation_id)]
    raise MalformedRequest(f"{api_name(header.api_key)} v{header.api_version} is not supported "
                           f"(v{api.min_version}-v{api.max_version})")
