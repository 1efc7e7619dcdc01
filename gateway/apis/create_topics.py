"""CreateTopics (key 19), v2-v7.

v1+: validate_only; v4: num_partitions/replication_factor may be -1 (use num.partitions /
default.replication.factor); v5: flexible, the result carries num_partitions, replication_factor and
the topic's configs; v7: topic_id. This is a single broker: a replication factor other than 1 (or -1)
gets INVALID_REPLICATION_FACTOR; manual replica assignments naming other brokers get INVALID_REPLICA_ASSIGNMENT.
A request for more than max.partitions.per.request partitions in all gets POLICY_VIOLATION (see _over_limit).
The partitions are made in chunks on a worker thread (Broker.create_topic): other clients keep being answered.
A controller_mutation_rate quota (KIP-599) counts each topic's partitions, validate_only too, as Kafka's controller:
from v6 a topic met with the quota spent gets THROTTLING_QUOTA_EXCEEDED; the answer carries the throttle time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logway.gateway.throttling import take_mutations
from logway.storage.config import LogConfig
from logway.wire.errors import ErrorCode, KafkaError
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.create_topics.v7.request import CreateTopicsRequest
    from kio.schema.create_topics.v7.response import CreateTopicsResponse

    from logway.gateway.context import RequestContext

API_KEY = 19
MIN_VERSION = 2
MAX_VERSION = 7

# DescribeConfigs ConfigSource: DEFAULT_CONFIG=5, TOPIC_CONFIG=1.
SOURCE_TOPIC = 1
SOURCE_DEFAULT = 5
STRICT_QUOTA_FROM = 6  # KIP-599: a controller_mutation_rate quota refuses topics from v6, throttles before


def _validate(broker, t) -> tuple[int, dict[str, str]]:
    partitions = t.num_partitions
    if t.assignments:
        if partitions != -1 or t.replication_factor != -1:
            raise KafkaError("both assignments and partitions/replication factor given", ErrorCode.invalid_request)
        if any(tuple(a.broker_ids) != (broker.node_id,) for a in t.assignments):
            raise KafkaError("replicas must be on this broker only", ErrorCode.invalid_replica_assignment)
        partitions = len(t.assignments)
    if partitions == -1:
        partitions = broker.config.num_partitions
    if partitions <= 0:
        raise KafkaError("Number of partitions must be larger than 0.", ErrorCode.invalid_partitions)
    if t.replication_factor not in (-1, 1) and not t.assignments:
        raise KafkaError(
            f"Unable to replicate the partition {t.replication_factor} time(s): The target replication factor "
            f"of {t.replication_factor} cannot be reached because only 1 broker(s) are registered.",
            ErrorCode.invalid_replication_factor,
        )
    configs = {}
    for c in t.configs:
        if c.value is None:
            raise KafkaError(f"Null value not supported for topic configs: {c.name}", ErrorCode.invalid_config)
        configs[c.name] = c.value
    return partitions, configs


def _over_limit(broker, request) -> str | None:
    """The POLICY_VIOLATION message when the request asks for more partitions than max.partitions.per.request.

    Kafka's controller refuses a user operation that would write more than 10000 metadata records
    (QuorumController.MAX_RECORDS_PER_USER_OP, one per partition) with POLICY_VIOLATION "Unable to perform
    excessively large batch operation."; the partitions of the whole request count, as they do there.
    """
    limit = broker.config.max_partitions_per_request
    total = 0
    for t in request.topics:
        total += len(t.assignments) if t.assignments else (
            broker.config.num_partitions if t.num_partitions == -1 else max(t.num_partitions, 0))
    if total <= limit:
        return None
    return (f"Unable to perform excessively large batch operation: {total} partitions requested, "
            f"max.partitions.per.request is {limit}.")


async def handle(ctx: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    broker = ctx.broker
    too_large = _over_limit(broker, request)
    results = []
    for t in request.topics:
        result = {"name": t.name, "topic_id": None, "error_code": ErrorCode.none, "error_message": None,
                  "num_partitions": -1, "replication_factor": -1, "configs": None}
        try:
            if t.name in broker.logs.topics or t.name in broker.logs.creating:
                raise KafkaError(f"Topic '{t.name}' already exists.", ErrorCode.topic_already_exists)
            partitions, configs = _validate(broker, t)
            if too_large:
                raise KafkaError(too_large, ErrorCode.policy_violation)
            take_mutations(ctx, partitions, STRICT_QUOTA_FROM)
            if request.validate_only:
                topic_id = None
                effective = LogConfig.from_properties(configs, broker.logs.default_config).to_properties()
            else:
                topic = await broker.create_topic(t.name, partitions, configs)
                topic_id = topic.topic_id
                effective = topic.config.to_properties()
            result.update(
                topic_id=topic_id, num_partitions=partitions, replication_factor=1,
                configs=[{"name": k, "value": v, "read_only": False, "is_sensitive": False,
                          "config_source": SOURCE_TOPIC if k in configs else SOURCE_DEFAULT}
                         for k, v in sorted(effective.items())],
            )
        except KafkaError as exc:
            result.update(error_code=exc.error_code, error_message=str(exc))
        results.append(result)
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "topics": results})
