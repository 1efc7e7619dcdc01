"""SyncGroup (key 14), v0-v5.

The leader sends the assignment; every member waits for its share. v1: throttle_time_ms; v3:
group_instance_id; v4: flexible; v5: protocol_type/protocol_name checked and echoed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.sync_group.v5.request import SyncGroupRequest
    from kio.schema.sync_group.v5.response import SyncGroupResponse

    from logway.gateway.context import RequestContext

API_KEY = 14
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse:
    groups = ctx.broker.groups
    result = await groups.call(
        groups.coordinator.sync_group,
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
    )
    return build(response_type(API_KEY, ctx.version), {
        "throttle_time": 0, "error_code": result.error_code, "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name, "assignment": result.assignment,
    })
