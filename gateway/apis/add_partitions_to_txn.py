"""AddPartitionsToTxn (key 24), v0-v3.

A transactional producer names the partitions it is about to write in its transaction. v1: no change; v2:
PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH); v3: flexible. v4+ (the batched, broker-to-broker
form of KIP-890) is not advertised. As KafkaApis.handleAddPartitionsToTransactionRequest: unknown partitions
fail the request per partition (UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED); otherwise one
error for all partitions from the coordinator. The ACL checks (TRANSACTIONAL_ID WRITE, TOPIC WRITE) are
request_acls' and come first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.gateway.broker import now_ms
from logway.gateway.transactions import fenced_for_version
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest
    from kio.schema.add_partitions_to_txn.v3.response import AddPartitionsToTxnResponse

    from logway.gateway.context import RequestContext

API_KEY = 24
MIN_VERSION = 0
MAX_VERSION = 3


def _partition_errors(ctx: RequestContext, topics) -> dict[tuple[str, int], int]:
    """Per-partition errors found before asking the coordinator: unknown partitions."""
    errors = {}
    for topic in topics:
        info = ctx.broker.logs.topics.get(topic.name)
        for p in topic.partitions:
            if info is None or not 0 <= p < len(info.partitions):
                errors[(topic.name, p)] = ErrorCode.unknown_topic_or_partition
    return errors


async def handle(ctx: RequestContext, request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    tid = request.v3_and_below_transactional_id
    topics = request.v3_and_below_topics
    wanted = [(t.name, p) for t in topics for p in t.partitions]
    errors = _partition_errors(ctx, topics)
    if errors:
        errors = {tp: errors.get(tp, ErrorCode.operation_not_attempted) for tp in wanted}
    else:
        service = ctx.broker.transactions
        error = service.coordinator.add_partitions(
            tid, request.v3_and_below_producer_id, request.v3_and_below_producer_epoch, wanted, now_ms())
        await service.flush_pending()
        errors = dict.fromkeys(wanted, fenced_for_version(error, ctx.version, 2))
    results = [{"name": t.name, "results_by_partition": [
        {"partition_index": p, "partition_error_code": errors[(t.name, p)]} for p in t.partitions]} for t in topics]
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "results_by_topic_v3_and_below": results})
