"""CreatePartitions (key 37), v0-v3. v1: no change; v2: flexible; v3: no change.

Increases a topic's partition count (INVALID_PARTITIONS if not larger); manual assignments must name this
broker only. validate_only checks without creating. More than max.partitions.per.request new partitions in
one request get POLICY_VIOLATION; the partitions are made off the event loop (Broker.create_partitions). The new
partitions count against a controller_mutation_rate quota (KIP-599; v3+: THROTTLING_QUOTA_EXCEEDED once spent).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.gateway.apis.metadata import INTERNAL_TOPICS
from logway.gateway.throttling import take_mutations
from logway.wire.errors import ErrorCode, KafkaError
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.create_partitions.v3.request import CreatePartitionsRequest
    from kio.schema.create_partitions.v3.response import CreatePartitionsResponse

    from logway.gateway.context import RequestContext

API_KEY = 37
MIN_VERSION = 0
MAX_VERSION = 3
STRICT_QUOTA_FROM = 3  # KIP-599: a controller_mutation_rate quota refuses topics from v3, throttles before


async def _create(ctx: RequestContext, t, validate_only: bool, budget: list[int]) -> None:
    broker = ctx.broker
    topic = broker.logs.topics.get(t.name)
    if topic is None:
        raise KafkaError(f"The topic '{t.name}' does not exist.", ErrorCode.unknown_topic_or_partition)
    if t.name in INTERNAL_TOPICS:
        raise KafkaError(f"Cannot increase the number of partitions of internal topic {t.name}",
                         ErrorCode.invalid_request)
    current = len(topic.partitions)
    if t.count <= current:
        raise KafkaError(f"Topic currently has {current} partitions, which is higher than the requested {t.count}."
                         if t.count < current else f"Topic already has {current} partitions.",
                         ErrorCode.invalid_partitions)
    if t.assignments is not None:
        if len(t.assignments) != t.count - current:
            raise KafkaError(f"Increasing the number of partitions by {t.count - current} but "
                             f"{len(t.assignments)} assignments provided.", ErrorCode.invalid_replica_assignment)
        if any(tuple(a.broker_ids) != (broker.node_id,) for a in t.assignments):
            raise KafkaError("replicas must be on this broker only", ErrorCode.invalid_replica_assignment)
    # The same bound as CreateTopics (Kafka's MAX_RECORDS_PER_USER_OP: one record per new partition).
    budget[0] -= t.count - current
    if budget[0] < 0:
        raise KafkaError(f"Unable to perform excessively large batch operation: more than "
                         f"max.partitions.per.request={broker.config.max_partitions_per_request} new partitions "
                         f"in one request.", ErrorCode.policy_violation)
    take_mutations(ctx, t.count - current, STRICT_QUOTA_FROM)
    if not validate_only:
        await broker.create_partitions(t.name, t.count)


async def handle(ctx: RequestContext, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    results = []
    budget = [ctx.broker.config.max_partitions_per_request]
    for t in request.topics:
        result = {"name": t.name, "error_code": ErrorCode.none, "error_message": None}
        try:
            await _create(ctx, t, request.validate_only, budget)
        except KafkaError as exc:
            result.update(error_code=exc.error_code, error_message=str(exc))
        results.append(result)
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "results": results})
