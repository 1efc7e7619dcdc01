"""ShareGroupHeartbeat (key 76), v1: KIP-932 share group membership (v0 was Kafka 4.0's early access, removed).

A share consumer joins (epoch 0) with the topics it subscribes to, heartbeats with its epoch and leaves (-1);
the answer carries its epoch and, when it changed, its assignment (topic ids and partitions; a partition may be
assigned to several members, who share its records). The ACL check (GROUP READ) is the shared one dispatch
applies (server/security/request_acls.py).
"""

from __future__ import annotations

from logway.coordinator.consumer_results import ConsumerHeartbeatRequest
from logway.gateway.apis.consumer_group_heartbeat import heartbeat_answer

API_KEY = 76
MIN_VERSION = 1
MAX_VERSION = 1


async def handle(ctx, request):
    groups = ctx.broker.groups
    names = request.subscribed_topic_names
    result = await groups.call(groups.coordinator.share_group_heartbeat, request=ConsumerHeartbeatRequest(
        group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
        rack_id=request.rack_id, subscribed_topic_names=None if names is None else tuple(names),
        client_id=ctx.header.client_id or "", client_host="/" + ctx.connection.peer.rsplit(":", 1)[0],
        api_version=ctx.version))
    return heartbeat_answer(API_KEY, ctx.version, result)
