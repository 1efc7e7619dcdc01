"""DeleteRecords (key 21), v0-v2 (Kafka 4 serves the same). v1: no change; v2: flexible.

Moves each partition's log start offset up to the requested offset (-1: the high watermark) and drops the
whole segments below it; answers the new low watermark. Fetch below it then gets OFFSET_OUT_OF_RANGE and
ListOffsets earliest returns it; it survives a restart through the log-start-offset checkpoint. Errors per
partition as Kafka's ReplicaManager: TOPIC_AUTHORIZATION_FAILED without DELETE on the topic,
UNKNOWN_TOPIC_OR_PARTITION, OFFSET_OUT_OF_RANGE for an offset above the high watermark or below -1,
INVALID_TOPIC_EXCEPTION for an internal topic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.gateway.apis.metadata import INTERNAL_TOPICS
from logway.storage.errors import OffsetOutOfRange
from logway.wire.errors import ErrorCode, KafkaError
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.delete_records.v2.request import DeleteRecordsRequest
    from kio.schema.delete_records.v2.response import DeleteRecordsResponse

    from logway.gateway.context import RequestContext

API_KEY = 21
MIN_VERSION = 0
MAX_VERSION = 2

HIGH_WATERMARK = -1  # DeleteRecordsRequest.HIGH_WATERMARK


def _delete(broker, topic: str, partition: int, offset: int) -> int:
    if topic in INTERNAL_TOPICS:
        raise KafkaError(f"Cannot delete records of internal topic {topic}", ErrorCode.invalid_topic_exception)
    plog = broker.logs.get_partition(topic, partition)
    if offset == HIGH_WATERMARK:
        offset = plog.high_watermark
    elif offset < 0:
        raise OffsetOutOfRange(f"The offset {offset} for partition {topic}-{partition} is not valid")
    return plog.delete_records_before(offset)


async def handle(ctx: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    broker = ctx.broker
    topics = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            result = {"partition_index": p.partition_index, "low_watermark": -1, "error_code": ErrorCode.none}
            try:
                result["low_watermark"] = _delete(broker, t.name, p.partition_index, p.offset)
            except KafkaError as exc:
                result["error_code"] = exc.error_code
            partitions.append(result)
        topics.append({"name": t.name, "partitions": partitions})
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "topics": topics})
