"""FindCoordinator (key 10), v0-v6.

This broker coordinates every group and every transactional id. v1: key_type, throttle_time_ms,
error_message; v3: flexible; v4+: batched coordinator_keys with a result per key (KIP-699); v5/v6: no
change for us (error codes and share groups). A key type other than GROUP (0) or TRANSACTION (1) gets
INVALID_REQUEST and no node, as Kafka's KafkaApis.handleFindCoordinatorRequest answers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest
    from kio.schema.find_coordinator.v6.response import FindCoordinatorResponse

    from logway.gateway.context import RequestContext

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 6

GROUP, TRANSACTION = 0, 1
_NO_NODE = {"node_id": -1, "host": "", "port": -1, "error_code": ErrorCode.invalid_request}


async def handle(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    broker = ctx.broker
    adv = ctx.advertised
    node = {"node_id": broker.node_id, "host": adv.host or "127.0.0.1", "port": adv.port,
            "error_code": ErrorCode.none, "error_message": None}
    if ctx.version >= 1 and request.key_type not in (GROUP, TRANSACTION):
        node = {**_NO_NODE, "error_message": f"Unknown coordinator type {request.key_type}"}
    if ctx.version >= 4:
        body = {"coordinators": [{"key": key, **node} for key in request.coordinator_keys]}
    else:
        body = node
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, **body})
