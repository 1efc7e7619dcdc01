"""DescribeTransactions (key 65), v0.

The coordinator's view of each transactional id (kafka-transactions.sh describe): state name as Kafka spells
it, timeout, start time (-1 when no transaction is open), producer id and epoch, and the partitions of the
open transaction. As KafkaApis/TransactionCoordinator: TRANSACTIONAL_ID DESCRIBE per id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED), COORDINATOR_LOAD_IN_PROGRESS while its partition loads,
TRANSACTIONAL_ID_NOT_FOUND for an unknown id; topics the principal may not DESCRIBE are left out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
    from kio.schema.describe_transactions.v0.response import DescribeTransactionsResponse

    from logway.gateway.context import RequestContext

API_KEY = 65
MIN_VERSION = 0
MAX_VERSION = 0

_EMPTY = {"transaction_state": "", "transaction_timeout": 0, "transaction_start_time": -1, "producer_id": -1,
          "producer_epoch": -1, "topics": []}


def _describe(ctx: RequestContext, tid: str) -> dict:
    coordinator = ctx.broker.transactions.coordinator
    if coordinator.partition_for(tid) in coordinator.loading:
        return {"transactional_id": tid, "error_code": ErrorCode.coordinator_load_in_progress, **_EMPTY}
    meta = coordinator.transaction(tid)
    if meta is None:
        return {"transactional_id": tid, "error_code": ErrorCode.transactional_id_not_found, **_EMPTY}
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(meta.partitions):
        by_topic.setdefault(topic, []).append(partition)
    return {
        "transactional_id": tid, "error_code": ErrorCode.none, "transaction_state": meta.state.kafka_name,
        "transaction_timeout": meta.timeout_ms, "transaction_start_time": meta.start_ms,
        "producer_id": meta.producer_id, "producer_epoch": meta.producer_epoch,
        "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
    }


async def handle(ctx: RequestContext, request: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    states = [_describe(ctx, tid) for tid in request.transactional_ids]
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "transaction_states": states})
