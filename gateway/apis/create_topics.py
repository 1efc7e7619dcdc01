"""CreateTopics (key 19), v2-v7.

v1+: validate_only; v4: num_partitions/replication_factor may be -1 (use num.partitions /
default.replication.factor); v5: flexible, the result carries num_partitions, replication_factor and
the topic's configs; v7: topic_id. This is a single broker: a replication factor other than 1 (or -1)
gets INVALID_REPLICATION_FACTOR; manual replica assignments naming other brokers get INVALID_REPLICA_ASSIGNMENT.
"""

from __future__ import annotations

from logway.storage.config import LogConfig
from logway.wire.errors import ErrorCode, KafkaError
from logway.wire.protocol import build, response_type

API_KEY = 19
MIN_VERSION = 2
MAX_VERSION = 7

# Kafka's controller refuses an operation of more than MAX_RECORDS_PER_USER_OP (10000) records, one per
# partition, with POLICY_VIOLATION "Unable to perform excessively large batch operation." (QuorumController,
# EventHandlerExceptionInfo): the whole request fails, not only the topic that crosses the limit.
MAX_PARTITIONS_PER_REQUEST = 10_000
TOO_LARGE = "Unable to perform excessively large batch operation."

# DescribeConfigs ConfigSource: DEFAULT_CONFIG=5, TOPIC_CONFIG=1.
SOURCE_TOPIC = 1
SOURCE_DEFAULT = 5


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


def requested_partitions(broker, topics) -> int:
    """Partitions the request would create, counted as Kafka's controller counts them."""
    total = 0
    for t in topics:
        if t.assignments:
            total += len(t.assignments)
        elif t.num_partitions == -1:
            total += broker.config.num_partitions
        elif t.num_partitions > 0:
            total += t.num_partitions
    return total


async def handle(ctx, request):
    broker = ctx.broker
    if requested_partitions(broker, request.topics) > MAX_PARTITIONS_PER_REQUEST:
        return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "topics": [
            {"name": t.name, "error_code": ErrorCode.policy_violation, "error_message": TOO_LARGE,
             "num_partitions": -1, "replication_factor": -1, "configs": None} for t in request.topics]})
    results = []
    for t in request.topics:
        result = {"name": t.name, "topic_id": None, "error_code": ErrorCode.none, "error_message": None,
                  "num_partitions": -1, "replication_factor": -1, "configs": None}
        try:
            if t.name in broker.logs.topics:
                raise KafkaError(f"Topic '{t.name}' already exists.", ErrorCode.topic_already_exists)
            partitions, configs = _validate(broker, t)
            if request.validate_only:
                topic_id = None
                effective = LogConfig.from_properties(configs, broker.config.log_config).to_properties()
            else:
                topic = broker.logs.create_topic(t.name, partitions, configs)
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
