"""AlterShareGroupOffsets (key 91), v0: set share partitions' start offsets (``kafka-share-groups
--reset-offsets``); the group must have no members (NON_EMPTY_GROUP); an unknown group id becomes an empty
share group, as in Kafka. Each partition starts over: what was in flight is forgotten. An unknown topic or
partition gets UNKNOWN_TOPIC_OR_PARTITION (unknown topics first, as Kafka's response builder orders them). ACL
checks (GROUP READ, TOPIC READ): server/security/share_group_acls.py, applied by dispatch.
"""

from __future__ import annotations

import time

from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

API_KEY = 91
MIN_VERSION = 0
MAX_VERSION = 0

_UNKNOWN = "This server does not host this topic-partition."


async def handle(ctx, request):
    broker = ctx.broker
    error = broker.groups.coordinator.share_group_alterable(request.group_id, create_at_ms=int(time.time() * 1000))
    if error is not None:
        return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "error_code": error,
                                                           "error_message": None, "responses": []})
    resets, responses = [], []
    for t in request.topics:
        topic = broker.logs.topics.get(t.topic_name)
        parts = []
        for p in t.partitions:
            if topic is None or not 0 <= p.partition_index < len(topic.partitions):
                parts.append({"partition_index": p.partition_index, "error_code": ErrorCode.unknown_topic_or_partition,
                              "error_message": _UNKNOWN})
            else:
                resets.append(((request.group_id, topic.topic_id, p.partition_index), p.start_offset))
                parts.append({"partition_index": p.partition_index, "error_code": ErrorCode.none})
        entry = {"topic_name": t.topic_name, "topic_id": topic.topic_id if topic else None, "partitions": parts}
        # Kafka's response builder: the topics KafkaApis refuses (unknown ones) ahead of the coordinator's.
        responses.insert(sum(1 for r in responses if r["topic_id"] is None), entry) if topic is None \
            else responses.append(entry)
    results = await broker.shares.reset(resets)
    for topic in responses:
        for part in topic["partitions"]:
            key = next((k for k in results if k[0] == request.group_id and k[2] == part["partition_index"]
                        and k[1] == topic["topic_id"]), None)
            if key is not None and results[key] != ErrorCode.none:
                part["error_code"] = results[key]
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "error_code": ErrorCode.none,
                                                       "responses": responses})
