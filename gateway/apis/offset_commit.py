"""OffsetCommit (key 8), v2-v9.

v2-v4: retention_time_ms (-1: the broker's offsets.retention.minutes); v3: throttle_time_ms; v5: no
retention time; v6: committed_leader_epoch; v7: group_instance_id; v8: flexible; v9: the generation field
is "generation id or member epoch" (KIP-848: a consumer group member commits with its member epoch, and must
use v9+; an unknown group with a generation gets GROUP_ID_NOT_FOUND instead of ILLEGAL_GENERATION). A commit with generation
-1 and no member id from a consumer without a group membership (assign() users) is accepted for a group
without members. Unknown topics or partitions get UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers them.
The answer goes out after the commit is appended to __consumer_offsets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.coordinator.results import CommitOffset
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.offset_commit.v9.request import OffsetCommitRequest
    from kio.schema.offset_commit.v9.response import OffsetCommitResponse

    from logway.gateway.context import RequestContext

API_KEY = 8
MIN_VERSION = 2
MAX_VERSION = 9


def offsets_to_commit(broker, topics) -> tuple[list[CommitOffset], dict[tuple[str, int], ErrorCode]]:
    """The offsets of an OffsetCommit or TxnOffsetCommit request's partitions, and UNKNOWN_TOPIC_OR_PARTITION
    for each partition the broker does not have (as Kafka answers them)."""
    errors: dict[tuple[str, int], ErrorCode] = {}
    offsets = []
    for topic in topics:
        info = broker.logs.topics.get(topic.name)
        for p in topic.partitions:
            if info is None or not 0 <= p.partition_index < len(info.partitions):
                errors[(topic.name, p.partition_index)] = ErrorCode.unknown_topic_or_partition
                continue
            offsets.append(CommitOffset(
                topic.name, p.partition_index, p.committed_offset,
                getattr(p, "committed_leader_epoch", -1), p.committed_metadata,
            ))
    return offsets, errors


async def handle(ctx: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
    broker = ctx.broker
    groups = broker.groups
    offsets, errors = offsets_to_commit(broker, request.topics)
    if offsets:
        retention = getattr(request, "retention_time", None)
        result = await groups.call(
            groups.coordinator.offset_commit,
            group_id=request.group_id,
            generation_id=request.generation_id_or_member_epoch,
            member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
            offsets=offsets,
            retention_time_ms=int(retention.total_seconds() * 1000) if retention is not None else -1,
            api_version=ctx.version,
        )
        errors.update(result.partitions)
    topics = [{"name": t.name, "partitions": [
        {"partition_index": p.partition_index, "error_code": errors[(t.name, p.partition_index)]}
        for p in t.partitions]} for t in request.topics]
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "topics": topics})
