"""CreatePartitions (key 37), v0-v3. v1: no change; v2: flexible; v3: no change.

Increases a topic's partition count (INVALID_PARTITIONS if not larger); manual assignments must name this
broker only. validate_only checks without creating.
"""

from __future__ import annotations

from logway.gateway.apis.create_topics import MAX_PARTITIONS_PER_REQUEST, TOO_LARGE
from logway.gateway.apis.metadata import INTERNAL_TOPICS
from logway.wire.errors import ErrorCode, KafkaError
from logway.wire.protocol import build, response_type

API_KEY = 37
MIN_VERSION = 0
MAX_VERSION = 3


def _create(broker, t, validate_only: bool) -> None:
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
    if not validate_only:
        broker.logs.create_partitions(t.name, t.count)


async def handle(ctx, request):
    results = []
    budget = MAX_PARTITIONS_PER_REQUEST
    for t in request.topics:
        result = {"name": t.name, "error_code": ErrorCode.none, "error_message": None}
        try:
            topic = ctx.broker.logs.topics.get(t.name)
            added = max(0, t.count - len(topic.partitions)) if topic is not None else 0
            if added > budget:
                # Kafka's controller: more than MAX_RECORDS_PER_USER_OP new partition records in one request.
                raise KafkaError(TOO_LARGE, ErrorCode.policy_violation)
            _create(ctx.broker, t, request.validate_only)
            budget -= added
        except KafkaError as exc:
            result.update(error_code=exc.error_code, error_message=str(exc))
        results.append(result)
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "results": results})
