"""ListTransactions (key 66), v0-v2.

The transactional ids this coordinator knows (kafka-transactions.sh list), filtered as Kafka's
TransactionStateManager.listTransactionStates does: by state names (unknown names are echoed in
unknown_state_filters), producer ids, v1: duration_filter (only transactions whose start time is more than
that many ms ago; -1 for no filter), v2: transactional_id_pattern (a regular expression the whole id must match, KIP-1152;
an invalid one answers INVALID_REGULAR_EXPRESSION). Only ids the principal may DESCRIBE are listed;
COORDINATOR_LOAD_IN_PROGRESS while any state partition loads.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

from logway.coordinator.txn_metadata import STATE_BY_NAME
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.list_transactions.v2.request import ListTransactionsRequest
    from kio.schema.list_transactions.v2.response import ListTransactionsResponse

    from logway.gateway.context import RequestContext

API_KEY = 66
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: RequestContext, request: ListTransactionsRequest) -> ListTransactionsResponse:
    coordinator = ctx.broker.transactions.coordinator
    body = {"throttle_time": 0, "error_code": ErrorCode.none, "unknown_state_filters": [], "transaction_states": []}
    unknown = [s for s in request.state_filters if s not in STATE_BY_NAME]
    states = {STATE_BY_NAME[s] for s in request.state_filters if s in STATE_BY_NAME}
    pids = set(request.producer_id_filters)
    duration = getattr(request, "duration_filter", -1)
    pattern_text = getattr(request, "transactional_id_pattern", None)
    try:
        pattern = re.compile(pattern_text) if pattern_text else None
    except re.error:
        return build(response_type(API_KEY, ctx.version), {**body, "error_code": ErrorCode.invalid_regular_expression})
    if coordinator.loading:
        return build(response_type(API_KEY, ctx.version), {**body, "error_code": ErrorCode.coordinator_load_in_progress})
    now = int(time.time() * 1000)
    listed = []
    for meta in coordinator.transactions():
        if request.state_filters and meta.state not in states:
            continue
        if pids and meta.producer_id not in pids:
            continue
        if duration >= 0 and now - meta.start_ms <= duration:  # Kafka's filter, on the start time whatever the state
            continue
        if pattern is not None and not pattern.fullmatch(meta.transactional_id):
            continue
        listed.append({"transactional_id": meta.transactional_id, "producer_id": meta.producer_id,
                       "transaction_state": meta.state.kafka_name})
    body.update(unknown_state_filters=unknown, transaction_states=listed)
    return build(response_type(API_KEY, ctx.version), body)
