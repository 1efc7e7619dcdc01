"""DeleteGroups (key 42), v0-v2. v1: no change; v2: flexible.

Only empty groups can be deleted (NON_EMPTY_GROUP otherwise); their offsets go with them (tombstones).
"""

from __future__ import annotations

from logway.gateway.security.authorizer import Operation, ResourceType
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

API_KEY = 42
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx, request):
    groups = ctx.broker.groups
    # KafkaApis.handleDeleteGroupsRequest: GROUP DELETE per group, else GROUP_AUTHORIZATION_FAILED.
    allowed = [g for g in request.groups_names if ctx.authorized(Operation.DELETE, ResourceType.GROUP, g)]
    result = await groups.call(groups.coordinator.delete_groups, group_ids=allowed)
    denied = [{"group_id": g, "error_code": ErrorCode.group_authorization_failed}
              for g in request.groups_names if g not in allowed]
    return build(response_type(API_KEY, ctx.version), {
        "throttle_time": 0,
        "results": denied + [{"group_id": g, "error_code": e} for g, e in result.groups.items()],
    })
