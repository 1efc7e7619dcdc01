"""DescribeProducers (key 61), v0.

The active (idempotent or transactional) producers of partitions, from each log's producer state
(kafka-transactions.sh describe-producers): id, epoch, last sequence, last timestamp, and the first offset
of the producer's open transaction (-1 if none). coordinator_epoch is -1 (one broker, no coordinator
epochs). As KafkaApis.handleDescribeProducersRequest: TOPIC READ per topic (else TOPIC_AUTHORIZATION_FAILED),
UNKNOWN_TOPIC_OR_PARTITION for a partition this broker does not have.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.storage.errors import UnknownTopicOrPartition
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.describe_producers.v0.request import DescribeProducersRequest
    from kio.schema.describe_producers.v0.response import DescribeProducersResponse

    from logway.gateway.context import RequestContext

API_KEY = 61
MIN_VERSION = 0
MAX_VERSION = 0


def _partition(ctx: RequestContext, topic: str, index: int) -> dict:
    out = {"partition_index": index, "error_code": ErrorCode.none, "error_message": None, "active_producers": []}
    try:
        plog = ctx.broker.partition(topic, index)
    except UnknownTopicOrPartition as exc:
        return {**out, "error_code": exc.error_code, "error_message": str(exc)}
    out["active_producers"] = [
        {"producer_id": e.producer_id, "producer_epoch": e.epoch, "last_sequence": e.last_seq,
         "last_timestamp": e.last_timestamp, "coordinator_epoch": -1, "current_txn_start_offset": e.current_txn_first_offset}
        for e in plog.active_producers()
    ]
    return out


async def handle(ctx: RequestContext, request: DescribeProducersRequest) -> DescribeProducersResponse:
    topics = [{"name": t.name, "partitions": [_partition(ctx, t.name, p) for p in t.partition_indexes]}
              for t in request.topics]
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "topics": topics})
