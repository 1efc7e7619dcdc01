"""Heartbeat (key 12), v0-v4. v1: throttle_time_ms; v3: group_instance_id; v4: flexible.

REBALANCE_IN_PROGRESS tells the member to rejoin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.heartbeat.v4.request import HeartbeatRequest
    from kio.schema.heartbeat.v4.response import HeartbeatResponse

    from logway.gateway.context import RequestContext

API_KEY = 12
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    groups = ctx.broker.groups
    result = await groups.call(
        groups.coordinator.heartbeat,
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        generation_id=request.generation_id,
    )
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "error_code": result.error_code})
