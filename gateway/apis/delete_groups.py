"""DeleteGroups (key 42), v0-v2. v1: no change; v2: flexible.

Only empty groups can be deleted (NON_EMPTY_GROUP otherwise); their offsets go with them (tombstones).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
    from kio.schema.delete_groups.v2.response import DeleteGroupsResponse

    from logway.gateway.context import RequestContext

API_KEY = 42
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    groups = ctx.broker.groups
    result = await groups.call(groups.coordinator.delete_groups, group_ids=list(request.groups_names))
    return build(response_type(API_KEY, ctx.version), {
        "throttle_time": 0, "results": [{"group_id": g, "error_code": e} for g, e in result.groups.items()],
    })
