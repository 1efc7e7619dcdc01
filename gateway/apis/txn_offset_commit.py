"""TxnOffsetCommit (key 28), v0-v5.

A transactional producer commits a consumer group's offsets inside its transaction (sendOffsetsToTransaction):
they are written to __consumer_offsets in a transactional batch and become the group's committed offsets
only when the COMMIT marker is written. v2: committed_leader_epoch; v3: flexible, and the consumer's
group metadata (generation_id, member_id, group_instance_id) checked against the group (KIP-447); v4:
TRANSACTION_ABORTABLE may be answered (never by us); v5 (transaction version 2): the group's __consumer_offsets
partition joins the transaction here (no AddOffsetsToTxn from the client; a producer fenced meanwhile gets
INVALID_PRODUCER_EPOCH for every partition, as Kafka's AddPartitionsToTxnManager answers). As
KafkaApis.handleTxnOffsetCommitRequest:
TRANSACTIONAL_ID WRITE, GROUP READ, then TOPIC READ per topic; unknown partitions get
UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.gateway.apis.offset_commit import offsets_to_commit
from logway.gateway.broker import now_ms
from logway.gateway.groups import OFFSETS_TOPIC
from logway.gateway.transactions import fenced_for_version
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.txn_offset_commit.v4.request import TxnOffsetCommitRequest
    from kio.schema.txn_offset_commit.v4.response import TxnOffsetCommitResponse

    from logway.gateway.context import RequestContext

API_KEY = 28
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    broker = ctx.broker
    offsets, errors = offsets_to_commit(broker, request.topics)
    if offsets:
        error = await _add_offsets_partition(ctx, request)
        if error != ErrorCode.none:
            errors.update({(o.topic, o.partition): error for o in offsets})
            offsets = []
    if offsets:
        groups = broker.groups
        result = await groups.call(
            groups.coordinator.txn_offset_commit,
            group_id=request.group_id,
            producer_id=request.producer_id,
            producer_epoch=request.producer_epoch,
            generation_id=getattr(request, "generation_id", -1),
            member_id=getattr(request, "member_id", ""),
            group_instance_id=getattr(request, "group_instance_id", None),
            offsets=offsets,
        )
        errors.update({tp: fenced_for_version(e, ctx.version, 3) for tp, e in result.partitions.items()})
    topics = [{"name": t.name, "partitions": [
        {"partition_index": p.partition_index, "error_code": errors[(t.name, p.partition_index)]}
        for p in t.partitions]} for t in request.topics]
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "topics": topics})


async def _add_offsets_partition(ctx, request) -> ErrorCode:
    """The group's __consumer_offsets partition and the producer's transaction, as Kafka's CoordinatorRuntime
    checks them before a transactional write: v5 (transaction version 2) adds the partition to the transaction,
    older versions verify that AddOffsetsToTxn added it (a producer of an older epoch: INVALID_PRODUCER_EPOCH; not
added: INVALID_TXN_STATE, TRANSACTION_ABORTABLE from v4)."""
    service = ctx.broker.transactions
    partition = ctx.broker.groups.coordinator.partition_for(request.group_id)
    tp = (OFFSETS_TOPIC, partition)
    if ctx.version >= 5:
        error = service.coordinator.add_partitions(request.transactional_id, request.producer_id,
                                                   request.producer_epoch, [tp], now_ms(), client_version=2)
        await service.flush_pending()
    else:
        error = service.coordinator.verify_partition(request.transactional_id, request.producer_id,
                                                     request.producer_epoch, tp)
        if error == ErrorCode.invalid_txn_state and ctx.version >= 4:
            error = ErrorCode.transaction_abortable
    return ErrorCode.invalid_producer_epoch if error == ErrorCode.producer_fenced else error
