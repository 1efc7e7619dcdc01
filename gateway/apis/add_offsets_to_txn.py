"""AddOffsetsToTxn (key 25), v0-v4.

Puts the group's __consumer_offsets partition in the producer's transaction, before TxnOffsetCommit
(sendOffsetsToTransaction). v1: no change; v2: PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH);
v3: flexible; v4: TRANSACTION_ABORTABLE may be answered (KIP-890; never by us). As KafkaApis:
TRANSACTIONAL_ID WRITE, then GROUP READ.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.gateway.broker import now_ms
from logway.gateway.groups import OFFSETS_TOPIC
from logway.gateway.transactions import fenced_for_version
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.add_offsets_to_txn.v4.request import AddOffsetsToTxnRequest
    from kio.schema.add_offsets_to_txn.v4.response import AddOffsetsToTxnResponse

    from logway.gateway.context import RequestContext

API_KEY = 25
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    broker = ctx.broker
    partition = broker.groups.coordinator.partition_for(request.group_id)
    service = broker.transactions
    error = service.coordinator.add_partitions(request.transactional_id, request.producer_id,
                                               request.producer_epoch, [(OFFSETS_TOPIC, partition)], now_ms())
    await service.flush_pending()
    error = fenced_for_version(error, ctx.version, 2)
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "error_code": error})
