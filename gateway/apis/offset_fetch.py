"""OffsetFetch (key 9), v1-v9.

v2: top-level error_code, and null topics fetch every committed partition of the group; v3:
throttle_time_ms; v5: committed_leader_epoch; v6: flexible; v7: require_stable (a partition with a transactional commit
awaiting its marker answers UNSTABLE_OFFSET_COMMIT, KIP-447); v8: many groups per request (KIP-709); v9: member id/epoch (KIP-848: a consumer group member must send
its current epoch, else STALE_MEMBER_EPOCH / UNKNOWN_MEMBER_ID for the group; unused by classic groups). A partition with nothing committed gets offset -1 and empty metadata.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.offset_fetch.v9.request import OffsetFetchRequest
    from kio.schema.offset_fetch.v9.response import OffsetFetchResponse

    from logway.gateway.context import RequestContext

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


async def _fetch(ctx: RequestContext, group_id: str, topics, require_stable: bool = False,
                 member: tuple[str | None, int] = (None, -1)) -> tuple[list[dict], int]:
    """One group's committed offsets as (topics, error code); the ACL checks (GROUP DESCRIBE, TOPIC DESCRIBE)
    are the shared ones dispatch applies (server/security/request_acls.py)."""
    groups = ctx.broker.groups
    partitions = None if topics is None else [(t.name, int(i)) for t in topics for i in t.partition_indexes]
    result = await groups.call(groups.coordinator.offset_fetch, group_id=group_id, partitions=partitions,
                               require_stable=require_stable, member_id=member[0], member_epoch=member[1])
    return _topics(result), result.error_code


async def handle(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    if ctx.version >= 8:
        out = []
        for g in request.groups:
            member = (getattr(g, "member_id", None), getattr(g, "member_epoch", -1))
            topics, error = await _fetch(ctx, g.group_id, g.topics, request.require_stable, member)
            out.append({"group_id": g.group_id, "topics": topics, "error_code": error})
        return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "groups": out})
    topics, error = await _fetch(ctx, request.group_id, request.topics, getattr(request, "require_stable", False))
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "topics": topics, "error_code": error})
