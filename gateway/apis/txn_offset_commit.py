"""TxnOffsetCommit (key 28), v0-v4.

A transactional producer commits a consumer group's offsets inside its transaction (sendOffsetsToTransaction):
they are written to __consumer_offsets in a transactional batch and become the group's committed offsets
only when the COMMIT marker is written. v2: committed_leader_epoch; v3: flexible, and the consumer's
group metadata (generation_id, member_id, group_instance_id) checked against the group (KIP-447); v4:
TRANSACTION_ABORTABLE may be answered (never by us). As KafkaApis.handleTxnOffsetCommitRequest:
TRANSACTIONAL_ID WRITE, GROUP READ, then TOPIC READ per topic; unknown partitions get
UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.gateway.apis.offset_commit import offsets_to_commit
from logway.gateway.transactions import fenced_for_version
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.txn_offset_commit.v4.request import TxnOffsetCommitRequest
    from kio.schema.txn_offset_commit.v4.response import TxnOffsetCommitResponse

    from logway.gateway.context import RequestContext

API_KEY = 28
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    broker = ctx.broker
    offsets, errors = offsets_to_commit(broker, request.topics)
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
