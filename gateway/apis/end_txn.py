"""EndTxn (key 26), v0-v5.

Commits or aborts the producer's transaction: the coordinator writes PrepareCommit/PrepareAbort to
__transaction_state, the markers to every partition of the transaction, then CompleteCommit/CompleteAbort;
the answer goes out once all of it is written (Kafka answers after the Prepare state and writes the markers
asynchronously; a client cannot tell the difference except that ours are already visible). v1: no change;
v2: PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH); v3: flexible; v4: TRANSACTION_ABORTABLE may
be answered (never by us); v5 (transaction version 2, KIP-890 part 2): every end bumps the producer epoch
(a new producer id past an exhausted one), answered in producer_id / producer_epoch; a retry at the previous
epoch gets the same answer (TransactionCoordinator.end_txn_v2).
TRANSACTIONAL_ID WRITE, as KafkaApis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.gateway.broker import now_ms
from logway.gateway.transactions import fenced_for_version
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.end_txn.v4.request import EndTxnRequest
    from kio.schema.end_txn.v4.response import EndTxnResponse

    from logway.gateway.context import RequestContext

API_KEY = 26
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    service = ctx.broker.transactions
    if ctx.version >= 5:
        result = service.coordinator.end_txn_v2(request.transactional_id, request.producer_id,
                                                request.producer_epoch, bool(request.committed), now_ms())
        await service.flush_pending()
        return build(response_type(API_KEY, ctx.version), {
            "throttle_time": 0, "error_code": result.error, "producer_id": result.producer_id,
            "producer_epoch": result.producer_epoch})
    error = service.coordinator.end_txn(request.transactional_id, request.producer_id, request.producer_epoch,
                                        bool(request.committed), now_ms())
    await service.flush_pending()
    error = fenced_for_version(error, ctx.version, 2)
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "error_code": error})
