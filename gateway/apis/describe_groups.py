"""DescribeGroups (key 15), v0-v5.

v1: throttle_time_ms; v3: include_authorized_operations (the group operations
the principal may do, as Kafka's AuthHelper.authorizedOperations); v4:
group_instance_id per member; v5: flexible. Member metadata and assignment are filled only for Stable
groups, as Kafka does.
"""

from __future__ import annotations

from logway.gateway.security.authorizer import Operation, ResourceType
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

API_KEY = 15
MIN_VERSION = 0
MAX_VERSION = 5

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


async def handle(ctx, request):
    groups = ctx.broker.groups
    # KafkaApis.handleDescribeGroupsRequest: GROUP DESCRIBE per group, else GROUP_AUTHORIZATION_FAILED.
    include_operations = ctx.version >= 3 and request.include_authorized_operations
    allowed = [g for g in request.groups if ctx.authorized(Operation.DESCRIBE, ResourceType.GROUP, g)]
    result = await groups.call(groups.coordinator.describe_groups, group_ids=allowed)
    denied = [{"error_code": ErrorCode.group_authorization_failed, "group_id": g, "group_state": "",
               "protocol_type": "", "protocol_data": "", "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
               "members": []} for g in request.groups if g not in allowed]
    return build(response_type(API_KEY, ctx.version), {
        "throttle_time": 0,
        "groups": denied + [{
            "error_code": g.error_code, "group_id": g.group_id, "group_state": g.state,
            "protocol_type": g.protocol_type, "protocol_data": g.protocol,
            "authorized_operations": ctx.authorized_operations(ResourceType.GROUP, g.group_id)
            if include_operations and g.error_code == ErrorCode.none else AUTHORIZED_OPERATIONS_OMITTED,
            "members": [{
                "member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                "client_host": m.client_host, "member_metadata": m.metadata, "member_assignment": m.assignment,
            } for m in g.members],
        } for g in result.groups],
    })
