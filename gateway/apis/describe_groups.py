"""DescribeGroups (key 15), v0-v6.

v1: throttle_time_ms; v3: include_authorized_operations (the group operations
the principal may do, as Kafka's AuthHelper.authorizedOperations); v4:
group_instance_id per member; v5: flexible; v6: error_message, and a group that does not exist (or is not a
classic group: a KIP-848 consumer group is described by ConsumerGroupDescribe) gets GROUP_ID_NOT_FOUND instead
of an error-free "Dead" (KIP-1043). Member metadata and assignment are filled only for Stable groups, as Kafka
does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.coordinator.partitioning import kafka_describe_order
from logway.server.security.authorizer import ResourceType
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
    from kio.schema.describe_groups.v5.response import DescribeGroupsResponse

    from logway.gateway.context import RequestContext

API_KEY = 15
MIN_VERSION = 0
MAX_VERSION = 6

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


async def handle(ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    groups = ctx.broker.groups
    include_operations = ctx.version >= 3 and request.include_authorized_operations
    # Kafka's answer order (by coordinator partition), not the request's: coordinator.partitioning.
    ids = kafka_describe_order(list(request.groups), groups.coordinator.partition_for, lambda g: g is None)
    result = await groups.call(groups.coordinator.describe_groups, group_ids=ids, not_found_error=ctx.version >= 6)
    return build(response_type(API_KEY, ctx.version), {
        "throttle_time": 0,
        "groups": [{
            "error_code": g.error_code, "error_message": _message(g), "group_id": g.group_id, "group_state": g.state,
            "protocol_type": g.protocol_type, "protocol_data": g.protocol,
            "authorized_operations": ctx.authorized_operations(ResourceType.GROUP, g.group_id)
            if include_operations and g.error_code == ErrorCode.none else AUTHORIZED_OPERATIONS_OMITTED,
            "members": [{
                "member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                "client_host": m.client_host, "member_metadata": m.metadata, "member_assignment": m.assignment,
            } for m in g.members],
        } for g in result.groups],
    })


def _message(group) -> str | None:
    """v6's error message for a group that is not there (Kafka's GroupIdNotFoundException texts)."""
    if group.error_code != ErrorCode.group_id_not_found:
        return None
    return f"Group {group.group_id} not found."
