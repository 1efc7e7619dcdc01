"""InitProducerId (key 22), v0-v5.

The idempotent producers of kafka-python 3.x and the Java client (default since 3.0) call it with a null
transactional id before producing. As Kafka does for a null transactional id, every call gets a fresh
producer id with epoch 0, even when v3+ passes an existing id/epoch (KIP-360). v2: flexible; v3:
producer_id/epoch in the request; v4: PRODUCER_FENCED; v5: no change for us. Transactions are not served:
a non-null transactional id gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from logway.gateway.security.authorizer import CLUSTER_NAME, Operation, ResourceType, client_host
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 5


def _may_write_idempotently(ctx) -> bool:
    """KafkaApis.handleInitProducerIdRequest without a transactional id: CLUSTER IDEMPOTENT_WRITE, or WRITE on
    some topic (Kafka 3.0+, KIP-679)."""
    authorizer = ctx.broker.authorizer
    if authorizer is None or ctx.authorized(Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME):
        return True
    return authorizer.any_allowed(ctx.principal, client_host(ctx.connection.peer), Operation.WRITE, ResourceType.TOPIC)


async def handle(ctx, request):
    if request.transactional_id is not None:
        body = {"error_code": ErrorCode.transactional_id_authorization_failed, "producer_id": -1, "producer_epoch": -1}
    elif not _may_write_idempotently(ctx):
        body = {"error_code": ErrorCode.cluster_authorization_failed, "producer_id": -1, "producer_epoch": -1}
    else:
        body = {"error_code": ErrorCode.none, "producer_id": ctx.broker.next_producer_id(), "producer_epoch": 0}
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, **body})
