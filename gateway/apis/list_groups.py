"""ListGroups (key 16), v0-v5. v1: throttle_time_ms; v3: flexible; v4: states_filter (KIP-518); v5:
types_filter and group_type (KIP-848: "classic" or "consumer")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.list_groups.v5.request import ListGroupsRequest
    from kio.schema.list_groups.v5.response import ListGroupsResponse

    from logway.gateway.context import RequestContext

API_KEY = 16
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    groups = ctx.broker.groups
    result = await groups.call(
        groups.coordinator.list_groups,
        states_filter=tuple(getattr(request, "states_filter", ())),
        types_filter=tuple(getattr(request, "types_filter", ())),
    )
    return build(response_type(API_KEY, ctx.version), {
        "throttle_time": 0, "error_code": result.error_code,
        "groups": [{"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.state,
                    "group_type": g.group_type} for g in result.groups],
    })
