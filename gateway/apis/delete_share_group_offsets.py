"""DeleteShareGroupOffsets (key 92), v0: forget the share state of whole topics for a group (``kafka-share-groups
--delete-offsets``); the group must exist (GROUP_ID_NOT_FOUND) and have no members (NON_EMPTY_GROUP). An unknown topic gets
UNKNOWN_TOPIC_OR_PARTITION. The ACL checks (GROUP DELETE, TOPIC READ) are the shared ones dispatch applies.
"""

from __future__ import annotations

from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

API_KEY = 92
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx, request):
    broker = ctx.broker
    error = broker.groups.coordinator.share_group_alterable(request.group_id)
    if error is not None:
        return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "error_code": error,
                                                           "error_message": None, "responses": []})
    keys, responses = [], []
    for t in request.topics:
        topic = broker.logs.topics.get(t.topic_name)
        if topic is None:
            responses.append({"topic_name": t.topic_name, "topic_id": None,
                              "error_code": ErrorCode.unknown_topic_or_partition,
                              "error_message": "This server does not host this topic-partition."})
            continue
        keys += [k for k in broker.shares.store.keys_of(request.group_id) if k[1] == topic.topic_id]
        responses.append({"topic_name": t.topic_name, "topic_id": topic.topic_id, "error_code": ErrorCode.none})
    error = await broker.shares.delete(keys)
    if error != ErrorCode.none:
        for r in responses:
            if r["error_code"] == ErrorCode.none:
                r["error_code"] = error
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "error_code": ErrorCode.none,
                                                       "responses": responses})
