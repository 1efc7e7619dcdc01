"""InitProducerId (key 22), v0-v5.

Without a transactional id (idempotent producers of kafka-python 3.x and the Java client) every call gets a
fresh producer id with epoch 0, as Kafka does, even when v3+ passes an existing id/epoch (KIP-360). With a
transactional id the transaction coordinator bumps the id's epoch (fencing older producers of the same id),
aborting an ongoing transaction first (CONCURRENT_TRANSACTIONS: the client retries). v2: flexible; v3:
producer_id/epoch in the request (KIP-360 epoch bump of the current producer); v4: PRODUCER_FENCED (older
versions get INVALID_PRODUCER_EPOCH instead, KIP-588); v5: no change for us. Under ACLs the id is the
principal's: another's batches carrying it are refused (gateway/apis/produce.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.gateway.broker import now_ms
from logway.gateway.transactions import fenced_for_version
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.init_producer_id.v5.request import InitProducerIdRequest
    from kio.schema.init_producer_id.v5.response import InitProducerIdResponse

    from logway.gateway.context import RequestContext

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 5


async def _transactional(ctx: RequestContext, request) -> dict:
    tid = request.transactional_id
    service = ctx.broker.transactions
    await service.ensure_topic()
    timeout_ms = int(request.transaction_timeout.total_seconds() * 1000)
    expected_pid = getattr(request, "producer_id", -1)
    expected_epoch = getattr(request, "producer_epoch", -1)
    result = service.coordinator.init_producer_id(tid, timeout_ms, expected_pid, expected_epoch, now_ms())
    await service.flush_pending()
    return {"error_code": fenced_for_version(result.error, ctx.version, 4), "producer_id": result.producer_id,
            "producer_epoch": result.producer_epoch}


async def handle(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        body = await _transactional(ctx, request)
    else:
        body = {"error_code": ErrorCode.none, "producer_id": ctx.broker.next_producer_id(), "producer_epoch": 0}
    if body["error_code"] == ErrorCode.none and ctx.realm.authorizer is not None:
        ctx.broker.producer_owners.grant(body["producer_id"], ctx.owner)  # its batches are its only
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, **body})
