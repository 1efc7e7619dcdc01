"""DeleteTopics (key 20), v1-v6.

v4: flexible; v5: error_message; v6: topics by name or by id (unknown ids get UNKNOWN_TOPIC_ID).
delete.topic.enable=false gets TOPIC_DELETION_DISABLED; internal topics (__consumer_offsets) get
INVALID_TOPIC_EXCEPTION, as Kafka answers both. A deleted topic's partitions count against a
controller_mutation_rate quota (KIP-599; v5+: THROTTLING_QUOTA_EXCEEDED once spent).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from logway.gateway.apis.metadata import INTERNAL_TOPICS
from logway.gateway.throttling import take_mutations
from logway.wire.errors import ErrorCode, KafkaError
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.delete_topics.v6.request import DeleteTopicsRequest
    from kio.schema.delete_topics.v6.response import DeleteTopicsResponse

    from logway.gateway.context import RequestContext

API_KEY = 20
MIN_VERSION = 1
MAX_VERSION = 6
STRICT_QUOTA_FROM = 5  # KIP-599: a controller_mutation_rate quota refuses topics from v5, throttles before


def _delete(ctx: RequestContext, name: str) -> None:
    broker = ctx.broker
    if not broker.config.delete_topic_enable:
        raise KafkaError("Topic deletion is disabled.", ErrorCode.topic_deletion_disabled)
    if name in INTERNAL_TOPICS:
        raise KafkaError(f"Topic {name} is an internal topic and cannot be deleted", ErrorCode.invalid_topic_exception)
    if name not in broker.logs.topics:
        raise KafkaError("This server does not host this topic-partition.", ErrorCode.unknown_topic_or_partition)
    take_mutations(ctx, len(broker.logs.topics[name].partitions), STRICT_QUOTA_FROM)
    broker.logs.delete_topic(name)


async def handle(ctx: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    broker = ctx.broker
    results = []
    if ctx.version >= 6:
        by_id = {t.topic_id: t.name for t in broker.logs.topics.values()}
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        by_id = {}
        wanted = [(name, None) for name in request.topic_names]
    for name, topic_id in wanted:
        result = {"name": name, "topic_id": topic_id, "error_code": ErrorCode.none, "error_message": None}
        try:
            if name is None:
                name = by_id.get(topic_id)
                if name is None:
                    raise KafkaError("This server does not host this topic ID.", ErrorCode.unknown_topic_id)
                result["name"] = name
            if topic_id is None and name in broker.logs.topics:
                result["topic_id"] = broker.logs.topics[name].topic_id
            _delete(ctx, name)
        except KafkaError as exc:
            result.update(error_code=exc.error_code, error_message=str(exc))
        results.append(result)
    if any(r["error_code"] == ErrorCode.none for r in results):
        # The partition directories' renames survive a power loss before the answer, as Kafka's deletion
        # (a record of its metadata log) does: off the event loop.
        await trio.to_thread.run_sync(broker.logs.sync_log_dirs)
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "responses": results})
