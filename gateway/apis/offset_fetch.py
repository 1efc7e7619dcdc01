"""OffsetFetch (key 9), v1-v9.

v2: top-level error_code, and null topics fetch every committed partition of the group; v3:
throttle_time_ms; v5: committed_leader_epoch; v6: flexible; v7: require_stable (no transactions here, so
nothing is ever unstable); v8: many groups per request (KIP-709); v9: member id/epoch (KIP-848, unused by
classic groups). A partition with nothing committed gets offset -1 and empty metadata.
"""

from __future__ import annotations

from logway.wire.protocol import build, response_type

API_KEY = 9
MIN_VERSION = 1
MAX_VERSION = 9


def _topics(result) -> list[dict]:
    by_topic: dict[str, list[dict]] = {}
    for p in result.partitions:
        by_topic.setdefault(p.topic, []).append({
            "partition_index": p.partition, "committed_offset": p.offset,
            "committed_leader_epoch": p.leader_epoch, "metadata": p.metadata, "error_code": p.error_code,
        })
    return [{"name": name, "partitions": parts} for name, parts in by_topic.items()]


async def _fetch(groups, group_id: str, topics) -> object:
    partitions = None if topics is None else [(t.name, int(i)) for t in topics for i in t.partition_indexes]
    return await groups.call(groups.coordinator.offset_fetch, group_id=group_id, partitions=partitions)


async def handle(ctx, request):
    groups = ctx.broker.groups
    if ctx.version >= 8:
        out = []
        for g in request.groups:
            result = await _fetch(groups, g.group_id, g.topics)
            out.append({"group_id": g.group_id, "topics": _topics(result), "error_code": result.error_code})
        return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "groups": out})
    result = await _fetch(groups, request.group_id, request.topics)
    return build(response_type(API_KEY, ctx.version), {
        "throttle_time": 0, "topics": _topics(result), "error_code": result.error_code})
