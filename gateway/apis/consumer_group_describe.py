"""ConsumerGroupDescribe (key 69), v0-v1: KIP-848 consumer groups, their epochs, assignor and members.

Each member with what it owns (partitions still being revoked included) and its target, topics by id and
name. A group that is not a consumer group (or does not exist) gets GROUP_ID_NOT_FOUND. v1: no change to the
answer (a member's member_type and the group's TOPIC_AUTHORIZATION_FAILED when the principal may not describe
a topic of it, KIP-1043). include_authorized_operations: the group operations the principal may do. The ACL
check (GROUP DESCRIBE) is the shared one dispatch applies.
"""

from __future__ import annotations

from logway.coordinator.partitioning import kafka_describe_order
from logway.server.security.authorizer import ResourceType
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

API_KEY = 69
MIN_VERSION = 0
MAX_VERSION = 1

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def _assignment(named) -> dict:
    return {"topic_partitions": [{"topic_id": tid, "topic_name": name, "partitions": list(parts)}
                                 for tid, name, parts in named]}


def _member(m) -> dict:
    return {
        "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id, "member_epoch": m.member_epoch,
        "client_id": m.client_id, "client_host": m.client_host, "subscribed_topic_names": list(m.subscribed_topic_names),
        "subscribed_topic_regex": m.subscribed_topic_regex, "assignment": _assignment(m.assignment),
        "target_assignment": _assignment(m.target_assignment), "member_type": m.member_type,
    }


async def handle(ctx, request):
    groups = ctx.broker.groups
    # Kafka's answer order (by coordinator partition), not the request's: coordinator.partitioning.
    ids = kafka_describe_order(list(request.group_ids), groups.coordinator.partition_for, lambda g: not g)
    described = await groups.call(groups.coordinator.consumer_group_describe, group_ids=ids)
    out = []
    for g in described:
        ops = AUTHORIZED_OPERATIONS_OMITTED
        if request.include_authorized_operations and g.error_code == ErrorCode.none:
            ops = ctx.authorized_operations(ResourceType.GROUP, g.group_id)
        out.append({
            "error_code": g.error_code, "error_message": g.error_message, "group_id": g.group_id,
            "group_state": g.group_state, "group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch,
            "assignor_name": g.assignor_name, "members": [_member(m) for m in g.members],
            "authorized_operations": ops,
        })
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "groups": out})
