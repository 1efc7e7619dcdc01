"""OffsetDelete (key 47), v0 (KIP-496).

Deletes committed offsets of a group; refused per partition with GROUP_SUBSCRIBED_TO_TOPIC while a
member of the group subscribes to the topic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.offset_delete.v0.request import OffsetDeleteRequest
    from kio.schema.offset_delete.v0.response import OffsetDeleteResponse

    from logway.gateway.context import RequestContext

API_KEY = 47
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    groups = ctx.broker.groups
    partitions = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    result = await groups.call(groups.coordinator.offset_delete, group_id=request.group_id, partitions=partitions)
    errors = result.partitions
    topics = [{"name": t.name, "partitions": [
        {"partition_index": p.partition_index, "error_code": errors.get((t.name, p.partition_index), 0)}
        for p in t.partitions]} for t in request.topics]
    return build(response_type(API_KEY, ctx.version), {
        "error_code": result.error_code, "throttle_time": 0, "topics": topics if result.error_code == 0 else []})
