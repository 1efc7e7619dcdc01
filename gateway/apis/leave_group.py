"""LeaveGroup (key 13), v0-v5.

v0-v2: one member id, one error code (Kafka's first member error); v1: throttle_time_ms; v3: a batch of
members by member id or group_instance_id (KIP-345), per-member errors; v4: flexible; v5: reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.coordinator.results import MemberIdentity
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.leave_group.v5.request import LeaveGroupRequest
    from kio.schema.leave_group.v5.response import LeaveGroupResponse

    from logway.gateway.context import RequestContext

API_KEY = 13
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    groups = ctx.broker.groups
    if ctx.version >= 3:
        members = [MemberIdentity(m.member_id, m.group_instance_id) for m in request.members]
    else:
        members = [MemberIdentity(request.member_id)]
    result = await groups.call(groups.coordinator.leave_group, group_id=request.group_id, members=members)
    if ctx.version < 3:
        return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "error_code": result.legacy_error_code})
    return build(response_type(API_KEY, ctx.version), {
        "throttle_time": 0, "error_code": result.error_code,
        "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "error_code": m.error_code}
                    for m in result.members],
    })
