"""DescribeTopicPartitions (key 75), v0 (KIP-966; newer Java Admin clients describe topics with it).

Topics in name order, each with its partitions (this broker leads every one: leader epoch 0, replicas and ISR
[this node], no eligible or last-known ELR, no offline replicas) and the principal's authorized operations.
An empty topic list means every topic the principal may DESCRIBE. Paging as Kafka's
DescribeTopicPartitionsRequestHandler and KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse: at most
``response_partition_limit`` partitions (clamped to 1..2000, max.request.partition.size.limit), then
``next_cursor`` names the first partition left out; a request ``cursor`` starts there (topics named before
it are skipped). A cursor topic missing from the named topics, or a negative cursor partition, is
INVALID_REQUEST for every topic. Named topics: UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION for an
illegal name. Under ACLs request_acls serves only the topics the principal may DESCRIBE and lists the others
last with TOPIC_AUTHORIZATION_FAILED, as Kafka.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from logway.gateway.apis.metadata import INTERNAL_TOPICS
from logway.server.security.authorizer import ResourceType
from logway.storage.errors import InvalidTopic
from logway.storage.topic import validate_topic_name
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.describe_topic_partitions.v0.request import DescribeTopicPartitionsRequest
    from kio.schema.describe_topic_partitions.v0.response import DescribeTopicPartitionsResponse

    from logway.gateway.context import RequestContext

API_KEY = 75
MIN_VERSION = 0
MAX_VERSION = 0

MAX_PARTITIONS = 2000  # Kafka's max.request.partition.size.limit default
OPERATIONS_OMITTED = -(2**31)
ZERO_UUID = uuid.UUID(int=0)


def _topic(name: str, error: int, topic_id: uuid.UUID = ZERO_UUID, partitions: list | None = None) -> dict:
    return {"error_code": error, "name": name, "topic_id": topic_id, "is_internal": name in INTERNAL_TOPICS,
            "partitions": partitions or [], "topic_authorized_operations": OPERATIONS_OMITTED}


def _partitions(node: int, first: int, last: int) -> list[dict]:
    return [{"error_code": ErrorCode.none, "partition_index": i, "leader_id": node, "leader_epoch": 0,
             "replica_nodes": [node], "isr_nodes": [node], "eligible_leader_replicas": [], "last_known_elr": [],
             "offline_replicas": []} for i in range(first, last)]


def _unknown_error(name: str) -> int:
    try:
        validate_topic_name(name)
    except InvalidTopic:
        return ErrorCode.invalid_topic_exception
    return ErrorCode.unknown_topic_or_partition


def _page(broker, names: list[str], cursor, limit: int, all_topics: bool) -> tuple[list[dict], dict | None]:
    """KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse: topics until ``limit`` partitions are out."""
    remaining = limit
    out: list[dict] = []
    for name in names:
        if remaining == 0:
            return out, {"topic_name": name, "partition_index": 0}
        topic = broker.logs.topics.get(name)
        if topic is None:
            if not all_topics:
                out.append(_topic(name, _unknown_error(name)))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        count = len(topic.partitions)
        upper = min(count, start + remaining)
        out.append(_topic(name, ErrorCode.none, topic.topic_id, _partitions(broker.node_id, start, upper)))
        if upper < count:
            return out, {"topic_name": name, "partition_index": upper}
        remaining -= max(upper - start, 0)
    return out, None


def _listed(ctx: RequestContext) -> list[str]:
    """Every topic, or under ACLs those the principal may see (paged after filtering, as Kafka)."""
    visible = ctx.decision.visible if ctx.decision is not None else None
    return [name for name in ctx.broker.logs.topics if visible is None or visible(name)]


async def handle(ctx: RequestContext, request: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse:
    broker = ctx.broker
    cursor = request.cursor
    start_name = cursor.topic_name if cursor is not None else ""
    all_topics = not request.topics
    requested = _listed(ctx) if all_topics else [t.name for t in request.topics]
    names = sorted({n for n in requested if n >= start_name})
    problem = None
    if not all_topics and cursor is not None and cursor.topic_name not in names:
        problem = f"DescribeTopicPartitionsRequest topic list should contain the cursor topic: {cursor.topic_name}"
    elif cursor is not None and cursor.partition_index < 0:
        problem = f"DescribeTopicPartitionsRequest cursor partition must be valid: {cursor}"
    if problem is not None:  # KafkaApis answers the request's getErrorResponse: every topic gets the error
        topics = [_topic(t.name, ErrorCode.invalid_request) for t in request.topics]
        return build(response_type(API_KEY, 0), {"throttle_time": 0, "topics": topics, "next_cursor": None})
    limit = max(min(MAX_PARTITIONS, request.response_partition_limit), 1)
    topics, next_cursor = _page(broker, names, cursor, limit, all_topics)
    for entry in topics:
        entry["topic_authorized_operations"] = ctx.authorized_operations(ResourceType.TOPIC, entry["name"])
    return build(response_type(API_KEY, 0), {"throttle_time": 0, "topics": topics, "next_cursor": next_cursor})
