"""JoinGroup (key 11), v0-v9.

v1: rebalance_timeout_ms (v0 uses the session timeout for both, as Kafka does); v2: throttle_time_ms;
v4: MEMBER_ID_REQUIRED for an unknown member's first join (KIP-394); v5: group_instance_id (KIP-345);
v6: flexible; v7: protocol_type/protocol_name in the response; v8: reason; v9: skip_assignment.
The answer waits until the rebalance completes (GroupService.call).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.coordinator.results import JoinGroupRequest
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.join_group.v9.request import JoinGroupRequest
    from kio.schema.join_group.v9.response import JoinGroupResponse

    from logway.gateway.context import RequestContext

API_KEY = 11
MIN_VERSION = 0
MAX_VERSION = 9


async def handle(ctx: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse:
    groups = ctx.broker.groups
    session_timeout = int(request.session_timeout.total_seconds() * 1000)
    rebalance = getattr(request, "rebalance_timeout", None)
    result = await groups.call(groups.coordinator.join_group, request=JoinGroupRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=request.protocol_type,
        protocols=[(p.name, p.metadata) for p in request.protocols],
        client_id=ctx.header.client_id or "",
        client_host="/" + ctx.connection.peer.rsplit(":", 1)[0],
        session_timeout_ms=session_timeout,
        rebalance_timeout_ms=int(rebalance.total_seconds() * 1000) if rebalance is not None else session_timeout,
        require_known_member_id=ctx.version >= 4,
        support_skip_assignment=ctx.version >= 9,
    ))
    return build(response_type(API_KEY, ctx.version), {
        "throttle_time": 0,
        "error_code": result.error_code,
        "generation_id": result.generation_id,
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name if ctx.version >= 7 else (result.protocol_name or ""),
        "leader": result.leader,
        "skip_assignment": result.skip_assignment,
        "member_id": result.member_id,
        "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata}
                    for m in result.members],
    })
