"""AddPartitionsToTxn (key 24), v0-v3.

A transactional producer names the partitions it is about to write in its transaction. v1: no change; v2:
PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH); v3: flexible. v4+ (the batched, broker-to-broker
form of KIP-890) is not advertised. As KafkaApis.handleAddPartitionsToTransactionRequest: TRANSACTIONAL_ID
WRITE (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition); TOPIC WRITE per topic and unknown
partitions fail the request per partition (TOPIC_AUTHORIZATION_FAILED / UNKNOWN_TOPIC_OR_PARTITION, the
others OPERATION_NOT_ATTEMPTED); otherwise one error for all partitions from the coordinator.
"""

from __future__ import annotations

from logway.gateway.broker import now_ms
from logway.gateway.transactions import fenced_for_version
from logway.server.security.authorizer import Operation, ResourceType
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

API_KEY = 24
MIN_VERSION = 0
MAX_VERSION = 3


def _partition_errors(ctx, topics) -> dict[tuple[str, int], int]:
    """Per-partition errors found before asking the coordinator: denied topics and unknown partitions."""
    denied = ctx.denied_topics(Operation.WRITE, (t.name for t in topics))
    errors = {}
    for topic in topics:
        info = ctx.broker.logs.topics.get(topic.name)
        for p in topic.partitions:
            if topic.name in denied:
                errors[(topic.name, p)] = ErrorCode.topic_authorization_failed
            elif info is None or not 0 <= p < len(info.partitions):
                errors[(topic.name, p)] = ErrorCode.unknown_topic_or_partition
    return errors


async def handle(ctx, request):
    tid = request.v3_and_below_transactional_id
    topics = request.v3_and_below_topics
    wanted = [(t.name, p) for t in topics for p in t.partitions]
    if not ctx.authorized(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
        errors = dict.fromkeys(wanted, ErrorCode.transactional_id_authorization_failed)
    else:
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
